package namespace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestApplyRefusesAppliedIndexes: a command at an index at or below the
// applied one is refused with ErrApplied and changes nothing; a command
// that fails records no index; the applied index survives a reopen.
func TestApplyRefusesAppliedIndexes(t *testing.T) {
	dir := t.TempDir()
	s := openEmpty(t, dir)
	require.Zero(t, s.AppliedIndex())
	_, err := s.Apply(0, cmdOf(1, &bfspb.FormatCmd{ClusterId: "c"}))
	require.ErrorIs(t, err, ErrApplied, "index 0 is no log index")
	_, err = s.Apply(5, cmdOf(1, &bfspb.FormatCmd{ClusterId: "c"}))
	require.NoError(t, err)
	require.EqualValues(t, 5, s.AppliedIndex(), "a log may start anywhere (after a snapshot)")

	before := dump(t, s)
	for _, index := range []uint64{5, 4, 1} {
		_, err = s.Apply(index, cmdOf(1, &bfspb.MkdirCmd{Path: "/a"}))
		require.ErrorIs(t, err, ErrApplied, "index %d", index)
		require.False(t, IsStorageError(err))
	}
	_, err = s.Apply(6, cmdOf(1, &bfspb.MkdirCmd{Path: "/a/b"}))
	require.ErrorIs(t, err, ErrNotFound)
	require.EqualValues(t, 5, s.AppliedIndex(), "a command that fails applies no index")
	require.Empty(t, diffState(before, dump(t, s)))

	_, err = s.Apply(7, cmdOf(1, &bfspb.MkdirCmd{Path: "/a"}))
	require.NoError(t, err, "the index after a failed one")
	_, err = s.Apply(6, cmdOf(1, &bfspb.MkdirCmd{Path: "/b"}))
	require.ErrorIs(t, err, ErrApplied, "the failed index, now below the applied one")
	require.NoError(t, s.Close())

	s = openEmpty(t, dir)
	require.EqualValues(t, 7, s.AppliedIndex())
	_, err = s.Apply(7, cmdOf(1, &bfspb.MkdirCmd{Path: "/b"}))
	require.ErrorIs(t, err, ErrApplied, "after a reopen")
	_, err = s.Apply(8, cmdOf(1, &bfspb.MkdirCmd{Path: "/b"}))
	require.NoError(t, err)
}

func TestIsStorageError(t *testing.T) {
	require.False(t, IsStorageError(nil))
	for _, err := range []error{ErrNotFound, ErrExists, ErrInvalid, ErrSessionExpired, ErrApplied, ErrNotOpen,
		dirlock.ErrLocked, dirlock.ErrStaleEpoch, &dirlock.LockedError{Lock: dirlock.Lock{Status: dirlock.Cleaning}}} {
		require.False(t, IsStorageError(err), "%v", err)
	}
	require.True(t, IsStorageError(pebble.ErrClosed))
	require.True(t, IsStorageError(os.ErrPermission))

	// What a client's command can make fail is the command's outcome,
	// never the store's failure (which stops a replica).
	s := open(t, t.TempDir())
	openSessions(t, s, "A")
	require.NoError(t, mkdir(s, "/t", false))
	for _, fence := range []*bfspb.Fence{{Path: "/elsewhere", Epoch: 1}, {Path: "/t", Epoch: 9}} {
		cmd := cmdOf(1, &bfspb.MkdirCmd{Path: "/t/d", SessionId: "A"})
		cmd.Fences = []*bfspb.Fence{fence}
		_, err := s.apply(cmd)
		require.Error(t, err)
		require.False(t, IsStorageError(err), "fence %v: %v", fence, err)
	}
}

// snapshotSource builds a store with a bit of everything: directories,
// a lock, a file open for write with its block, sessions, a member, a
// drain mark; its entries get other ids than other's, and its
// directories are cached.
func snapshotSource(t *testing.T) *Store {
	a := open(t, t.TempDir())
	openSessions(t, a, "W", "L")
	require.NoError(t, mkdir(a, "/d/sub", true))
	require.NoError(t, createAs(a, "/d/open", "W", true))
	_, err := a.apply(cmdOf(1, &bfspb.AddBlockCmd{Path: "/d/open", SessionId: "W", Block: &bfspb.BlockMeta{WriteSet: []string{"cs1"}}}))
	require.NoError(t, err)
	_, err = lockDir(a, "/d/sub", "L")
	require.NoError(t, err)
	require.NoError(t, member(a, "n1", "r1:1", "c1:1"))
	_, err = a.apply(cmdOf(1, &bfspb.DrainCmd{Addresses: []string{"cs9"}}))
	require.NoError(t, err)
	return a
}

