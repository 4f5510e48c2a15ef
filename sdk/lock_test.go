package sdk_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

func TestLockUnlockAndGating(t *testing.T) {
	cl := startCluster(t, 0)
	ctx := context.Background()
	a := dial(t, cl.NameServerAddr, cl.AsClient(), sdk.WithHolder("10.0.0.1:2000:1"))
	b := dial(t, cl.NameServerAddr, cl.AsClient(), sdk.WithHolder("10.0.0.2:2000:1"))
	require.NoError(t, a.MkdirAll(ctx, "/tera/t1/lg0", 0))

	la, err := a.LockDir(ctx, "/tera/t1")
	require.NoError(t, err)
	require.NotZero(t, la.Epoch())
	require.Equal(t, "10.0.0.1:2000:1", la.Holder())
	again, err := a.LockDir(ctx, "/tera/t1")
	require.NoError(t, err)
	require.Equal(t, la.Epoch(), again.Epoch(), "a retried lock keeps its epoch")
	nested, err := a.LockDir(ctx, "/tera/t1/lg0")
	require.NoError(t, err)
	require.Greater(t, nested.Epoch(), la.Epoch())

	_, err = b.LockDir(ctx, "/tera/t1")
	var le *sdk.LockedError
	require.ErrorAs(t, err, &le)
	require.ErrorIs(t, err, sdk.ErrLocked)
	require.Equal(t, "10.0.0.1:2000:1", le.Holder)
	require.Equal(t, la.Epoch(), le.Epoch)

	// Mutations from B are refused with the holder; A's go through.
	require.NoError(t, a.Touch(ctx, "/tera/t1/lg0/a"))
	err = b.Touch(ctx, "/tera/t1/lg0/b")
	require.ErrorIs(t, err, sdk.ErrLocked)
	require.ErrorAs(t, err, &le)
	require.Equal(t, "/tera/t1/lg0", le.Path)
	require.ErrorIs(t, b.Remove(ctx, "/tera/t1/lg0/a"), sdk.ErrLocked)
	require.ErrorIs(t, b.RemoveDir(ctx, "/tera", true), sdk.ErrLocked)
	require.ErrorIs(t, b.Rename(ctx, "/tera/t1/lg0/a", "/x"), sdk.ErrLocked)
	require.ErrorIs(t, b.Chmod(ctx, "/tera/t1", 0o700), sdk.ErrLocked)
	_, err = b.Stat(ctx, "/tera/t1/lg0/a")
	require.NoError(t, err, "reads are never blocked")

	st, err := b.GetDirLock(ctx, "/tera/t1")
	require.NoError(t, err)
	require.Equal(t, sdk.Locked, st.Status)
	locks, err := b.ListDirLocks(ctx, "/tera", nil)
	require.NoError(t, err)
	require.Len(t, locks, 2)

	require.NoError(t, la.Unlock(ctx))
	select {
	case <-la.Done():
	default:
		t.Fatal("Done open after Unlock")
	}
	lb, err := b.LockDir(ctx, "/tera/t1")
	require.NoError(t, err)
	require.Greater(t, lb.Epoch(), nested.Epoch(), "epochs only grow")
	hist, err := b.LockHistory(ctx, "/tera/t1")
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.Equal(t, "holder", hist[0].Reason)
}

func startCluster(t *testing.T, chunkservers int) *testcluster.Cluster {
	t.Helper()
	if chunkservers == 0 {
		cl, _ := newCluster(t)
		return cl
	}
	cl, _ := dataCluster(t)
	return cl
}

func TestWaitForLock(t *testing.T) {
	cl := startCluster(t, 0)
	ctx := context.Background()
	a := dial(t, cl.NameServerAddr, cl.AsClient())
	b := dial(t, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, a.Mkdir(ctx, "/d", 0))
	la, err := a.LockDir(ctx, "/d")
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = b.LockDir(short, "/d", sdk.WaitForLock())
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "the wait ends at the deadline")
	var le *sdk.LockedError
	if errors.As(err, &le) { // the nameserver's answer made it back in time
		require.ErrorIs(t, err, sdk.ErrLocked)
		require.Equal(t, a.Holder(), le.Holder)
		require.Equal(t, la.Epoch(), le.Epoch)
	}

	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		lb, err := b.LockDir(wctx, "/d", sdk.WaitForLock())
		if err == nil && lb.Epoch() <= la.Epoch() {
			err = errors.New("epoch did not grow")
		}
		got <- err
	}()
	require.NoError(t, la.Unlock(ctx))
	require.NoError(t, <-got)
}

