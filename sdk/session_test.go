package sdk_test

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// fakeNS is a scripted nameserver for the session machinery: it records
// what the SDK sends and answers as the test says.
type fakeNS struct {
	bfspb.UnimplementedNameServerServer

	keepalives chan string // session id of each KeepAlive, when there is room

	mu struct {
		sync.Mutex
		next            int
		opened          []*bfspb.OpenSessionRequest
		ids             []string
		closed          []string
		keepAliveStatus bfspb.StatusCode
		// expireOnMkdir answers Mkdir with SESSION_EXPIRED for these ids.
		expireOnMkdir map[string]bool
		mkdirSessions []string
		statStatus    bfspb.StatusCode
		names         []string // what List pages through
		starts        []string // start_after of each List
	}
}

func startFake(t *testing.T) (*fakeNS, string) {
	t.Helper()
	f := &fakeNS{keepalives: make(chan string, 100)}
	f.mu.expireOnMkdir = map[string]bool{}
	return f, serveFake(t, f)
}

func (f *fakeNS) OpenSession(_ context.Context, req *bfspb.OpenSessionRequest) (*bfspb.OpenSessionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.next++
	id := fmt.Sprintf("s%d", f.mu.next)
	f.mu.opened = append(f.mu.opened, req)
	f.mu.ids = append(f.mu.ids, id)
	return &bfspb.OpenSessionResponse{SessionId: id, TtlMs: req.GetTtlMs()}, nil
}

