package nsgroup

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/proto/bfspb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// member is a nameserver stand-in answering Stat: OK if it leads, else
// NOT_LEADER naming leader.
type member struct {
	bfspb.UnimplementedNameServerServer
	leader string // "" when this member leads
	// stalling holds every call until the call's context ends: a member
	// that stopped answering (paused, its disk stuck) with its
	// connections still up.
	stalling atomic.Bool
}

func (m *member) Stat(ctx context.Context, _ *bfspb.StatRequest) (*bfspb.StatResponse, error) {
	if m.stalling.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if m.leader == "" {
		return &bfspb.StatResponse{Status: bfspb.StatusCode_OK}, nil
	}
	if err := grpc.SetTrailer(ctx, metadata.Pairs(LeaderTrailer, m.leader)); err != nil {
		return nil, err
	}
	return &bfspb.StatResponse{Status: bfspb.StatusCode_NOT_LEADER}, nil
}

// serve serves m on lis until the test ends.
func serve(t *testing.T, lis net.Listener, m *member) {
	g := grpc.NewServer()
	bfspb.RegisterNameServerServer(g, m)
	done := make(chan struct{})
	go func() { defer close(done); g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); <-done })
}

func listen(t *testing.T, addr string) net.Listener {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

func stat(ctx context.Context, c *Conn) error {
	var resp bfspb.StatResponse
	return c.Invoke(ctx, bfspb.NameServer_Stat_FullMethodName, &bfspb.StatRequest{Path: "/"}, &resp)
}

// A member that was down when a call tried it, and is named leader once
// it is back, is dialed again at once rather than after gRPC's reconnect
// backoff (which starts at a second and grows): a leader that returns
// after a failover is reachable by the next call.
func TestLeaderBackFromTheDeadIsReachedAtOnce(t *testing.T) {
	lisA := listen(t, "127.0.0.1:0")
	addrA := lisA.Addr().String()
	lisA.Close() // A is down
	lisB := listen(t, "127.0.0.1:0")
	serve(t, lisB, &member{leader: addrA})

	c, err := New(Config{
		Addrs:       []string{addrA, lisB.Addr().String()},
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		Patience:    300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	// B names A, which cannot be reached: no leader within the patience.
	if err := stat(ctx, c); status.Code(err) != codes.Unavailable {
		t.Fatalf("with the leader down: %v, want UNAVAILABLE", err)
	}
	// A is back and leads.
	serve(t, listen(t, addrA), &member{})
	if err := stat(ctx, c); err != nil {
		t.Fatalf("with the leader back: %v", err)
	}
	if c.Leader() != addrA {
		t.Fatalf("calls go to %s first, want the leader %s", c.Leader(), addrA)
	}
}

// A call fails at once, UNAVAILABLE, when no member of the list can be
// reached, however many times one member named another leader before:
// the count is of members, not of attempts.
func TestNoMemberReachable(t *testing.T) {
	var addrs []string
	for range 3 {
		lis := listen(t, "127.0.0.1:0")
		addrs = append(addrs, lis.Addr().String())
		lis.Close()
	}
	c, err := New(Config{
		Addrs:       addrs,
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		Patience:    time.Hour, // never the reason the call ends
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = stat(context.Background(), c)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "could be reached") {
		t.Fatalf("got %v, want UNAVAILABLE: no nameserver could be reached", err)
	}
}

// A member that stops answering while its connection stays up (a leader
// paused, then deposed) holds a call for the whole patience, and the
// call fails UNAVAILABLE; the next call must not wait on it again but
// find the leader among the others.
func TestStalledMemberIsPassedOver(t *testing.T) {
	lisA, lisB := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
	stalled := &member{}
	serve(t, lisA, stalled)
	serve(t, lisB, &member{})
	c, err := New(Config{
		Addrs:       []string{lisA.Addr().String(), lisB.Addr().String()},
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		Patience:    300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := stat(ctx, c); err != nil {
		t.Fatalf("A answering: %v", err)
	}
	stalled.stalling.Store(true)
	// UNAVAILABLE, or DEADLINE_EXCEEDED when the deadline reached A
	// first and ended the call there.
	if err := stat(ctx, c); status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("A stalled: %v, want UNAVAILABLE or DEADLINE_EXCEEDED", err)
	}
	if err := stat(ctx, c); err != nil {
		t.Fatalf("the call after the stalled one: %v; it went to %s first", err, c.Leader())
	}
	if want := lisB.Addr().String(); c.Leader() != want {
		t.Fatalf("calls go to %s first, want %s", c.Leader(), want)
	}
}
