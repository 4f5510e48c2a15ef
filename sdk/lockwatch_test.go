package sdk_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/limit"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// watchNS is a scripted nameserver for the lock handles' watch: the test
// holds each WatchDirLocks stream (to send events on it or break it),
// may hold LockDir calls, and decides what GetDirLock answers per path.
type watchNS struct {
	steadySession
	streams chan *heldStream
	lockIn  chan string   // a LockDir arrived (its path)
	lockGo  chan struct{} // nil: LockDir answers at once
	gets    chan string   // a GetDirLock arrived (its path)
	// refuse, when set, refuses every stream as over its limit.
	refuse bool

	mu struct {
		sync.Mutex
		// gets answers GetDirLock for a path (unscripted: held).
		gets map[string]*scriptedGet
	}
}

// scriptedGet answers the GetDirLock calls of a path in turn, the last
// answer every call after.
type scriptedGet struct {
	answers []getAnswer
	calls   int
}

// getAnswer is how one GetDirLock is answered: with the lock in state,
// unless the call fails as if the nameserver were out of reach
// (unavailable), gets no answer until cancelled (hang) or until wait is
// closed, or is answered with a status (code).
type getAnswer struct {
	unavailable, hang bool
	wait              chan struct{}
	code              bfspb.StatusCode
	state             bfspb.LockStatus
}

var (
	held     = getAnswer{state: bfspb.LockStatus_LOCK_STATUS_LOCKED}
	unlocked = getAnswer{state: bfspb.LockStatus_LOCK_STATUS_UNLOCKED}
)

// heldStream is a WatchDirLocks stream the test drives: events are sent,
// closing brk ends the stream with UNAVAILABLE, closing lag ends it as
// the nameserver cuts off a watcher that fell behind.
type heldStream struct {
	events chan *bfspb.DirLockEvent
	brk    chan struct{}
	lag    chan struct{}
}

func startWatchNS(t *testing.T) (*watchNS, string) {
	t.Helper()
	f := &watchNS{streams: make(chan *heldStream, 10), lockIn: make(chan string, 10), gets: make(chan string, 100)}
	f.mu.gets = map[string]*scriptedGet{}
	return f, serveFake(t, f)
}

func (f *watchNS) WatchDirLocks(_ *bfspb.WatchDirLocksRequest, stream bfspb.NameServer_WatchDirLocksServer) error {
	if f.refuse {
		return overLimit(stream, limit.SessionWatchStreams)
	}
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	h := &heldStream{events: make(chan *bfspb.DirLockEvent), brk: make(chan struct{}), lag: make(chan struct{})}
	f.streams <- h
	for {
		select {
		case ev := <-h.events:
			if err := stream.Send(ev); err != nil {
				return err
			}
		case <-h.brk:
			return status.Error(codes.Unavailable, "stream broken")
		case <-h.lag:
			return overLimit(stream, limit.WatchLag)
		case <-stream.Context().Done():
			return nil
		}
	}
}

// overLimit ends a stream as the nameserver does when a limit does.
func overLimit(stream grpc.ServerStream, name limit.Name) error {
	stream.SetTrailer(metadata.Pairs(limit.Trailer, string(name)))
	return status.Error(codes.ResourceExhausted, string(name))
}

// lockEpochs is the epoch LockDir grants each path.
var lockEpochs = map[string]uint64{"/t": 7, "/u": 8}

func (f *watchNS) LockDir(_ context.Context, req *bfspb.LockDirRequest) (*bfspb.LockDirResponse, error) {
	f.lockIn <- req.Path
	if f.lockGo != nil {
		<-f.lockGo
	}
	return &bfspb.LockDirResponse{Lock: &bfspb.DirLock{Path: req.Path, Status: bfspb.LockStatus_LOCK_STATUS_LOCKED,
		SessionId: req.SessionId, Holder: "h", Epoch: lockEpochs[req.Path]}}, nil
}