func (f *fakeNS) KeepAlive(_ context.Context, req *bfspb.KeepAliveRequest) (*bfspb.KeepAliveResponse, error) {
	select {
	case f.keepalives <- req.GetSessionId():
	default:
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return &bfspb.KeepAliveResponse{Status: f.mu.keepAliveStatus}, nil
}

func (f *fakeNS) CloseSession(_ context.Context, req *bfspb.CloseSessionRequest) (*bfspb.CloseSessionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.closed = append(f.mu.closed, req.GetSessionId())
	return &bfspb.CloseSessionResponse{}, nil
}

func (f *fakeNS) Mkdir(_ context.Context, req *bfspb.MkdirRequest) (*bfspb.MkdirResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.mkdirSessions = append(f.mu.mkdirSessions, req.GetSessionId())
	if f.mu.expireOnMkdir[req.GetSessionId()] {
		return &bfspb.MkdirResponse{Status: bfspb.StatusCode_SESSION_EXPIRED}, nil
	}
	return &bfspb.MkdirResponse{}, nil
}

func (f *fakeNS) Stat(_ context.Context, req *bfspb.StatRequest) (*bfspb.StatResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &bfspb.StatResponse{Status: f.mu.statStatus, Info: &bfspb.FileInfo{Name: "x", Type: bfspb.FileType_FILE_TYPE_FILE}}, nil
}

// List answers two names per page.
func (f *fakeNS) List(_ context.Context, req *bfspb.ListRequest) (*bfspb.ListResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.starts = append(f.mu.starts, req.GetStartAfter())
	resp := &bfspb.ListResponse{}
	for _, n := range f.mu.names {
		if n <= req.GetStartAfter() {
			continue
		}
		if len(resp.Entries) == 2 {
			resp.More = true
			break
		}
		resp.Entries = append(resp.Entries, &bfspb.FileInfo{Name: n, Type: bfspb.FileType_FILE_TYPE_FILE})
	}
	return resp, nil
}

func (f *fakeNS) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func dial(t *testing.T, addr string, opts ...sdk.Option) *sdk.Client {
	t.Helper()
	c, err := sdk.Dial(context.Background(), addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitClosed fails the test unless ch is closed within a generous deadline.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestSessionKeepAliveThenExpiry(t *testing.T) {
	f, addr := startFake(t)
	const ttl = 300 * time.Millisecond
	c := dial(t, addr, sdk.WithSessionTTL(ttl), sdk.WithHolder("h1"))
	ctx := context.Background()

	s, err := c.Session(ctx)
	require.NoError(t, err)
	assert.Equal(t, "h1", s.Holder())
	assert.Equal(t, ttl, s.TTL())
	f.set(func() {
		require.Len(t, f.mu.opened, 1)
		assert.Equal(t, "h1", f.mu.opened[0].GetHolder())
		assert.Equal(t, ttl.Milliseconds(), f.mu.opened[0].GetTtlMs())
	})

	// Several renewals arrive, each for this session, and it stays live.
	for range 3 {
		select {
		case id := <-f.keepalives:
			assert.Equal(t, s.ID(), id)
		case <-time.After(10 * time.Second):
			t.Fatal("no keep-alive")
		}
	}
	assert.NoError(t, s.Err())
	again, err := c.Session(ctx)
	require.NoError(t, err)
	assert.Same(t, s, again)

	// The nameserver expires it: Done closes and the next call opens anew.
	f.set(func() { f.mu.keepAliveStatus = bfspb.StatusCode_SESSION_EXPIRED })
	waitClosed(t, s.Done(), "session loss")
	assert.ErrorIs(t, s.Err(), sdk.ErrSessionExpired)

	f.set(func() { f.mu.keepAliveStatus = bfspb.StatusCode_OK })
	s2, err := c.Session(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, s.ID(), s2.ID())

	require.NoError(t, c.Close())
	waitClosed(t, s2.Done(), "session close")
	assert.ErrorIs(t, s2.Err(), sdk.ErrClosed)
	f.set(func() { assert.Equal(t, []string{s2.ID()}, f.mu.closed) })
}

func TestSessionLostWhenKeepAliveFailsForTTL(t *testing.T) {
	f, addr := startFake(t)
	f.set(func() { f.mu.keepAliveStatus = bfspb.StatusCode_UNAVAILABLE })
	const ttl = 300 * time.Millisecond
	c := dial(t, addr, sdk.WithSessionTTL(ttl))

	opened := time.Now()
	s, err := c.Session(context.Background())
	require.NoError(t, err)
	waitClosed(t, s.Done(), "session loss")
	// Lost a tenth of a TTL before the nameserver would expire it, and
	// not before: renewals failing for less than that are no loss.
	assert.GreaterOrEqual(t, time.Since(opened), ttl-ttl/10, "declared lost before nearly a TTL without renewal")
	assert.ErrorIs(t, s.Err(), sdk.ErrSessionExpired)
}

func TestMutationRetriesOnceUnderNewSession(t *testing.T) {
	f, addr := startFake(t)
	f.set(func() { f.mu.expireOnMkdir["s1"] = true })
	c := dial(t, addr)

	require.NoError(t, c.Mkdir(context.Background(), "/a", 0o755))
	f.set(func() {
		assert.Equal(t, []string{"s1", "s2"}, f.mu.mkdirSessions)
		assert.Len(t, f.mu.opened, 2)
	})

	// A second refusal is returned, not retried forever.
	f.set(func() { f.mu.expireOnMkdir["s2"], f.mu.expireOnMkdir["s3"] = true, true })
	err := c.Mkdir(context.Background(), "/b", 0o755)
	assert.ErrorIs(t, err, sdk.ErrSessionExpired)
	assert.EqualError(t, err, "mkdir /b: session expired")
}

func TestConcurrentCallersShareOneSession(t *testing.T) {
	f, addr := startFake(t)
	c := dial(t, addr)
	var wg sync.WaitGroup
	ids := make([]string, 16)
	for i := range ids {
		wg.Go(func() {
			s, err := c.Session(context.Background())
			if assert.NoError(t, err) {
				ids[i] = s.ID()
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		assert.Equal(t, ids[0], id)
	}
	f.set(func() { assert.Len(t, f.mu.opened, 1) })
}

func TestCloseIsIdempotentAndFinal(t *testing.T) {
	f, addr := startFake(t)
	c, err := sdk.Dial(context.Background(), addr)
	require.NoError(t, err)
	require.NoError(t, c.Close()) // no session was ever opened
	require.NoError(t, c.Close())
	ctx := context.Background()
	assert.ErrorIs(t, c.Mkdir(ctx, "/a", 0o755), sdk.ErrClosed)
	_, err = c.Stat(ctx, "/a")
	assert.ErrorIs(t, err, sdk.ErrClosed)
	_, err = c.Session(ctx)
	assert.ErrorIs(t, err, sdk.ErrClosed)
	f.set(func() { assert.Empty(t, f.mu.opened) })
}

func TestDefaultHolder(t *testing.T) {
	_, addr := startFake(t)
	c := dial(t, addr)
	m := regexp.MustCompile(`^(.+):(\d+):(\d+)$`).FindStringSubmatch(c.Holder())
	require.NotNil(t, m, "holder %q is not ip:port:timestamp", c.Holder())
	assert.Equal(t, "127.0.0.1", m[1], "the local address towards a loopback nameserver")
	assert.Equal(t, strconv.Itoa(os.Getpid()), m[2])
	ts, err := strconv.ParseInt(m[3], 10, 64)
	require.NoError(t, err)
	assert.LessOrEqual(t, ts, time.Now().Unix())
}

func TestListFollowsPages(t *testing.T) {
	f, addr := startFake(t)
	f.set(func() { f.mu.names = []string{"a", "b", "c", "d", "e"} })
	c := dial(t, addr)
	fis, err := c.List(context.Background(), "/dir")
	require.NoError(t, err)
	var paths []string
	for _, fi := range fis {
		paths = append(paths, fi.Path)
	}
	assert.Equal(t, []string{"/dir/a", "/dir/b", "/dir/c", "/dir/d", "/dir/e"}, paths)
	f.set(func() { assert.Equal(t, []string{"", "b", "d"}, f.mu.starts) })

	// Stopping the iterator early asks for no further page.
	f.set(func() { f.mu.starts = nil })
	for fi, err := range c.ListIter(context.Background(), "/") {
		require.NoError(t, err)
		assert.Equal(t, "/a", fi.Path)
		break
	}
	f.set(func() { assert.Equal(t, []string{""}, f.mu.starts) })
}

func TestUnknownStatusIsAnError(t *testing.T) {
	f, addr := startFake(t)
	f.set(func() { f.mu.statStatus = bfspb.StatusCode(99) })
	c := dial(t, addr)
	_, err := c.Stat(context.Background(), "/x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stat /x")
	assert.Contains(t, err.Error(), "99")
}

func TestUnreachableNameserver(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close())
	c := dial(t, addr)
	_, err = c.Stat(context.Background(), "/")
	assert.ErrorIs(t, err, sdk.ErrUnavailable)
	assert.Equal(t, codes.Unavailable, status.Code(err), "the gRPC status stays reachable")
	assert.NotContains(t, err.Error(), "rpc error")
	err = c.Mkdir(context.Background(), "/a", 0o755)
	assert.ErrorIs(t, err, sdk.ErrUnavailable)
	assert.Contains(t, err.Error(), "mkdir /a: open session")
}

func TestBadArgumentsNeverReachTheServer(t *testing.T) {
	f, addr := startFake(t)
	c := dial(t, addr)
	ctx := context.Background()
	assert.ErrorIs(t, c.Mkdir(ctx, "rel", 0o755), sdk.ErrInvalidArgument)
	assert.ErrorIs(t, c.Mkdir(ctx, "/a", os.ModeDir|0o755), sdk.ErrInvalidArgument)
	assert.ErrorIs(t, c.Touch(ctx, "/a", sdk.Replication(-1)), sdk.ErrInvalidArgument)
	assert.ErrorIs(t, c.Rename(ctx, "/a", "/../b"), sdk.ErrInvalidArgument)
	_, err := sdk.Dial(ctx, addr, sdk.WithSessionTTL(0))
	assert.ErrorIs(t, err, sdk.ErrInvalidArgument)
	f.set(func() { assert.Empty(t, f.mu.mkdirSessions) })
}

// leaseNS is a scripted nameserver for session loss, driven with a fake
// clock on the client: it opens sessions s1, s2, ... with the TTL asked
// for (or grant, if set), answers each KeepAlive as renew says, confirms the lock watch of
// every session but those in unconfirmed, and grants every LockDir. The
// arrival of each KeepAlive, watch and LockDir is sent, with its session
// id, on the channel of that name.
type leaseNS struct {
	bfspb.UnimplementedNameServerServer
	// renew answers the n-th KeepAlive (from 1) of session id; nil
	// answers OK without a TTL. Set before the first call.
	renew       func(ctx context.Context, id string, n int) (*bfspb.KeepAliveResponse, error)
	unconfirmed map[string]bool
	grant       time.Duration

	keepalives, watches, locks chan string

	mu struct {
		sync.Mutex
		opened  int
		renewed map[string]int
	}
}

func startLeaseNS(t *testing.T, f *leaseNS) string {
	t.Helper()
	f.keepalives, f.watches, f.locks = make(chan string, 100), make(chan string, 100), make(chan string, 100)
	f.mu.renewed = map[string]int{}
	return serveFake(t, f)
}

func (f *leaseNS) OpenSession(_ context.Context, req *bfspb.OpenSessionRequest) (*bfspb.OpenSessionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.opened++
	ttl := cmp.Or(f.grant.Milliseconds(), req.GetTtlMs())
	return &bfspb.OpenSessionResponse{SessionId: fmt.Sprintf("s%d", f.mu.opened), TtlMs: ttl}, nil
}

func (f *leaseNS) KeepAlive(ctx context.Context, req *bfspb.KeepAliveRequest) (*bfspb.KeepAliveResponse, error) {
	f.keepalives <- req.SessionId
	f.mu.Lock()
	f.mu.renewed[req.SessionId]++
	n := f.mu.renewed[req.SessionId]
	f.mu.Unlock()
	if f.renew == nil {
		return &bfspb.KeepAliveResponse{}, nil
	}
	return f.renew(ctx, req.SessionId, n)
}

func (f *leaseNS) CloseSession(context.Context, *bfspb.CloseSessionRequest) (*bfspb.CloseSessionResponse, error) {
	return &bfspb.CloseSessionResponse{}, nil
}

func (f *leaseNS) WatchDirLocks(req *bfspb.WatchDirLocksRequest, stream bfspb.NameServer_WatchDirLocksServer) error {
	f.watches <- req.SessionId
	if !f.unconfirmed[req.SessionId] {
		if err := stream.SendHeader(nil); err != nil {
			return err
		}
	}
	<-stream.Context().Done()
	return nil
}

func (f *leaseNS) LockDir(_ context.Context, req *bfspb.LockDirRequest) (*bfspb.LockDirResponse, error) {
	f.locks <- req.SessionId
	return &bfspb.LockDirResponse{Lock: &bfspb.DirLock{Path: req.Path, Status: bfspb.LockStatus_LOCK_STATUS_LOCKED,
		SessionId: req.SessionId, Holder: "h", Epoch: 1}}, nil
}

// hang is a KeepAlive that gets no answer, as behind a partition.
func hang(ctx context.Context) (*bfspb.KeepAliveResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// recv returns the next value from ch, failing the test if none comes
// within a generous deadline.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// TestSessionLostBeforeServerExpiryWhileRenewalsHang: the nameserver
// grants a session a TTL (shorter than the one asked for), then every
// renewal hangs (a partition). It expires the session that TTL after it
// received the OpenSession, which was after the client sent it, and may
// then give the session's locks to another holder; so the session and its
// lock handles must be lost before the client's clock reaches sent+TTL,
// though no renewal has returned by then. The fake clock is never
// advanced that far: Done closing at all proves it.
func TestSessionLostBeforeServerExpiryWhileRenewalsHang(t *testing.T) {
	const asked, granted = 30 * time.Second, 12 * time.Second
	f := &leaseNS{grant: granted, renew: func(ctx context.Context, _ string, _ int) (*bfspb.KeepAliveResponse, error) {
		return hang(ctx)
	}}
	addr := startLeaseNS(t, f)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	c := dial(t, addr, sdk.WithSessionTTL(asked), sdk.WithClock(clk))
	ctx := context.Background()
	sent := clk.Now()
	s, err := c.Session(ctx)
	require.NoError(t, err)
	l, err := c.LockDir(ctx, "/d")
	require.NoError(t, err)
	require.NoError(t, clk.BlockUntil(ctx, 1)) // the keep-alive is waiting for its first renewal

	clk.Advance(granted / 3)
	recv(t, f.keepalives, "the first renewal, which hangs")
	clk.Advance(sent.Add(granted - time.Millisecond).Sub(clk.Now()))
	waitClosed(t, s.Done(), "session loss before the nameserver's expiry")
	require.ErrorIs(t, s.Err(), sdk.ErrSessionExpired)
	waitClosed(t, l.Done(), "the lock handle's loss with its session")
	require.ErrorIs(t, l.Err(), sdk.ErrLockLost)
	require.ErrorIs(t, l.Err(), sdk.ErrSessionExpired)
}

// TestSessionLossCountsFromTheLastRenewal: the nameserver answers one
// renewal, granting a TTL shorter than the session had, then renewals
// hang. The loss is due that TTL (less the margin) after that renewal was
// sent: before the client's clock reaches sent+TTL.
func TestSessionLossCountsFromTheLastRenewal(t *testing.T) {
	const opened, granted = 30 * time.Second, 12 * time.Second
	f := &leaseNS{renew: func(ctx context.Context, _ string, n int) (*bfspb.KeepAliveResponse, error) {
		if n == 1 {
			return &bfspb.KeepAliveResponse{TtlMs: granted.Milliseconds()}, nil
		}
		return hang(ctx)
	}}
	addr := startLeaseNS(t, f)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	c := dial(t, addr, sdk.WithSessionTTL(opened), sdk.WithClock(clk))
	ctx := context.Background()
	s, err := c.Session(ctx)
	require.NoError(t, err)
	require.NoError(t, clk.BlockUntil(ctx, 1))

	clk.Advance(opened / 3)
	recv(t, f.keepalives, "the first renewal")
	sent := clk.Now() // answered: the nameserver now expires the session at sent+granted or later
	// The next renewal is due a third of the granted TTL after the first
	// was sent: its arrival shows the answer was taken in.
	clk.Advance(granted / 3)
	recv(t, f.keepalives, "the second renewal, which hangs")
	require.NoError(t, s.Err())
	clk.Advance(sent.Add(granted - time.Millisecond).Sub(clk.Now()))
	waitClosed(t, s.Done(), "session loss before the nameserver's expiry")
	require.ErrorIs(t, s.Err(), sdk.ErrSessionExpired)
}

// TestHungRenewalIsFollowedAtOnce: a renewal that hangs until its timeout
// (a third of the TTL) is followed by the next one at once, not a third
// of a TTL later: counted from the sending, the next was already due. So
// a session survives a single lost renewal, with two more tries before
// it is declared lost.
func TestHungRenewalIsFollowedAtOnce(t *testing.T) {
	const ttl = 30 * time.Second
	f := &leaseNS{renew: func(ctx context.Context, _ string, n int) (*bfspb.KeepAliveResponse, error) {
		if n == 1 {
			return hang(ctx)
		}
		return &bfspb.KeepAliveResponse{}, nil
	}}
	addr := startLeaseNS(t, f)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	c := dial(t, addr, sdk.WithSessionTTL(ttl), sdk.WithClock(clk))
	ctx := context.Background()
	s, err := c.Session(ctx)
	require.NoError(t, err)
	require.NoError(t, clk.BlockUntil(ctx, 1))

	clk.Advance(ttl / 3)
	recv(t, f.keepalives, "the first renewal, which hangs")
	clk.Advance(ttl / 3) // its timeout
	recv(t, f.keepalives, "the second renewal, right after the first timed out")
	require.NoError(t, s.Err())
}
