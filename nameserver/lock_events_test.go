package nameserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// watchLocks starts a WatchDirLocks stream and waits for the nameserver to
// confirm it (its response headers): every later transition is delivered.
func watchLocks(t *testing.T, ns bfspb.NameServerClient, req *bfspb.WatchDirLocksRequest) bfspb.NameServer_WatchDirLocksClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := ns.WatchDirLocks(ctx, req)
	require.NoError(t, err)
	md, err := stream.Header()
	require.NoError(t, err)
	require.NotNil(t, md, "the stream ended before it was confirmed")
	return stream
}

// mkdirAll makes the directory path and its parents.
func mkdirAll(t *testing.T, ns bfspb.NameServerClient, path string) {
	t.Helper()
	r, err := ns.Mkdir(context.Background(), &bfspb.MkdirRequest{Path: path, Parents: true})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, r.Status, r.Message)
}

func openSession(t *testing.T, ns bfspb.NameServerClient, holder string) string {
	t.Helper()
	r, err := ns.OpenSession(context.Background(), &bfspb.OpenSessionRequest{Holder: holder, TtlMs: 10000})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, r.Status)
	return r.SessionId
}

func lockAs(t *testing.T, ns bfspb.NameServerClient, path, session string) *bfspb.DirLock {
	t.Helper()
	r, err := ns.LockDir(context.Background(), &bfspb.LockDirRequest{Path: path, SessionId: session})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, r.Status, r.Message)
	return r.Lock
}

func recv(t *testing.T, stream bfspb.NameServer_WatchDirLocksClient) *bfspb.DirLockEvent {
	t.Helper()
	ev, err := stream.Recv()
	require.NoError(t, err)
	return ev
}

// requireEnd checks that ev ends lock l: it names l's path, holder,
// session and epoch.
func requireEnd(t *testing.T, ev *bfspb.DirLockEvent, l *bfspb.DirLock, status, previous bfspb.LockStatus, reason string) {
	t.Helper()
	require.Equal(t, l.Path, ev.Lock.Path)
	require.Equal(t, status, ev.Lock.Status)
	require.Equal(t, previous, ev.Previous)
	require.Equal(t, reason, ev.Reason)
	require.Equal(t, l.Epoch, ev.Lock.Epoch, "the event names the epoch of the lock it ends")
	require.Equal(t, l.Holder, ev.Lock.Holder)
	require.Equal(t, l.SessionId, ev.Lock.SessionId)
	require.NotZero(t, ev.Lock.SinceNs)
}

// TestUnlockWithNothingToDrainNamesTheLock: a forced unlock of a directory
// with no file open goes LOCKED -> UNLOCKED in one step; its events (one
// per lock of the subtree, nested ones included) still say which lock
// ended, and a session's watch gets exactly the ends of its own locks.
func TestUnlockWithNothingToDrainNamesTheLock(t *testing.T) {
	c := testcluster.Start(t)
	ns := bfspb.NewNameServerClient(c.DialAs(c.NameServerAddr, certs.AdminUser)) // forces unlocks
	ctx := context.Background()
	mkdirAll(t, ns, "/t/lg0")
	mkdirAll(t, ns, "/other")
	a := openSession(t, ns, "tablet-a")
	b := openSession(t, ns, "tablet-b")

	all := watchLocks(t, ns, &bfspb.WatchDirLocksRequest{Prefix: "/"})
	mine := watchLocks(t, ns, &bfspb.WatchDirLocksRequest{SessionId: a})
	parent := lockAs(t, ns, "/t", a)
	nested := lockAs(t, ns, "/t/lg0", a)
	other := lockAs(t, ns, "/other", b)
	for _, l := range []*bfspb.DirLock{parent, nested, other} {
		ev := recv(t, all)
		require.Equal(t, bfspb.LockStatus_LOCK_STATUS_LOCKED, ev.Lock.Status)
		require.Equal(t, l.Epoch, ev.Lock.Epoch)
	}

	// Someone else's lock ends: not for a's watch.
	un, err := ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: "/other", SessionId: b})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_UNLOCKED, un.Status)
	requireEnd(t, recv(t, all), other, bfspb.LockStatus_LOCK_STATUS_UNLOCKED, bfspb.LockStatus_LOCK_STATUS_LOCKED, "holder")

	un, err = ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: "/t", Force: true, Epoch: parent.Epoch})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_UNLOCKED, un.Status, "nothing open: unlocked at once")
	for _, stream := range []bfspb.NameServer_WatchDirLocksClient{all, mine} {
		requireEnd(t, recv(t, stream), parent, bfspb.LockStatus_LOCK_STATUS_UNLOCKED, bfspb.LockStatus_LOCK_STATUS_LOCKED, "force")
		requireEnd(t, recv(t, stream), nested, bfspb.LockStatus_LOCK_STATUS_UNLOCKED, bfspb.LockStatus_LOCK_STATUS_LOCKED, "force")
	}

	// a's next lock: its grant is not for a's watch, its end is.
	again := lockAs(t, ns, "/t", a)
	un, err = ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: "/t", SessionId: a})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_UNLOCKED, un.Status)
	requireEnd(t, recv(t, mine), again, bfspb.LockStatus_LOCK_STATUS_UNLOCKED, bfspb.LockStatus_LOCK_STATUS_LOCKED, "holder")
}