func (f *watchNS) GetDirLock(ctx context.Context, req *bfspb.GetDirLockRequest) (*bfspb.GetDirLockResponse, error) {
	select {
	case f.gets <- req.Path:
	default: // a test that looks for lookups takes them as they come
	}
	f.mu.Lock()
	g := f.mu.gets[req.Path]
	if g == nil {
		g = &scriptedGet{answers: []getAnswer{held}}
		f.mu.gets[req.Path] = g
	}
	a := g.answers[min(g.calls, len(g.answers)-1)]
	g.calls++
	f.mu.Unlock()
	switch {
	case a.unavailable:
		return nil, status.Error(codes.Unavailable, "nameserver out of reach")
	case a.hang:
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	case a.wait != nil:
		<-a.wait
	}
	if a.code != bfspb.StatusCode_OK {
		return &bfspb.GetDirLockResponse{Status: a.code}, nil
	}
	d := &bfspb.DirLock{Path: req.Path, Status: a.state}
	if a.state == bfspb.LockStatus_LOCK_STATUS_LOCKED {
		d.SessionId, d.Epoch = "s1", lockEpochs[req.Path]
	}
	return &bfspb.GetDirLockResponse{Lock: d}, nil
}

// callsOf is how many GetDirLock calls of path there were.
func (f *watchNS) callsOf(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if g := f.mu.gets[path]; g != nil {
		return g.calls
	}
	return 0
}

// awaitGet waits for a GetDirLock of path, passing over those of others.
func (f *watchNS) awaitGet(t *testing.T, path string) {
	t.Helper()
	for recv(t, f.gets, "a lookup of "+path) != path {
	}
}

// unlockedEvent is the end of the lock of path at its granted epoch.
func unlockedEvent(path string) *bfspb.DirLockEvent {
	return &bfspb.DirLockEvent{
		Lock:     &bfspb.DirLock{Path: path, Status: bfspb.LockStatus_LOCK_STATUS_UNLOCKED, SessionId: "s1", Epoch: lockEpochs[path]},
		Previous: bfspb.LockStatus_LOCK_STATUS_LOCKED, Reason: "force",
	}
}

func (f *watchNS) script(path string, answers ...getAnswer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.gets[path] = &scriptedGet{answers: answers}
}

// TestLockCheckAfterStreamRestartIsRetried: the watch stream breaks while
// a LockDir is in flight, and a new one is up (its restart looked up every
// handle there was) before the answer arrives, so the new handle must look
// its lock up itself: it was forced away while no stream was up. When that
// lookup gets no answer it is looked up again, and Done closes.
func TestLockCheckAfterStreamRestartIsRetried(t *testing.T) {
	f, addr := startWatchNS(t)
	f.script("/t", getAnswer{unavailable: true}, unlocked)
	c := dial(t, addr)
	ctx := context.Background()
	u, err := c.LockDir(ctx, "/u")
	require.NoError(t, err)
	first := <-f.streams
	<-f.lockIn

	f.lockGo = make(chan struct{})
	type result struct {
		l   *sdk.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := c.LockDir(ctx, "/t")
		got <- result{l, err}
	}()
	<-f.lockIn // /t granted on the server, the answer held back
	close(first.brk)
	second := <-f.streams
	// Once /u's end is seen, the new stream is being received: its restart
	// is over.
	second.events <- unlockedEvent("/u")
	waitClosed(t, u.Done(), "Done of /u")
	close(f.lockGo)
	r := <-got
	require.NoError(t, r.err)
	waitClosed(t, r.l.Done(), "Done of /t, found unlocked on a second lookup")
	require.ErrorIs(t, r.l.Err(), sdk.ErrLockLost)
}

// TestLockCheckThatFailsDoesNotHoldUpEvents: after a stream restart one
// handle's lookup keeps failing; the events for the session's other locks
// must still be delivered.
func TestLockCheckThatFailsDoesNotHoldUpEvents(t *testing.T) {
	f, addr := startWatchNS(t)
	f.script("/t", getAnswer{unavailable: true})
	c := dial(t, addr)
	ctx := context.Background()
	_, err := c.LockDir(ctx, "/t")
	require.NoError(t, err)
	first := <-f.streams
	<-f.lockIn
	u, err := c.LockDir(ctx, "/u")
	require.NoError(t, err)
	<-f.lockIn
	close(first.brk)
	second := <-f.streams
	second.events <- unlockedEvent("/u")
	waitClosed(t, u.Done(), "Done of /u while /t cannot be looked up")
}