// TestForcedUnlockFencesTheHolder is the failover in miniature: A holds
// /t1 and writes; the master force-unlocks; the unlock returns only once
// A's file is sealed and closed; A's handle reports the loss, A's writes
// and mutations are refused, and B finds every byte A synced.
func TestForcedUnlockFencesTheHolder(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	a := dial(t, cl.NameServerAddr, cl.AsClient(), sdk.WithHolder("tablet-a"))
	b := dial(t, cl.NameServerAddr, cl.AsClient(), sdk.WithHolder("tablet-b"))
	master := dial(t, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, a.MkdirAll(ctx, "/t1", 0))
	la, err := a.LockDir(ctx, "/t1")
	require.NoError(t, err)
	w, err := a.Create(ctx, "/t1/log")
	require.NoError(t, err)
	data := randomBytes(1<<20, 5)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))

	watch, err := master.WatchDirLocks(ctx, "/t1")
	require.NoError(t, err)
	defer watch.Close()

	d, err := master.UnlockDir(ctx, "/t1", sdk.Force(), sdk.WaitUnlocked(), sdk.AtEpoch(la.Epoch()))
	require.NoError(t, err)
	require.Equal(t, sdk.Unlocked, d.Status)
	select {
	case <-la.Done():
		require.ErrorIs(t, la.Err(), sdk.ErrLockLost)
	case <-time.After(10 * time.Second):
		t.Fatal("A's lock handle never reported the loss")
	}
	var seen []sdk.LockStatus
	for len(seen) < 2 {
		ev, err := watch.Next()
		require.NoError(t, err)
		seen = append(seen, ev.Lock.Status)
	}
	require.Equal(t, []sdk.LockStatus{sdk.Cleaning, sdk.Unlocked}, seen)

	// A is fenced: writes die on the sealed replicas, mutations on the lock.
	_, err = w.Write(randomBytes(packet, 1))
	if err == nil {
		err = w.Sync(ctx)
	}
	require.Error(t, err)
	require.True(t, errors.Is(err, sdk.ErrSealed) || errors.Is(err, sdk.ErrNotOpen), "%v", err)

	lb, err := b.LockDir(ctx, "/t1")
	require.NoError(t, err)
	require.Greater(t, lb.Epoch(), la.Epoch())
	require.ErrorIs(t, a.Touch(ctx, "/t1/late"), sdk.ErrStaleEpoch, "A carries the fence of the lock it lost")
	got := get(t, b, "/t1/log")
	require.Equal(t, data, got[:len(data)], "every synced byte is there")
	hist, err := b.LockHistory(ctx, "/t1")
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.Equal(t, "force", hist[0].Reason)
	require.EqualValues(t, 1, hist[0].FilesSealed)
	// An unlock naming the old epoch never releases the new lock.
	_, err = master.UnlockDir(ctx, "/t1", sdk.Force(), sdk.AtEpoch(la.Epoch()))
	require.ErrorIs(t, err, sdk.ErrStaleEpoch)
}

const packet = 64 << 10

// TestExpiredHolderReleasesItsLock locks through raw RPCs under a session
// nobody keeps alive, as if the tablet server died: after the TTL the lock
// is cleaned without anyone's help and a waiting B gets it.
func TestExpiredHolderReleasesItsLock(t *testing.T) {
	cl := startCluster(t, 0)
	ctx := context.Background()
	raw := rawClient(t, cl)
	b := dial(t, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, b.Mkdir(ctx, "/t2", 0))
	open, err := raw.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: "dead-server", TtlMs: 500})
	require.NoError(t, err)
	lk, err := raw.LockDir(ctx, &bfspb.LockDirRequest{Path: "/t2", SessionId: open.SessionId})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, lk.Status)

	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lb, err := b.LockDir(wctx, "/t2", sdk.WaitForLock())
	require.NoError(t, err)
	require.Greater(t, lb.Epoch(), lk.Lock.Epoch)
	t.Logf("lock passed to B %v after the dead holder's last keep-alive (TTL 500ms)", time.Since(start))
	hist, err := b.LockHistory(ctx, "/t2")
	require.NoError(t, err)
	require.Equal(t, "expiry", hist[0].Reason)
}

