package nameserver_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/limit"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// limited starts a cluster with its HTTP ports and the nameserver's
// limits set by edit, and returns it with a reader of the nameserver's
// refusal counter.
func limited(t *testing.T, edit func(*nameserver.Limits)) (*testcluster.Cluster, func(limit.Name) float64) {
	t.Helper()
	c := testcluster.Start(t, testcluster.WithHTTP(), testcluster.WithNameServerConfig(func(cfg *nameserver.Config) { edit(&cfg.Limits) }))
	return c, func(name limit.Name) float64 {
		return nsMetric(t, c, fmt.Sprintf("bfs_nameserver_limit_refusals_total{limit=%q}", name))
	}
}

func nsMetric(t *testing.T, c *testcluster.Cluster, name string) float64 {
	t.Helper()
	return metricValue(t, c.Metrics(c.NameServerHTTPAddr()), name)
}

// TestNameServerMessageSize: a request over --max-message-size is refused
// RESOURCE_EXHAUSTED by gRPC before any handler, and counted; the
// default bound is 4 MiB.
func TestNameServerMessageSize(t *testing.T) {
	c, refusals := limited(t, func(l *nameserver.Limits) { l.MaxMessageSize = 64 << 10 })
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	require.Zero(t, refusals(limit.MessageSize), "created at zero")
	_, err := ns.Stat(context.Background(), &bfspb.StatRequest{Path: "/" + strings.Repeat("x", 100<<10)})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.EqualValues(t, 1, refusals(limit.MessageSize))
	st, err := ns.Stat(context.Background(), &bfspb.StatRequest{Path: "/" + strings.Repeat("x", 32<<10)})
	require.NoError(t, err, "under the bound: answered")
	require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, st.Status)

	d := testcluster.Start(t)
	big := bfspb.NewNameServerClient(d.Dial(d.NameServerAddr))
	_, err = big.Stat(context.Background(), &bfspb.StatRequest{Path: "/" + strings.Repeat("x", 4<<20)}, grpc.MaxCallSendMsgSize(8<<20))
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.Equal(t, 4<<20, nameserver.DefaultConfig().Limits.MaxMessageSize)
}

// openWatch starts a WatchDirLocks stream and returns it once the
// nameserver confirmed it, or the error that refused it.
func openWatch(ctx context.Context, ns bfspb.NameServerClient, req *bfspb.WatchDirLocksRequest, opts ...grpc.CallOption) (bfspb.NameServer_WatchDirLocksClient, error) {
	stream, err := ns.WatchDirLocks(ctx, req, opts...)
	if err != nil {
		return nil, err
	}
	md, err := stream.Header()
	if err == nil && md == nil {
		_, err = stream.Recv()
	}
	if err != nil {
		return stream, err
	}
	return stream, nil
}

func requireLimit(t *testing.T, stream grpc.ClientStream, err error, name limit.Name) {
	t.Helper()
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.Equal(t, []string{string(name)}, stream.Trailer().Get(limit.Trailer))
}

