package sdk_test

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// watchNS is a scripted nameserver for the lock handles' watch: the test
// holds each WatchDirLocks stream (to send events on it or break it),
// may hold LockDir calls, and decides what GetDirLock answers per path.
type watchNS struct {
	bfspb.UnimplementedNameServerServer
	streams chan *heldStream
	lockIn  chan string   // a LockDir arrived (its path)
	lockGo  chan struct{} // nil: LockDir answers at once

	mu struct {
		sync.Mutex
		// gets answers GetDirLock for a path: the first unavailable calls
		// fail as a nameserver out of reach would, later ones say state.
		gets map[string]*scriptedGet
	}
}

type scriptedGet struct {
	unavailable int // < 0: always
	state       bfspb.LockStatus
	calls       int
}

// heldStream is a WatchDirLocks stream the test drives: events are sent,
// and closing brk ends the stream with UNAVAILABLE.
type heldStream struct {
	events chan *bfspb.DirLockEvent
	brk    chan struct{}
}

func startWatchNS(t *testing.T) (*watchNS, string) {
	t.Helper()
	f := &watchNS{streams: make(chan *heldStream, 10), lockIn: make(chan string, 10)}
	f.mu.gets = map[string]*scriptedGet{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	bfspb.RegisterNameServerServer(srv, f)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return f, lis.Addr().String()
}

func (f *watchNS) OpenSession(context.Context, *bfspb.OpenSessionRequest) (*bfspb.OpenSessionResponse, error) {
	return &bfspb.OpenSessionResponse{SessionId: "s1", TtlMs: 60000}, nil
}

func (f *watchNS) KeepAlive(context.Context, *bfspb.KeepAliveRequest) (*bfspb.KeepAliveResponse, error) {
	return &bfspb.KeepAliveResponse{TtlMs: 60000}, nil
}

func (f *watchNS) CloseSession(context.Context, *bfspb.CloseSessionRequest) (*bfspb.CloseSessionResponse, error) {
	return &bfspb.CloseSessionResponse{}, nil
}

func (f *watchNS) WatchDirLocks(_ *bfspb.WatchDirLocksRequest, stream bfspb.NameServer_WatchDirLocksServer) error {
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	h := &heldStream{events: make(chan *bfspb.DirLockEvent), brk: make(chan struct{})}
	f.streams <- h
	for {
		select {
		case ev := <-h.events:
			if err := stream.Send(ev); err != nil {
				return err
			}
		case <-h.brk:
			return status.Error(codes.Unavailable, "stream broken")
		case <-stream.Context().Done():
			return nil
		}
	}
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

func (f *watchNS) GetDirLock(_ context.Context, req *bfspb.GetDirLockRequest) (*bfspb.GetDirLockResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.mu.gets[req.Path]
	if g == nil {
		g = &scriptedGet{state: bfspb.LockStatus_LOCK_STATUS_LOCKED}
	}
	g.calls++
	if g.unavailable < 0 || g.calls <= g.unavailable {
		return nil, status.Error(codes.Unavailable, "nameserver out of reach")
	}
	d := &bfspb.DirLock{Path: req.Path, Status: g.state}
	if g.state == bfspb.LockStatus_LOCK_STATUS_LOCKED {
		d.SessionId, d.Epoch = "s1", lockEpochs[req.Path]
	}
	return &bfspb.GetDirLockResponse{Lock: d}, nil
}

func (f *watchNS) script(path string, g *scriptedGet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.gets[path] = g
}

// TestLockCheckAfterStreamRestartIsRetried: the watch stream breaks while
// a LockDir is in flight, and a new one is up (its restart looked up every
// handle there was) before the answer arrives, so the new handle must look
// its lock up itself: it was forced away while no stream was up. When that
// lookup gets no answer it is looked up again, and Done closes.
func TestLockCheckAfterStreamRestartIsRetried(t *testing.T) {
	f, addr := startWatchNS(t)
	f.script("/t", &scriptedGet{unavailable: 1, state: bfspb.LockStatus_LOCK_STATUS_UNLOCKED})
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
	second.events <- &bfspb.DirLockEvent{
		Lock:     &bfspb.DirLock{Path: "/u", Status: bfspb.LockStatus_LOCK_STATUS_UNLOCKED, SessionId: "s1", Epoch: lockEpochs["/u"]},
		Previous: bfspb.LockStatus_LOCK_STATUS_LOCKED, Reason: "force",
	}
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
	f.script("/t", &scriptedGet{unavailable: -1})
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
	second.events <- &bfspb.DirLockEvent{
		Lock:     &bfspb.DirLock{Path: "/u", Status: bfspb.LockStatus_LOCK_STATUS_UNLOCKED, SessionId: "s1", Epoch: lockEpochs["/u"]},
		Previous: bfspb.LockStatus_LOCK_STATUS_LOCKED, Reason: "force",
	}
	waitClosed(t, u.Done(), "Done of /u while /t cannot be looked up")
}