func TestOperatorLock(t *testing.T) {
	cl := startCluster(t, 0)
	ctx := context.Background()
	op := dial(t, cl.NameServerAddr, cl.AsAdmin())
	c := dial(t, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, c.Mkdir(ctx, "/maint", 0))
	d, err := op.LockDirOperator(ctx, "/maint", "ops:alice")
	require.NoError(t, err)
	require.Equal(t, "ops:alice", d.Holder)
	require.NoError(t, op.Close(), "the operator lock outlives its client")
	require.ErrorIs(t, c.Touch(ctx, "/maint/x"), sdk.ErrLocked)
	_, err = c.UnlockDir(ctx, "/maint")
	require.ErrorIs(t, err, sdk.ErrLocked, "only a forced unlock releases it")
	_, err = c.UnlockDir(ctx, "/maint", sdk.Force())
	require.ErrorIs(t, err, sdk.ErrPermissionDenied, "only an admin forces an unlock")
	admin := dial(t, cl.NameServerAddr, cl.AsAdmin())
	_, err = admin.UnlockDir(ctx, "/maint", sdk.Force())
	require.NoError(t, err)
	require.NoError(t, c.Touch(ctx, "/maint/x"))
}

// TestForcedUnlockWithoutOpenFilesEndsTheLock: with nothing to drain a
// forced unlock goes from LOCKED to UNLOCKED in one step, and the holder's
// handle must still report the loss (the session itself stays live).
func TestForcedUnlockWithoutOpenFilesEndsTheLock(t *testing.T) {
	cl := startCluster(t, 0)
	ctx := context.Background()
	a := dial(t, cl.NameServerAddr, cl.AsClient(), sdk.WithHolder("tablet-a"))
	master := dial(t, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, a.MkdirAll(ctx, "/t/lg0", 0))
	la, err := a.LockDir(ctx, "/t")
	require.NoError(t, err)
	nested, err := a.LockDir(ctx, "/t/lg0")
	require.NoError(t, err)

	d, err := master.UnlockDir(ctx, "/t", sdk.Force(), sdk.AtEpoch(la.Epoch()))
	require.NoError(t, err)
	require.Equal(t, sdk.Unlocked, d.Status, "nothing open: unlocked at once")
	waitClosed(t, la.Done(), "the forced-away lock's Done")
	require.ErrorIs(t, la.Err(), sdk.ErrLockLost)
	waitClosed(t, nested.Done(), "the nested lock's Done")
	require.ErrorIs(t, nested.Err(), sdk.ErrLockLost)
	s, err := a.Session(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Err(), "the session outlives its locks")
}

// TestLockHandleEnds covers the other ways a handle's lock ends: an unlock
// by its own session other than through the handle, and Client.Close.
func TestLockHandleEnds(t *testing.T) {
	cl := startCluster(t, 0)
	ctx := context.Background()
	a := dial(t, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, a.MkdirAll(ctx, "/x/y", 0))
	s, err := a.Session(ctx)
	require.NoError(t, err)

	lx, err := a.LockDir(ctx, "/x")
	require.NoError(t, err)
	require.Equal(t, s.ID(), lx.SessionID())
	again, err := a.LockDir(ctx, "/x")
	require.NoError(t, err)
	d, err := a.UnlockDir(ctx, "/x")
	require.NoError(t, err)
	require.Equal(t, sdk.Unlocked, d.Status)
	waitClosed(t, lx.Done(), "Done after the session unlocked the directory")
	waitClosed(t, again.Done(), "Done of the second handle of the same lock")
	require.ErrorIs(t, lx.Err(), sdk.ErrLockLost)

	ly, err := a.LockDir(ctx, "/x/y")
	require.NoError(t, err)
	require.NoError(t, a.Close())
	waitClosed(t, ly.Done(), "Done after Client.Close")
	require.ErrorIs(t, ly.Err(), sdk.ErrLockLost)
	require.ErrorIs(t, ly.Err(), sdk.ErrClosed)
}