// TestWatchStreamLimits: an identity holds at most
// --max-watches-per-identity streams of a prefix, all identities
// --max-watches, and a session at most --max-watches-per-session streams
// of its own; more are refused
// RESOURCE_EXHAUSTED naming the limit, and counted; another identity is
// not held back, and a stream that ends gives its place back.
func TestWatchStreamLimits(t *testing.T) {
	c, refusals := limited(t, func(l *nameserver.Limits) {
		l.MaxWatchesPerIdentity, l.MaxWatchesPerSession, l.MaxWatches = 2, 1, 3
	})
	a := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	b := bfspb.NewNameServerClient(c.DialAs(c.NameServerAddr, c.NewClient("b", false)))
	d := bfspb.NewNameServerClient(c.DialAs(c.NameServerAddr, c.NewClient("d", false)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, cancelFirst := context.WithCancel(ctx)
	_, err := openWatch(first, a, &bfspb.WatchDirLocksRequest{Prefix: "/"})
	require.NoError(t, err)
	_, err = openWatch(ctx, a, &bfspb.WatchDirLocksRequest{Prefix: "/x"})
	require.NoError(t, err)
	stream, err := openWatch(ctx, a, &bfspb.WatchDirLocksRequest{Prefix: "/y"})
	requireLimit(t, stream, err, limit.WatchStreams)
	require.Contains(t, status.Convert(err).Message(), "client/bfs")
	require.EqualValues(t, 1, refusals(limit.WatchStreams))
	_, err = openWatch(ctx, b, &bfspb.WatchDirLocksRequest{Prefix: "/"})
	require.NoError(t, err, "another identity")
	stream, err = openWatch(ctx, d, &bfspb.WatchDirLocksRequest{Prefix: "/"})
	requireLimit(t, stream, err, limit.WatchStreamsTotal)
	require.EqualValues(t, 1, refusals(limit.WatchStreamsTotal))

	sess := openSession(t, a, "a")
	_, err = openWatch(ctx, a, &bfspb.WatchDirLocksRequest{SessionId: sess})
	require.NoError(t, err, "a session's watch counts against the session, not the identity")
	stream, err = openWatch(ctx, a, &bfspb.WatchDirLocksRequest{SessionId: sess})
	requireLimit(t, stream, err, limit.SessionWatchStreams)
	require.EqualValues(t, 1, refusals(limit.SessionWatchStreams))
	require.EqualValues(t, 4, nsMetric(t, c, "bfs_nameserver_watch_streams"))

	cancelFirst()
	require.Eventually(t, func() bool { return nsMetric(t, c, "bfs_nameserver_watch_streams") == 3 }, 10*time.Second, 10*time.Millisecond)
	_, err = openWatch(ctx, a, &bfspb.WatchDirLocksRequest{Prefix: "/y"})
	require.NoError(t, err, "the place of a stream that ended")
}

// TestSlowWatcherIsCutOff: a watcher that does not read falls behind; it
// gets what it was sent, then RESOURCE_EXHAUSTED naming watch_lag (it
// must list again and watch anew), and is counted. Meanwhile the other
// client's locks go on. The watcher's flow-control windows are gRPC's
// smallest and the events big, so it stops taking them after a few
// dozen, deterministically.
func TestSlowWatcherIsCutOff(t *testing.T) {
	const buffer = 8
	c, refusals := limited(t, func(l *nameserver.Limits) { l.WatchBuffer = buffer })
	conn, err := grpc.NewClient(c.NameServerAddr, c.DialOption(), grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow, err := openWatch(ctx, bfspb.NewNameServerClient(conn), &bfspb.WatchDirLocksRequest{Prefix: "/"})
	require.NoError(t, err)

	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	dir := "/" + strings.Repeat(strings.Repeat("d", 250)+"/", 15) + "x" // some 3.8 KB
	mkdirAll(t, ns, dir)
	open, err := ns.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: strings.Repeat("h", 255), TtlMs: 60_000})
	require.NoError(t, err)
	const ops = 100 // 200 transitions of 4 KB: several times 128 KiB of windows
	for range ops {
		l := lockAs(t, ns, dir, open.SessionId)
		u, err := ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: dir, SessionId: open.SessionId, Epoch: l.Epoch})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_UNLOCKED, u.Status, u.Message)
	}
	got := 0
	for {
		_, err := slow.Recv()
		if err != nil {
			requireLimit(t, slow, err, limit.WatchLag)
			require.Contains(t, status.Convert(err).Message(), "list the locks again")
			break
		}
		got++
	}
	require.Less(t, got, 2*ops, "cut off before the end")
	require.EqualValues(t, 1, refusals(limit.WatchLag))
}

// TestSessionLimits: an identity holds at most
// --max-sessions-per-identity live sessions and all together at most
// --max-sessions; OpenSession beyond is answered RESOURCE_EXHAUSTED and
// counted. A closed session makes room; the counts are rebuilt from the
// stored sessions when a term starts (here, a restart).
func TestSessionLimits(t *testing.T) {
	c, refusals := limited(t, func(l *nameserver.Limits) { l.MaxSessionsPerIdentity = 3; l.MaxSessions = 5 })
	a := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	b := bfspb.NewNameServerClient(c.DialAs(c.NameServerAddr, c.NewClient("b", false)))
	ctx := context.Background()
	open := func(ns bfspb.NameServerClient) *bfspb.OpenSessionResponse {
		r, err := ns.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: "h", TtlMs: 600_000})
		require.NoError(t, err)
		return r
	}
	var held []string
	for range 3 {
		r := open(a)
		require.Equal(t, bfspb.StatusCode_OK, r.Status, r.Message)
		held = append(held, r.SessionId)
	}
	r := open(a)
	require.Equal(t, bfspb.StatusCode_RESOURCE_EXHAUSTED, r.Status)
	require.Contains(t, r.Message, "client/bfs holds 3 sessions")
	require.EqualValues(t, 1, refusals(limit.SessionsPerIdentity))
	for range 2 {
		r := open(b)
		require.Equal(t, bfspb.StatusCode_OK, r.Status, r.Message)
	}
	r = open(b)
	require.Equal(t, bfspb.StatusCode_RESOURCE_EXHAUSTED, r.Status, "the total")
	require.EqualValues(t, 1, refusals(limit.Sessions))

	cl, err := a.CloseSession(ctx, &bfspb.CloseSessionRequest{SessionId: held[0]})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, cl.Status, cl.Message)
	r = open(a)
	require.Equal(t, bfspb.StatusCode_OK, r.Status, r.Message)

	c.RestartNameServer()
	a = bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	require.Eventually(t, func() bool {
		r, err := a.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: "h", TtlMs: 600_000})
		return err == nil && r.Status == bfspb.StatusCode_RESOURCE_EXHAUSTED
	}, 10*time.Second, 20*time.Millisecond, "the stored sessions count after a restart")
}

