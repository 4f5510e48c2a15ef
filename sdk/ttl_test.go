package sdk_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// beyondDuration is a ttl_ms whose nanoseconds overflow an int64: taken as
// it comes it wraps to about two seconds.
const beyondDuration = 18446744075710

// ttlFake grants sessions and renewals with the TTLs the test sets, and
// records the sessions closed.
type ttlFake struct {
	bfspb.UnimplementedNameServerServer
	openTTL, keepAliveTTL, listTTL int64

	mu     sync.Mutex
	closed []string
}

func (f *ttlFake) OpenSession(context.Context, *bfspb.OpenSessionRequest) (*bfspb.OpenSessionResponse, error) {
	return &bfspb.OpenSessionResponse{SessionId: "s1", TtlMs: f.openTTL}, nil
}

func (f *ttlFake) KeepAlive(context.Context, *bfspb.KeepAliveRequest) (*bfspb.KeepAliveResponse, error) {
	return &bfspb.KeepAliveResponse{TtlMs: f.keepAliveTTL}, nil
}

func (f *ttlFake) CloseSession(_ context.Context, req *bfspb.CloseSessionRequest) (*bfspb.CloseSessionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = append(f.closed, req.SessionId)
	return &bfspb.CloseSessionResponse{}, nil
}

func (f *ttlFake) ListSessions(context.Context, *bfspb.ListSessionsRequest) (*bfspb.ListSessionsResponse, error) {
	return &bfspb.ListSessionsResponse{Sessions: []*bfspb.SessionInfo{{SessionId: "s1", Holder: "h", TtlMs: f.listTTL, RemainingMs: 100}}}, nil
}

func (f *ttlFake) closedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.closed...)
}

// TestGrantedTTLBeyondADurationIsRefused: a TTL the nameserver grants
// must fit a time.Duration. An open granting more fails (and gives the
// session back) rather than keeping a session alive on a wrapped TTL.
func TestGrantedTTLBeyondADurationIsRefused(t *testing.T) {
	f := &ttlFake{openTTL: beyondDuration, keepAliveTTL: 60000}
	c := dial(t, serveFake(t, f))
	s, err := c.Session(context.Background())
	require.ErrorIs(t, err, sdk.ErrInternal, "granted %v", sessionTTL(s))
	require.ErrorContains(t, err, "18446744075710")
	require.Equal(t, []string{"s1"}, f.closedIDs(), "the session is given back")
}

func sessionTTL(s *sdk.Session) time.Duration {
	if s == nil {
		return 0
	}
	return s.TTL()
}

// TestRenewedTTLBeyondADurationIsNoRenewal: a keep-alive answered with a
// TTL beyond a Duration does not count as a renewal, so the session is
// lost about a TTL after it was opened, as when renewals fail.
func TestRenewedTTLBeyondADurationIsNoRenewal(t *testing.T) {
	f := &ttlFake{openTTL: 300, keepAliveTTL: beyondDuration}
	c := dial(t, serveFake(t, f), sdk.WithSessionTTL(300*time.Millisecond))
	s, err := c.Session(context.Background())
	require.NoError(t, err)
	waitClosed(t, s.Done(), "session loss")
	require.ErrorIs(t, s.Err(), sdk.ErrSessionExpired)
}

func TestListedTTLBeyondADurationIsAnError(t *testing.T) {
	f := &ttlFake{listTTL: beyondDuration}
	c := dial(t, serveFake(t, f))
	list, err := c.Sessions(context.Background())
	require.ErrorIs(t, err, sdk.ErrInternal, "listed %+v", list)
}