// TestLockWatchOutlivesARestart: the session's watch breaks with the
// nameserver and is started anew, so a forced unlock after the restart
// still ends the handle; an admin watch reports the break as such.
func TestLockWatchOutlivesARestart(t *testing.T) {
	cl, _ := newCluster(t)
	ctx := context.Background()
	a := dial(t, cl.NameServerAddr, cl.AsClient())
	master := dial(t, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, a.Mkdir(ctx, "/r", 0))
	l, err := a.LockDir(ctx, "/r")
	require.NoError(t, err)
	watch, err := master.WatchDirLocks(ctx, "/")
	require.NoError(t, err)
	defer watch.Close()

	cl.RestartNameServer()
	_, err = watch.Next()
	require.ErrorIs(t, err, sdk.ErrUnavailable)
	require.False(t, errors.Is(err, context.Canceled), "a broken stream is not a cancellation: %v", err)
	select {
	case <-l.Done():
		t.Fatalf("the lock survives a restart, its handle too: %v", l.Err())
	default:
	}
	_, err = master.UnlockDir(ctx, "/r", sdk.Force(), sdk.AtEpoch(l.Epoch()))
	require.NoError(t, err)
	waitClosed(t, l.Done(), "Done after a forced unlock following a restart")
	require.ErrorIs(t, l.Err(), sdk.ErrLockLost)
}

func TestLockTimesAbsentOnTheWireAreZero(t *testing.T) {
	cl := startCluster(t, 0)
	ctx := context.Background()
	c := dial(t, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, c.Mkdir(ctx, "/z", 0))
	d, err := c.GetDirLock(ctx, "/z")
	require.NoError(t, err)
	require.Equal(t, sdk.Unlocked, d.Status)
	require.True(t, d.Since.IsZero(), "not 1970: %v", d.Since)
}

// lockFake is a nameserver scripted to produce the orderings a real one
// produces only by chance: a lock watch confirmed late or broken, a call
// ended by gRPC before the caller's context. Everything else about locks
// is tested against the real nameserver.
type lockFake struct {
	steadySession

	// confirm is received from before each watch sends its headers;
	// watches counts the watches started; breakWatch ends the current
	// one with UNAVAILABLE.
	confirm    chan struct{}
	watches    chan string
	breakWatch chan struct{}

	mu struct {
		sync.Mutex
		confirmed bool
		// lockedBeforeConfirm is set if LockDir came before a watch was.
		lockedBeforeConfirm bool
		status              bfspb.LockStatus
	}
}

func startLockFake(t *testing.T) (*lockFake, string) {
	t.Helper()
	f := &lockFake{confirm: make(chan struct{}), watches: make(chan string, 10), breakWatch: make(chan struct{})}
	f.mu.status = bfspb.LockStatus_LOCK_STATUS_LOCKED
	return f, serveFake(t, f)
}

func (f *lockFake) WatchDirLocks(req *bfspb.WatchDirLocksRequest, stream bfspb.NameServer_WatchDirLocksServer) error {
	f.watches <- req.SessionId
	select {
	case <-f.confirm:
	case <-stream.Context().Done():
		return nil
	}
	f.mu.Lock()
	f.mu.confirmed = true
	f.mu.Unlock()
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	select {
	case <-f.breakWatch:
		return status.Error(codes.Unavailable, "watch broken by the test")
	case <-stream.Context().Done():
		return nil
	}
}

func (f *lockFake) LockDir(_ context.Context, req *bfspb.LockDirRequest) (*bfspb.LockDirResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.mu.confirmed {
		f.mu.lockedBeforeConfirm = true
	}
	return &bfspb.LockDirResponse{Lock: &bfspb.DirLock{Path: req.Path, Status: bfspb.LockStatus_LOCK_STATUS_LOCKED,
		SessionId: req.SessionId, Holder: "h", Epoch: 7}}, nil
}

