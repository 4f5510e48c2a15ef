package sdk_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// awaitDone waits for a lock handle to report its loss.
func awaitDone(t *testing.T, l *sdk.Lock) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("lock %s: Done never closed", l.Path())
	}
}

// requireStale checks err is a refusal by the fence of lock path at
// epoch, with the directory now in status.
func requireStale(t *testing.T, err error, path string, epoch uint64, status sdk.LockStatus) {
	t.Helper()
	require.ErrorIs(t, err, sdk.ErrStaleEpoch)
	var se *sdk.StaleEpochError
	require.ErrorAs(t, err, &se)
	require.Equal(t, path, se.Path)
	require.Equal(t, epoch, se.Epoch)
	require.Equal(t, status, se.Status, "%v", err)
}

// TestLostLockFencesForGood: once a forced unlock has cleaned A's
// directory, A's session still alive, every mutation A makes there is
// refused, while the directory is UNLOCKED, after B locked it, after B
// let it go, and from a new session after A lost its own; locking the
// directory again lifts the fence.
func TestLostLockFencesForGood(t *testing.T) {
	cl := startCluster(t, 0)
	ctx := context.Background()
	a := dial(t, cl.NameServerAddr, cl.AsClient(), sdk.WithHolder("tablet-a"))
	b := dial(t, cl.NameServerAddr, cl.AsClient(), sdk.WithHolder("tablet-b"))
	master := dial(t, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, a.MkdirAll(ctx, "/tera/t1/lg0", 0))
	la, err := a.LockDir(ctx, "/tera/t1")
	require.NoError(t, err)
	require.NoError(t, a.Touch(ctx, "/tera/t1/sst1"))
	require.NoError(t, a.Touch(ctx, "/tera/t1/lg0/sst2"))

	_, err = master.UnlockDir(ctx, "/tera/t1", sdk.Force(), sdk.WaitUnlocked())
	require.NoError(t, err)
	awaitDone(t, la)
	sa, err := a.Session(ctx)
	require.NoError(t, err)
	require.Equal(t, la.SessionID(), sa.ID(), "A's session outlived its lock")

	tries := func(status sdk.LockStatus) {
		t.Helper()
		e := la.Epoch()
		requireStale(t, a.Touch(ctx, "/tera/t1/new"), "/tera/t1", e, status)
		requireStale(t, a.Remove(ctx, "/tera/t1/sst1"), "/tera/t1", e, status)
		requireStale(t, a.Rename(ctx, "/tera/t1/sst1", "/tera/t1/sst9"), "/tera/t1", e, status)
		requireStale(t, a.Rename(ctx, "/tera/t1/sst1", "/away"), "/tera/t1", e, status)
		requireStale(t, a.Mkdir(ctx, "/tera/t1/lg1", 0), "/tera/t1", e, status)
		requireStale(t, a.RemoveDir(ctx, "/tera/t1/lg0", true), "/tera/t1", e, status)
		requireStale(t, a.RemoveDir(ctx, "/tera", true), "/tera/t1", e, status)
		requireStale(t, a.Chmod(ctx, "/tera/t1/lg0/sst2", 0o600), "/tera/t1", e, status)
		_, err := a.Create(ctx, "/tera/t1/log")
		requireStale(t, err, "/tera/t1", e, status)
		// Reads are never fenced, nor is what lies outside the lock.
		_, err = a.Stat(ctx, "/tera/t1/sst1")
		require.NoError(t, err)
	}
	tries(sdk.Unlocked)
	require.NoError(t, a.Touch(ctx, "/tera/elsewhere"))
	_, err = a.Stat(ctx, "/tera/t1/sst1")
	require.NoError(t, err, "nothing stale went through")

	lb, err := b.LockDir(ctx, "/tera/t1")
	require.NoError(t, err)
	tries(sdk.Locked)
	require.NoError(t, lb.Unlock(ctx))
	_, err = b.UnlockDir(ctx, "/tera/t1") // answered with the state, already unlocked
	require.NoError(t, err)
	tries(sdk.Unlocked)

	// Releasing a lost lock does not lift its fence.
	require.NoError(t, la.Unlock(ctx))
	tries(sdk.Unlocked)

	// A new session changes nothing.
	_, err = rawClient(t, cl).CloseSession(ctx, &bfspb.CloseSessionRequest{SessionId: sa.ID()})
	require.NoError(t, err)
	select {
	case <-sa.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("A never noticed its session closed")
	}
	tries(sdk.Unlocked)
	sa2, err := a.Session(ctx)
	require.NoError(t, err)
	require.NotEqual(t, sa.ID(), sa2.ID())

	// Locking the directory again lifts the fence.
	la2, err := a.LockDir(ctx, "/tera/t1")
	require.NoError(t, err)
	require.Greater(t, la2.Epoch(), lb.Epoch())
	require.NoError(t, a.Touch(ctx, "/tera/t1/new"))
	require.NoError(t, a.Rename(ctx, "/tera/t1/sst1", "/tera/t1/sst9"))
	require.NoError(t, a.RemoveDir(ctx, "/tera/t1/lg0", true))
}