// TestCleaningEventsNameTheLock: with a file to drain, the unlock goes
// LOCKED -> CLEANING -> UNLOCKED, and both events name the lock.
func TestCleaningEventsNameTheLock(t *testing.T) {
	c := testcluster.Start(t, testcluster.WithChunkservers(3))
	ctx := context.Background()
	holder, err := sdk.Dial(ctx, c.NameServerAddr, c.AsClient(), sdk.WithHolder("tablet-a"))
	require.NoError(t, err)
	t.Cleanup(func() { holder.Close() })
	require.Eventually(t, func() bool { return c.NameServer().LiveChunkservers() >= 3 },
		10*time.Second, 10*time.Millisecond, "chunkservers did not register")
	require.NoError(t, holder.MkdirAll(ctx, "/t", 0))
	l, err := holder.LockDir(ctx, "/t")
	require.NoError(t, err)
	w, err := holder.Create(ctx, "/t/log")
	require.NoError(t, err)
	_, err = w.Write([]byte("synced"))
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))

	ns := bfspb.NewNameServerClient(c.DialAs(c.NameServerAddr, certs.AdminUser)) // forces unlocks
	all := watchLocks(t, ns, &bfspb.WatchDirLocksRequest{Prefix: "/t"})
	mine := watchLocks(t, ns, &bfspb.WatchDirLocksRequest{SessionId: l.SessionID()})
	un, err := ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: "/t", Force: true, Wait: true})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_UNLOCKED, un.Status, un.Message)
	want := &bfspb.DirLock{Path: "/t", Holder: "tablet-a", SessionId: l.SessionID(), Epoch: l.Epoch()}
	for _, stream := range []bfspb.NameServer_WatchDirLocksClient{all, mine} {
		requireEnd(t, recv(t, stream), want, bfspb.LockStatus_LOCK_STATUS_CLEANING, bfspb.LockStatus_LOCK_STATUS_LOCKED, "force")
		requireEnd(t, recv(t, stream), want, bfspb.LockStatus_LOCK_STATUS_UNLOCKED, bfspb.LockStatus_LOCK_STATUS_CLEANING, "cleaned")
	}
}

// TestLockedDirectoryDeletedOrMoved: the holder may delete its locked
// directory, and the locks that end with it are published like any end
// (naming the lock, reason "deleted"), so its handles learn of it. Nobody
// may move a lock: renaming a locked directory, or one above a lock, is
// refused with LOCKED, also for the holder.
func TestLockedDirectoryDeletedOrMoved(t *testing.T) {
	c := testcluster.Start(t)
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	ctx := context.Background()
	mkdirAll(t, ns, "/t/lg0")
	a := openSession(t, ns, "tablet-a")
	mine := watchLocks(t, ns, &bfspb.WatchDirLocksRequest{SessionId: a})
	parent := lockAs(t, ns, "/t", a)
	nested := lockAs(t, ns, "/t/lg0", a)

	for _, src := range []string{"/t", "/t/lg0"} {
		mv, err := ns.Rename(ctx, &bfspb.RenameRequest{Src: src, Dst: "/moved", SessionId: a})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_LOCKED, mv.Status, "rename %s: %s", src, mv.Message)
		require.Contains(t, mv.Message, "cannot be moved")
	}

	rm, err := ns.DeleteDir(ctx, &bfspb.DeleteDirRequest{Path: "/t", Recursive: true, SessionId: a})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, rm.Status, rm.Message)
	requireEnd(t, recv(t, mine), parent, bfspb.LockStatus_LOCK_STATUS_UNLOCKED, bfspb.LockStatus_LOCK_STATUS_LOCKED, "deleted")
	requireEnd(t, recv(t, mine), nested, bfspb.LockStatus_LOCK_STATUS_UNLOCKED, bfspb.LockStatus_LOCK_STATUS_LOCKED, "deleted")
	list, err := ns.ListDirLocks(ctx, &bfspb.ListDirLocksRequest{Prefix: "/"})
	require.NoError(t, err)
	require.Empty(t, list.Locks)
}