func (f *lockFake) GetDirLock(_ context.Context, req *bfspb.GetDirLockRequest) (*bfspb.GetDirLockResponse, error) {
	switch req.Path {
	case "/deadline":
		return nil, status.Error(codes.DeadlineExceeded, "deadline passed on the server")
	case "/cancel":
		return nil, status.Error(codes.Canceled, "cancelled on the server")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return &bfspb.GetDirLockResponse{Lock: &bfspb.DirLock{Path: req.Path, Status: f.mu.status, Epoch: 7}}, nil
}

// TestFirstLockWaitsForTheWatch: the first lock of a session is asked for
// only once the nameserver has confirmed the session's watch.
func TestFirstLockWaitsForTheWatch(t *testing.T) {
	f, addr := startLockFake(t)
	c := dial(t, addr)
	ctx := context.Background()
	got := make(chan error, 1)
	go func() {
		_, err := c.LockDir(ctx, "/d")
		got <- err
	}()
	require.Equal(t, "s1", <-f.watches, "the watch is of the session")
	f.confirm <- struct{}{}
	require.NoError(t, <-got)
	f.mu.Lock()
	defer f.mu.Unlock()
	require.False(t, f.mu.lockedBeforeConfirm, "LockDir was sent before the watch was confirmed")
}

// TestBrokenWatchLooksLocksUp: a lock that ended while the session's
// watch was broken is found out once a new watch is up.
func TestBrokenWatchLooksLocksUp(t *testing.T) {
	f, addr := startLockFake(t)
	c := dial(t, addr)
	ctx := context.Background()
	go func() { f.confirm <- struct{}{} }()
	l, err := c.LockDir(ctx, "/d")
	require.NoError(t, err)
	<-f.watches
	f.mu.Lock()
	f.mu.status = bfspb.LockStatus_LOCK_STATUS_UNLOCKED // ended unseen
	f.mu.Unlock()
	f.breakWatch <- struct{}{}
	<-f.watches
	select {
	case <-l.Done():
		t.Fatal("the handle was lost before a new watch was up")
	default:
	}
	f.confirm <- struct{}{}
	waitClosed(t, l.Done(), "Done after the watch came back")
	require.ErrorIs(t, l.Err(), sdk.ErrLockLost)
}

// TestRPCEndedByGRPCMatchesTheContextError: a call gRPC ended with
// DEADLINE_EXCEEDED or CANCELLED, before the caller's context did, still
// matches the context's error, and keeps its gRPC status.
func TestRPCEndedByGRPCMatchesTheContextError(t *testing.T) {
	_, addr := startLockFake(t)
	c := dial(t, addr)
	ctx := context.Background()
	_, err := c.GetDirLock(ctx, "/deadline")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, codes.DeadlineExceeded, status.Code(err))
	_, err = c.GetDirLock(ctx, "/cancel")
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, codes.Canceled, status.Code(err))
}

// TestGrantStartsClean: locking a directory where another session has a
// file open for write seals and closes that file first (a cleaning with
// reason "grant" in the history); the foreign writer's later bytes are
// refused, every byte it synced is kept, and the locker's own open file
// is left alone.
func TestGrantStartsClean(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	a := dial(t, cl.NameServerAddr, cl.AsClient(), sdk.WithHolder("tablet-a"))
	other := dial(t, cl.NameServerAddr, cl.AsClient(), sdk.WithHolder("stray-writer"))
	require.NoError(t, a.MkdirAll(ctx, "/g/t1", 0))
	w, err := other.Create(ctx, "/g/t1/stray")
	require.NoError(t, err)
	data := randomBytes(3000, 9)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))
	own, err := a.Create(ctx, "/g/t1/own")
	require.NoError(t, err)
	_, err = own.Write(data)
	require.NoError(t, err)
	require.NoError(t, own.Sync(ctx))

	l, err := a.LockDir(ctx, "/g/t1")
	require.NoError(t, err)
	fi, err := a.Stat(ctx, "/g/t1/stray")
	require.NoError(t, err)
	require.Empty(t, fi.WriterSession, "the foreign file was closed before the grant")
	require.EqualValues(t, len(data), fi.Size, "with every byte its writer synced")
	fi, err = a.Stat(ctx, "/g/t1/own")
	require.NoError(t, err)
	require.Equal(t, l.SessionID(), fi.WriterSession, "the locker's own file stays open")

	_, err = w.Write(randomBytes(packet, 2))
	if err == nil {
		err = w.Sync(ctx)
	}
	require.Error(t, err, "the stray writer's bytes are refused after the grant")
	require.Equal(t, data, get(t, a, "/g/t1/stray"))

	hist, err := a.LockHistory(ctx, "/g/t1")
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.Equal(t, "grant", hist[0].Reason)
	require.EqualValues(t, 1, hist[0].FilesSealed)
	require.Less(t, hist[0].Epoch, l.Epoch(), "the cleaning came before the grant")

	// The holder's own file goes on.
	_, err = own.Write(data)
	require.NoError(t, err)
	require.NoError(t, own.Close())
}