// cl2raw is rawClient under a name that reads well where a test acts
// behind the SDK's back.

// TestNestedLockFences: losing a nested lock fences its subtree only;
// relocking the parent lifts the fences below it.
func TestNestedLockFences(t *testing.T) {
	cl := startCluster(t, 0)
	ctx := context.Background()
	a := dial(t, cl.NameServerAddr, cl.AsClient())
	master := dial(t, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, a.MkdirAll(ctx, "/t/lg", 0))
	lt, err := a.LockDir(ctx, "/t")
	require.NoError(t, err)
	llg, err := a.LockDir(ctx, "/t/lg")
	require.NoError(t, err)

	_, err = master.UnlockDir(ctx, "/t/lg", sdk.Force(), sdk.WaitUnlocked())
	require.NoError(t, err)
	awaitDone(t, llg)
	require.NoError(t, a.Touch(ctx, "/t/x"), "the parent lock is still held")
	requireStale(t, a.Touch(ctx, "/t/lg/x"), "/t/lg", llg.Epoch(), sdk.Unlocked)
	requireStale(t, a.RemoveDir(ctx, "/t", true), "/t/lg", llg.Epoch(), sdk.Unlocked)

	llg2, err := a.LockDir(ctx, "/t/lg")
	require.NoError(t, err)
	require.NoError(t, a.Touch(ctx, "/t/lg/x"))
	require.NoError(t, llg2.Unlock(ctx))
	require.NoError(t, a.Touch(ctx, "/t/lg/y"), "a lock released by its holder does not fence")

	// The parent taken away fences the whole subtree...
	_, err = master.UnlockDir(ctx, "/t", sdk.Force(), sdk.WaitUnlocked())
	require.NoError(t, err)
	awaitDone(t, lt)
	requireStale(t, a.Touch(ctx, "/t/lg/z"), "/t", lt.Epoch(), sdk.Unlocked)
	// ...until the parent is locked again.
	_, err = a.LockDir(ctx, "/t")
	require.NoError(t, err)
	require.NoError(t, a.Touch(ctx, "/t/lg/z"))
}

// TestReleasedLockDoesNotFence: Unlock, UnlockDir and deleting the locked
// directory leave the client free to use it.
func TestReleasedLockDoesNotFence(t *testing.T) {
	cl := startCluster(t, 0)
	ctx := context.Background()
	a := dial(t, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, a.MkdirAll(ctx, "/u/v", 0))
	l, err := a.LockDir(ctx, "/u")
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, a.Touch(ctx, "/u/a"))

	l, err = a.LockDir(ctx, "/u")
	require.NoError(t, err)
	_, err = a.UnlockDir(ctx, "/u")
	require.NoError(t, err)
	awaitDone(t, l)
	require.NoError(t, a.Touch(ctx, "/u/b"))

	l, err = a.LockDir(ctx, "/u/v")
	require.NoError(t, err)
	require.NoError(t, a.RemoveDir(ctx, "/u/v", true))
	awaitDone(t, l)
	require.NoError(t, a.Mkdir(ctx, "/u/v", 0))
	require.NoError(t, a.Touch(ctx, "/u/v/c"))
}