// TestLockCheckCutShortByCallerIsRetried: as in
// TestLockCheckAfterStreamRestartIsRetried the new handle must look its
// lock up, but the caller's context ends during that lookup. LockDir
// still returns the handle (the lock was granted), and the session's
// watch looks it up again with a context of its own: Done closes.
func TestLockCheckCutShortByCallerIsRetried(t *testing.T) {
	f, addr := startWatchNS(t)
	f.script("/t", getAnswer{hang: true}, unlocked)
	c := dial(t, addr)
	u, err := c.LockDir(context.Background(), "/u")
	require.NoError(t, err)
	first := <-f.streams
	<-f.lockIn

	f.lockGo = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		l   *sdk.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := c.LockDir(ctx, "/t")
		got <- result{l, err}
	}()
	<-f.lockIn
	close(first.brk)
	second := <-f.streams
	second.events <- unlockedEvent("/u")
	waitClosed(t, u.Done(), "Done of /u")
	close(f.lockGo)
	f.awaitGet(t, "/t") // LockDir's own lookup, which hangs
	cancel()
	r := recv(t, got, "LockDir")
	require.NoError(t, r.err)
	waitClosed(t, r.l.Done(), "Done of /t, found unlocked by the watch's lookup")
	require.ErrorIs(t, r.l.Err(), sdk.ErrLockLost)
	// LockDir's lookup and the watch's own; the watch may look again if
	// its lookup failed (a loaded machine), never fewer.
	require.GreaterOrEqual(t, f.callsOf("/t"), 2)
}

// TestLockWhosePathIsNoLongerADirectoryIsLost: after a stream restart the
// lookup of a handle's lock is answered that its path is gone, or is now
// a file: the directory and its lock are gone, so the handle is lost at
// once, not looked up forever. Meanwhile the session's other handles go
// on receiving their events.
func TestLockWhosePathIsNoLongerADirectoryIsLost(t *testing.T) {
	for _, tc := range []struct {
		answer bfspb.StatusCode
		want   error
	}{
		{bfspb.StatusCode_NOT_DIRECTORY, sdk.ErrNotDirectory},
		{bfspb.StatusCode_NOT_FOUND, sdk.ErrNotFound},
	} {
		t.Run(tc.answer.String(), func(t *testing.T) {
			f, addr := startWatchNS(t)
			// Any later lookup would find it held: only the first answer
			// can end it.
			f.script("/t", getAnswer{code: tc.answer}, held)
			c := dial(t, addr)
			ctx := context.Background()
			lt, err := c.LockDir(ctx, "/t")
			require.NoError(t, err)
			first := <-f.streams
			<-f.lockIn
			lu, err := c.LockDir(ctx, "/u")
			require.NoError(t, err)
			<-f.lockIn
			close(first.brk)
			second := <-f.streams
			waitClosed(t, lt.Done(), "Done of /t")
			require.ErrorIs(t, lt.Err(), sdk.ErrLockLost)
			require.ErrorIs(t, lt.Err(), tc.want)
			second.events <- unlockedEvent("/u")
			waitClosed(t, lu.Done(), "Done of /u")
			require.Equal(t, 1, f.callsOf("/t"), "a settled lock is not looked up again")
		})
	}
}

// TestLockLookupWithoutAnAnswerIsRetried: a lookup the nameserver could
// not answer at the time (not the leader during a failover, unavailable,
// an internal error) says nothing about the lock: the handle is kept and
// looked up again, and only the answer of that lookup ends it.
func TestLockLookupWithoutAnAnswerIsRetried(t *testing.T) {
	for _, tc := range []struct {
		answer  bfspb.StatusCode
		notLost error
	}{
		{bfspb.StatusCode_NOT_LEADER, sdk.ErrNotLeader},
		{bfspb.StatusCode_UNAVAILABLE, sdk.ErrUnavailable},
		{bfspb.StatusCode_INTERNAL, sdk.ErrInternal},
	} {
		t.Run(tc.answer.String(), func(t *testing.T) {
			f, addr := startWatchNS(t)
			f.script("/t", getAnswer{code: tc.answer}, unlocked)
			c := dial(t, addr)
			l, err := c.LockDir(context.Background(), "/t")
			require.NoError(t, err)
			first := <-f.streams
			<-f.lockIn
			close(first.brk)
			<-f.streams
			waitClosed(t, l.Done(), "Done of /t, found unlocked by a second lookup")
			require.ErrorIs(t, l.Err(), sdk.ErrLockLost)
			require.NotErrorIs(t, l.Err(), tc.notLost, "lost on an answer that said nothing of the lock")
			require.Equal(t, 2, f.callsOf("/t"))
		})
	}
}