// TestLockWaitLimits: an identity has at most
// --max-lock-waits-per-identity LockDir calls waiting; one more is
// answered RESOURCE_EXHAUSTED at once, and counted. The calls waiting
// wait for the lock that refused them: other locks coming and going
// neither wake them nor make them ask the group again (one log entry per
// lock and per unlock, none for the waiting calls).
func TestLockWaitLimits(t *testing.T) {
	c, refusals := limited(t, func(l *nameserver.Limits) { l.MaxLockWaitsPerIdentity = 2 })
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	holder := openSession(t, ns, "holder")
	mkdirAll(t, ns, "/w")
	mkdirAll(t, ns, "/other")
	held := lockAs(t, ns, "/w", holder)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	answers := make(chan *bfspb.LockDirResponse, 2)
	for i := range 2 {
		waiter := openSession(t, ns, fmt.Sprintf("waiter-%d", i))
		wg.Go(func() {
			r, err := ns.LockDir(ctx, &bfspb.LockDirRequest{Path: "/w", SessionId: waiter, Wait: true})
			if err == nil {
				answers <- r
			}
		})
	}
	require.Eventually(t, func() bool { return nsMetric(t, c, "bfs_nameserver_lock_waits") == 2 }, 10*time.Second, 10*time.Millisecond)
	third := openSession(t, ns, "third")
	r, err := ns.LockDir(ctx, &bfspb.LockDirRequest{Path: "/w", SessionId: third, Wait: true})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_RESOURCE_EXHAUSTED, r.Status, r.Message)
	require.Contains(t, r.Message, "--max-lock-waits-per-identity")
	require.EqualValues(t, 1, refusals(limit.LockWaits))
	r, err = ns.LockDir(ctx, &bfspb.LockDirRequest{Path: "/w", SessionId: third})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_LOCKED, r.Status, "a call that does not wait is not held back")
	// Nor one whose grant first cleans another session's open file: it
	// waits for its own cleaning, which is no wait on another's lock.
	mkdirAll(t, ns, "/c")
	cr, err := ns.Create(ctx, &bfspb.CreateRequest{Path: "/c/f", Mode: 0o644, Replication: 1, SessionId: holder, OpenForWrite: true})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, cr.Status, cr.Message)
	r, err = ns.LockDir(ctx, &bfspb.LockDirRequest{Path: "/c", SessionId: third})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, r.Status, "a grant that cleans first is not held back: %s", r.Message)
	require.EqualValues(t, 1, refusals(limit.LockWaits))

	applied := func() float64 { return nsMetric(t, c, "bfs_nameserver_raft_applied_entries_total") }
	before := applied()
	const ops = 10
	lockUnlockOther(t, ns, holder, ops)
	require.EqualValues(t, 2*ops, applied()-before, "only the other client's locks and unlocks went to the log")

	u, err := ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: "/w", SessionId: holder, Epoch: held.Epoch})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_UNLOCKED, u.Status, u.Message)
	granted := <-answers
	require.Equal(t, bfspb.StatusCode_OK, granted.Status, "a waiting call gets the lock once it is free: %s", granted.Message)
	cancel()
}

func lockUnlockOther(t *testing.T, ns bfspb.NameServerClient, sess string, ops int) {
	t.Helper()
	for range ops {
		l := lockAs(t, ns, "/other", sess)
		u, err := ns.UnlockDir(context.Background(), &bfspb.UnlockDirRequest{Path: "/other", SessionId: sess, Epoch: l.Epoch})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_UNLOCKED, u.Status, u.Message)
	}
}