// TestRestoreReplacesTheState: a store restored from a checkpoint holds
// exactly the checkpoint's keys, whatever it held before, has its
// applied index, and keeps in memory what the checkpoint's state says:
// the lock table, the open-file index, the directory cache, the cluster
// id and the members. It goes on applying from the checkpoint's index.
func TestRestoreReplacesTheState(t *testing.T) {
	a := snapshotSource(t)
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	index, err := a.Checkpoint(ckpt)
	require.NoError(t, err)
	require.Equal(t, a.AppliedIndex(), index)
	want := dump(t, a)
	_, err = a.Checkpoint(ckpt)
	require.Error(t, err, "a checkpoint into a directory that exists")
	require.NoError(t, create(a, "/after", false), "the source goes on")

	b := open(t, t.TempDir())
	openSessions(t, b, "X")
	require.NoError(t, mkdir(b, "/x/y/z", true))
	require.NoError(t, mkdir(b, "/d/sub", true))
	require.NoError(t, createAs(b, "/x/f", "X", true))
	for range 20 {
		require.NoError(t, create(b, "/x/y/z/more", true)) // b's applied index passes a's
	}
	_, err = lockDir(b, "/x", "X")
	require.NoError(t, err)
	require.NoError(t, member(b, "n2", "r2:1", "c2:1"))
	for _, p := range []string{"/d/sub", "/x/y/z"} {
		mustStat(t, b, p) // into the directory cache
	}
	require.NotEqual(t, mustStat(t, a, "/d/sub").EntryId, mustStat(t, b, "/d/sub").EntryId)
	require.Greater(t, b.AppliedIndex(), index)

	require.NoError(t, b.Restore(ckpt))
	require.Empty(t, diffState(want, dump(t, b)), "the restored store holds the checkpoint's keys, no more")
	restoring, err := b.Restoring()
	require.NoError(t, err)
	require.False(t, restoring)
	require.Equal(t, index, b.AppliedIndex())
	require.Equal(t, a.ClusterID(), b.ClusterID())
	require.Equal(t, []string{"n1=r1:1,c1:1"}, memberTable(b))
	require.Equal(t, []string{"/d/sub"}, lockPaths(b))
	l, _ := b.Locks().Get("/d/sub")
	require.Equal(t, dirlock.SessionID("L"), l.Session)
	files, err := b.OpenFiles("")
	require.NoError(t, err)
	openID := mustStat(t, a, "/d/open").EntryId
	require.Equal(t, []OpenFile{{Session: "W", EntryID: openID}}, files)
	require.Equal(t, []uint64{openID}, b.open.under(RootID, nil), "the open-file index is the checkpoint's")
	_, err = b.Stat("/x/y/z")
	require.ErrorIs(t, err, ErrNotFound, "a directory cached before the restore")
	require.Equal(t, mustStat(t, a, "/d/sub").EntryId, mustStat(t, b, "/d/sub").EntryId)
	ckptStore := openEmpty(t, ckpt)
	requireSameState(t, ckptStore, b)
	require.NoError(t, ckptStore.Close())

	// It applies on from the checkpoint's index, on the restored state.
	_, err = b.Apply(index, cmdOf(1, &bfspb.MkdirCmd{Path: "/late"}))
	require.ErrorIs(t, err, ErrApplied)
	_, err = lockDir(b, "/x", "X")
	require.ErrorIs(t, err, ErrSessionExpired, "b's own session is gone with its state")
	require.NoError(t, createAs(b, "/d/sub/f", "L", false), "the holder works in its lock")
	require.Equal(t, mustStat(t, a, "/d/sub").EntryId, mustStat(t, b, "/d/sub/f").ParentId)
	require.ErrorIs(t, createAs(b, "/d/sub/g", "W", false), dirlock.ErrLocked, "and nobody else")
	res, err := lockDir(b, "/d", "L")
	require.NoError(t, err)
	require.Equal(t, dirlock.Cleaning, res.Lock.Status, "the grant waits for W's open file")
	require.Equal(t, []uint64{openID}, res.Cleaning.Files)
	res, err = lockDir(a, "/d", "L")
	require.NoError(t, err)
	require.EqualValues(t, res.Lock.Epoch, mustStat(t, b, "/d").Epoch, "the same epoch as the source's grant")
}

// TestRestoreCutShort: a store found with the restoring mark (a crash in
// the middle of a restore) holds a mix of two states: it reports
// Restoring and no applied index, and applies nothing until restored
// again; then it is the checkpoint's.
func TestRestoreCutShort(t *testing.T) {
	a := snapshotSource(t)
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	index, err := a.Checkpoint(ckpt)
	require.NoError(t, err)

	dir := t.TempDir()
	b := open(t, dir)
	require.NoError(t, mkdir(b, "/half", false))
	require.NoError(t, b.db.Set(keyRestoring, nil, pebble.Sync))
	require.NoError(t, b.Close())

	b = openEmpty(t, dir)
	restoring, err := b.Restoring()
	require.NoError(t, err)
	require.True(t, restoring)
	require.Zero(t, b.AppliedIndex())
	require.False(t, b.Formatted())
	for _, index := range []uint64{1, 1000} {
		_, err = b.Apply(index, cmdOf(1, &bfspb.MkdirCmd{Path: "/more"}))
		require.Error(t, err)
		require.True(t, IsStorageError(err), "a store that cannot apply: %v", err)
	}
	_, err = b.Apply(1, cmdOf(1, &bfspb.FormatCmd{ClusterId: "c"}))
	require.Error(t, err, "not even a format")

	require.NoError(t, b.Restore(ckpt))
	restoring, err = b.Restoring()
	require.NoError(t, err)
	require.False(t, restoring)
	require.Equal(t, index, b.AppliedIndex())
	ckptStore := openEmpty(t, ckpt)
	requireSameState(t, ckptStore, b)
	require.NoError(t, mkdir(b, "/more", false))
}