// TestLockDirRetriesWhenSessionLostWhileWatchStarts: the session is lost
// (the nameserver expired it) while LockDir waits for the session's lock
// watch to be confirmed, before anything was asked of the nameserver.
// Like an answer that the session expired, that is no failure of the
// caller's call: LockDir goes on with a new session.
func TestLockDirRetriesWhenSessionLostWhileWatchStarts(t *testing.T) {
	const ttl = 30 * time.Second
	f := &leaseNS{
		unconfirmed: map[string]bool{"s1": true},
		renew: func(_ context.Context, id string, _ int) (*bfspb.KeepAliveResponse, error) {
			if id == "s1" {
				return &bfspb.KeepAliveResponse{Status: bfspb.StatusCode_SESSION_EXPIRED}, nil
			}
			return &bfspb.KeepAliveResponse{}, nil
		},
	}
	addr := startLeaseNS(t, f)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	c := dial(t, addr, sdk.WithSessionTTL(ttl), sdk.WithClock(clk))
	ctx := context.Background()
	type result struct {
		l   *sdk.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := c.LockDir(ctx, "/d")
		got <- result{l, err}
	}()
	require.Equal(t, "s1", recv(t, f.watches, "the watch of the first session"))
	require.NoError(t, clk.BlockUntil(ctx, 1)) // the keep-alive is waiting for its first renewal
	clk.Advance(ttl / 3)                       // which is answered that s1 expired
	r := recv(t, got, "LockDir")
	require.NoError(t, r.err)
	require.Equal(t, "s2", r.l.SessionID())
	require.NoError(t, r.l.Err())
	require.Equal(t, "s2", recv(t, f.locks, "LockDir at the nameserver"))
	require.Empty(t, f.locks, "LockDir was sent under the lost session too")
}

// TestLockLookedUpAgainAfterEachStreamRestart: a lookup of a handle's
// lock is on its way when the stream breaks again and a third one comes
// up, after the lock ended unseen. That lookup's answer (held) predates
// the end: the handle must be looked up once more, and Done closes.
func TestLockLookedUpAgainAfterEachStreamRestart(t *testing.T) {
	f, addr := startWatchNS(t)
	stale := make(chan struct{})
	f.script("/t", getAnswer{wait: stale, state: bfspb.LockStatus_LOCK_STATUS_LOCKED}, unlocked)
	c := dial(t, addr)
	ctx := context.Background()
	lt, err := c.LockDir(ctx, "/t")
	require.NoError(t, err)
	first := <-f.streams
	<-f.lockIn
	lu, err := c.LockDir(ctx, "/u")
	require.NoError(t, err)
	<-f.lockIn

	close(first.brk)
	second := <-f.streams
	f.awaitGet(t, "/t") // held back until stale is closed
	close(second.brk)
	third := <-f.streams
	// Once /u's end is seen, the third stream is being received: its
	// restart, which asks for another lookup of /t, is over.
	third.events <- unlockedEvent("/u")
	waitClosed(t, lu.Done(), "Done of /u")
	close(stale)
	waitClosed(t, lt.Done(), "Done of /t, found unlocked by the lookup after the third stream came up")
	require.ErrorIs(t, lt.Err(), sdk.ErrLockLost)
}

// TestLockWatchCutOffForLagIsRestarted: the nameserver cuts off a watch
// that fell behind (RESOURCE_EXHAUSTED, watch_lag): ends may have passed
// unseen, so the watch starts again and every handle looks its lock up,
// as after any broken stream.
func TestLockWatchCutOffForLagIsRestarted(t *testing.T) {
	f, addr := startWatchNS(t)
	f.script("/t", unlocked)
	c := dial(t, addr)
	l, err := c.LockDir(context.Background(), "/t")
	require.NoError(t, err)
	first := <-f.streams
	<-f.lockIn
	close(first.lag)
	<-f.streams
	f.awaitGet(t, "/t")
	waitClosed(t, l.Done(), "Done of /t, found unlocked after the cut-off")
	require.ErrorIs(t, l.Err(), sdk.ErrLockLost)
}

// TestLockWatchRefusedByLimit: a LockDir whose session's watch the
// nameserver refuses over a limit fails with ErrResourceExhausted (and
// says which limit), before any lock is asked for.
func TestLockWatchRefusedByLimit(t *testing.T) {
	f, addr := startWatchNS(t)
	f.refuse = true
	c := dial(t, addr)
	_, err := c.LockDir(context.Background(), "/t")
	require.ErrorIs(t, err, sdk.ErrResourceExhausted)
	require.Contains(t, err.Error(), string(limit.SessionWatchStreams))
	select {
	case p := <-f.lockIn:
		t.Fatalf("LockDir of %s sent without a watch", p)
	default:
	}
}