// TestFencedWriter: a writer whose lock was taken away gets every later
// block call refused, whichever comes first.
func TestFencedWriter(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	a := dial(t, cl.NameServerAddr, cl.AsClient())
	master := dial(t, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, a.Mkdir(ctx, "/w", 0))
	l, err := a.LockDir(ctx, "/w")
	require.NoError(t, err)
	w, err := a.Create(ctx, "/w/log") // no block yet
	require.NoError(t, err)
	_, err = master.UnlockDir(ctx, "/w", sdk.Force(), sdk.WaitUnlocked())
	require.NoError(t, err)
	awaitDone(t, l)
	_, err = w.Write(randomBytes(10, 1))
	require.NoError(t, err, "buffered")
	err = w.Sync(ctx)
	require.Error(t, err)
	require.True(t, errors.Is(err, sdk.ErrStaleEpoch) || errors.Is(err, sdk.ErrNotOpen), "%v", err)
	require.Error(t, w.Close())
	fi, err := a.Stat(ctx, "/w/log")
	require.NoError(t, err)
	require.Zero(t, fi.Size)
}

// TestOthersUnlockKeepsFence (attack e): a lock ended by anyone but its
// client (here another process of the same identity that learnt the
// session id, which the nameserver cannot tell from the holder; or a
// bug) fences the client as a forced unlock does: the nameserver calls
// it the holder's unlock, but the client made no such call, so its
// next mutation in the directory is STALE_EPOCH.
func TestOthersUnlockKeepsFence(t *testing.T) {
	cl := startCluster(t, 0)
	ctx := context.Background()
	a := dial(t, cl.NameServerAddr, cl.AsClient(), sdk.WithHolder("tablet-a"))
	require.NoError(t, a.MkdirAll(ctx, "/tera/t1", 0))
	la, err := a.LockDir(ctx, "/tera/t1")
	require.NoError(t, err)
	require.NoError(t, a.Touch(ctx, "/tera/t1/sst1"))

	other := bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr))
	resp, err := other.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: "/tera/t1", SessionId: la.SessionID()})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_UNLOCKED, resp.Status, resp.Message)
	awaitDone(t, la)
	require.ErrorIs(t, la.Err(), sdk.ErrLockLost)

	requireStale(t, a.Touch(ctx, "/tera/t1/new"), "/tera/t1", la.Epoch(), sdk.Unlocked)
	requireStale(t, a.Remove(ctx, "/tera/t1/sst1"), "/tera/t1", la.Epoch(), sdk.Unlocked)
	// Locking it again lifts the fence.
	la2, err := a.LockDir(ctx, "/tera/t1")
	require.NoError(t, err)
	require.NoError(t, a.Touch(ctx, "/tera/t1/new"))
	require.NoError(t, la2.Unlock(ctx))
	require.NoError(t, a.Touch(ctx, "/tera/t1/after"), "its own unlock fenced the client")
}

// TestOwnReleasesLiftFences: what the client lets go itself does not
// fence it, whichever comes first, its answer or the watch's event:
// unlocking a directory (its nested lock with it) and deleting a locked
// one.
func TestOwnReleasesLiftFences(t *testing.T) {
	cl := startCluster(t, 0)
	ctx := context.Background()
	a := dial(t, cl.NameServerAddr, cl.AsClient(), sdk.WithHolder("tablet-a"))
	require.NoError(t, a.MkdirAll(ctx, "/t/lg", 0))
	lt, err := a.LockDir(ctx, "/t")
	require.NoError(t, err)
	lg, err := a.LockDir(ctx, "/t/lg")
	require.NoError(t, err)
	_, err = a.UnlockDir(ctx, "/t")
	require.NoError(t, err)
	awaitDone(t, lt)
	awaitDone(t, lg)
	require.NoError(t, a.Touch(ctx, "/t/lg/x"), "its own unlock fenced the client")

	require.NoError(t, a.MkdirAll(ctx, "/gone/lg", 0))
	lgone, err := a.LockDir(ctx, "/gone/lg")
	require.NoError(t, err)
	require.NoError(t, a.RemoveDir(ctx, "/gone", true))
	awaitDone(t, lgone)
	require.NoError(t, a.MkdirAll(ctx, "/gone/lg", 0), "its own delete fenced the client")
}
