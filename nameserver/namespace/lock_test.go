package namespace

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

func TestLockGatesMutations(t *testing.T) {
	s := open(t, t.TempDir())
	openSessions(t, s, "A", "B")
	require.NoError(t, mkdir(s, "/tera/t1/lg0", true))
	res, err := lockDir(s, "/tera/t1", "A")
	require.NoError(t, err)
	require.Equal(t, dirlock.Locked, res.Lock.Status)
	first := res.Lock.Epoch
	again, err := lockDir(s, "/tera/t1", "A")
	require.NoError(t, err)
	require.Equal(t, first, again.Lock.Epoch, "a retried lock keeps its epoch")
	_, err = lockDir(s, "/tera/t1", "B")
	require.ErrorIs(t, err, dirlock.ErrLocked)
	_, err = lockDir(s, "/tera", "B")
	require.ErrorIs(t, err, dirlock.ErrLocked, "a lock over another session's is refused")

	require.NoError(t, createAs(s, "/tera/t1/f", "A", false))
	require.ErrorIs(t, createAs(s, "/tera/t1/g", "B", false), dirlock.ErrLocked)
	require.ErrorIs(t, createAs(s, "/tera/t1/lg0/g", "", false), dirlock.ErrLocked)
	require.NoError(t, createAs(s, "/tera/other", "B", false), "outside the subtree is free")
	require.ErrorIs(t, rmdir(s, "/tera", true), dirlock.ErrLocked, "recursive delete above a lock")
	require.ErrorIs(t, rename(s, "/tera/t1/f", "/tera/moved"), dirlock.ErrLocked, "rename out of a locked subtree")
	require.ErrorIs(t, rename(s, "/tera/other", "/tera/t1/x"), dirlock.ErrLocked, "rename into a locked subtree")
	_, err = s.apply(cmdOf(1, &bfspb.ChmodCmd{Path: "/tera/t1", Mode: 0o700}))
	require.ErrorIs(t, err, dirlock.ErrLocked)

	info, err := s.Stat("/tera/t1")
	require.NoError(t, err)
	require.Equal(t, bfspb.LockStatus_LOCK_STATUS_LOCKED, info.LockStatus)
	require.Equal(t, "h-A", info.Holder)

	_, err = unlockDir(s, "/tera/t1", "B", false)
	require.ErrorIs(t, err, dirlock.ErrLocked, "only the holder unlocks without force")
	res, err = unlockDir(s, "/tera/t1", "B", true)
	require.NoError(t, err)
	require.Equal(t, dirlock.Unlocked, res.Lock.Status, "nothing open: unlocked at once")
	require.NoError(t, createAs(s, "/tera/t1/g", "B", false))
	_, err = unlockDir(s, "/tera/t1", "B", true)
	require.ErrorIs(t, err, dirlock.ErrUnlocked)

	hist, err := s.History("/tera/t1")
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.Equal(t, first, dirlock.Epoch(hist[0].Epoch))
}

func TestCleaningRecordsOpenFilesAndSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, format(s))
	openSessions(t, s, "A")
	require.NoError(t, mkdir(s, "/t/lg0", true))
	_, err = lockDir(s, "/t", "A")
	require.NoError(t, err)
	nested, err := lockDir(s, "/t/lg0", "A")
	require.NoError(t, err)
	require.NoError(t, createAs(s, "/t/lg0/open1", "A", true))
	require.NoError(t, createAs(s, "/t/open2", "A", true))
	require.NoError(t, createAs(s, "/t/closed", "A", false))
	require.NoError(t, createAs(s, "/elsewhere", "A", true))

	res, err := unlockDir(s, "/t", "M", true)
	require.NoError(t, err)
	require.Equal(t, dirlock.Cleaning, res.Lock.Status)
	require.Len(t, res.Cleaning.Files, 2)
	require.Len(t, res.Cleaning.Dirs, 2, "the nested lock is cleaned with its parent")
	require.ErrorIs(t, createAs(s, "/t/new", "A", false), dirlock.ErrCleaning, "even the holder waits while cleaning")
	l, ok := s.Locks().Get("/t/lg0")
	require.True(t, ok)
	require.Equal(t, dirlock.Cleaning, l.Status)
	epoch := uint64(res.Lock.Epoch)
	require.NoError(t, s.Close())

	// After a restart the lock table and the cleaning come back.
	s = open(t, dir)
	l, ok = s.Locks().Get("/t")
	require.True(t, ok)
	require.Equal(t, dirlock.Cleaning, l.Status)
	cl, err := s.Cleanings()
	require.NoError(t, err)
	require.Len(t, cl, 1)
	require.Equal(t, "/t", cl[0].Path)
	require.Len(t, cl[0].Record.Files, 2)
	require.NoError(t, mkdir(s, "/other", false))
	next, err := lockDir(s, "/other", "A")
	require.NoError(t, err)
	require.Greater(t, next.Lock.Epoch, nested.Lock.Epoch, "epochs never go back after a restart")

	_, err = s.apply(cmdOf(9, &bfspb.FinishCleaningCmd{Path: "/t", EntryId: cl[0].Dir.EntryId, Epoch: epoch + 100}))
	require.ErrorIs(t, err, dirlock.ErrStaleEpoch)
	res, err = s.apply(cmdOf(9, &bfspb.FinishCleaningCmd{Path: "/t", EntryId: cl[0].Dir.EntryId, Epoch: epoch, BytesTruncated: 7}))
	require.NoError(t, err)
	require.Equal(t, dirlock.Unlocked, res.Lock.Status)
	require.Equal(t, []string{"/other"}, lockPaths(s))
	cl, err = s.Cleanings()
	require.NoError(t, err)
	require.Empty(t, cl)
	hist, err := s.History("/t")
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.EqualValues(t, 2, hist[0].FilesSealed)
	require.EqualValues(t, 7, hist[0].BytesTruncated)
}

// TestHolderRenamesAndDeletesInsideItsLock: the holder renames and
// deletes freely inside its lock, but no lock moves: a locked directory,
// or one above a lock, cannot be renamed, not even by the holder (the
// lock is known everywhere by its path). The holder may delete a locked
// directory; its locks end with it, and the result says which ended.
func TestHolderRenamesAndDeletesInsideItsLock(t *testing.T) {
	s := open(t, t.TempDir())
	openSessions(t, s, "A")
	require.NoError(t, mkdir(s, "/t/a/b", true))
	require.NoError(t, mkdir(s, "/t/c", false))
	_, err := lockDir(s, "/t", "A")
	require.NoError(t, err)
	_, err = lockDir(s, "/t/a/b", "A")
	require.NoError(t, err)
	require.NoError(t, renameAs(s, "/t/c", "/t/d", "A"), "an unlocked directory inside the lock moves")
	require.NoError(t, createAs(s, "/t/a/b/f", "A", false))
	require.NoError(t, renameAs(s, "/t/a/b/f", "/t/a/b/g", "A"), "a file inside a nested lock moves")
	for _, src := range []string{"/t/a", "/t/a/b", "/t"} {
		err := renameAs(s, src, "/t/z", "A")
		require.ErrorIs(t, err, dirlock.ErrLocked, "rename %s", src)
		var le *dirlock.LockedError
		require.ErrorAs(t, err, &le)
		require.True(t, le.Move, "rename %s", src)
	}
	_, ok := s.Locks().Get("/t/a/b")
	require.True(t, ok, "the nested lock stayed where it was")

	res, err := s.apply(cmdOf(1, &bfspb.DeleteDirCmd{Path: "/t/a", Recursive: true, SessionId: "A"}))
	require.NoError(t, err)
	_, ok = s.Locks().Get("/t/a/b")
	require.False(t, ok)
	require.Equal(t, []string{"/t/a/b"}, res.RemovedLocks)
	require.Len(t, res.SetLocks, 1, "the lock the delete ended, as it was")
	require.Equal(t, dirlock.SessionID("A"), res.SetLocks[0].Session)
	require.NotZero(t, res.SetLocks[0].Epoch)
	require.Len(t, s.Locks().List("/", false, 0), 1)
}

func TestHistoryIsBounded(t *testing.T) {
	s := open(t, t.TempDir())
	openSessions(t, s, "A")
	require.NoError(t, mkdir(s, "/d", false))
	for range MaxHistory + 10 {
		_, err := lockDir(s, "/d", "A")
		require.NoError(t, err)
		_, err = unlockDir(s, "/d", "A", false)
		require.NoError(t, err)
	}
	hist, err := s.History("/d")
	require.NoError(t, err)
	require.Len(t, hist, MaxHistory)
	for i := 1; i < len(hist); i++ {
		require.Greater(t, hist[i].Epoch, hist[i-1].Epoch)
	}
}

// TestParentUnlockTakesOverNestedCleaning: a tablet server unlocks its
// locality group (CLEANING, a file still open in it), then the master
// force-unlocks the tablet above. The tablet's cleaning takes the
// group's over: it waits for the group's file too, and the group's own
// record is gone, so the group's coordinator finishing late changes
// nothing, above all not a newer lock of the group.
func TestParentUnlockTakesOverNestedCleaning(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	openSessions(t, s, "S", "T")
	require.NoError(t, mkdir(s, "/a/b", true))
	a, err := lockDir(s, "/a", "S")
	require.NoError(t, err)
	b, err := lockDir(s, "/a/b", "S")
	require.NoError(t, err)
	require.NoError(t, createAs(s, "/a/b/f", "S", true))
	res, err := unlockDir(s, "/a/b", "S", false)
	require.NoError(t, err)
	require.Equal(t, dirlock.Cleaning, res.Lock.Status)
	f := res.Cleaning.Files

	res, err = s.apply(cmdOf(6, &bfspb.UnlockDirCmd{Path: "/a", Force: true, Epoch: uint64(a.Lock.Epoch), Reason: "force"}))
	require.NoError(t, err)
	require.Equal(t, dirlock.Cleaning, res.Lock.Status)
	require.Equal(t, f, res.Cleaning.Files, "the tablet's cleaning waits for the group's file")
	cl, err := s.Cleanings()
	require.NoError(t, err)
	require.Len(t, cl, 1, "one cleaning for the subtree")
	require.Equal(t, "/a", cl[0].Path)

	// The group's coordinator finishes: nothing is left for it to do.
	res, err = finishCleaningOf(s, "/a/b", uint64(b.Lock.Epoch))
	require.NoError(t, err)
	require.Empty(t, res.RemovedLocks)
	l, ok := s.Locks().Get("/a/b")
	require.True(t, ok)
	require.Equal(t, dirlock.Cleaning, l.Status, "the group is cleaning until the tablet's cleaning ends")

	// The coordinator closes the file, then finishes.
	_, err = apply1(t, s, &bfspb.CloseFileCmd{Path: "/a/b/f", EntryId: f[0]})
	require.NoError(t, err)
	_, err = finishCleaningOf(s, "/a", uint64(a.Lock.Epoch))
	require.NoError(t, err)
	require.Empty(t, s.Locks().List("/", false, 0))
	t2, err := lockDir(s, "/a/b", "T")
	require.NoError(t, err)
	res, err = finishCleaningOf(s, "/a/b", uint64(b.Lock.Epoch))
	require.NoError(t, err)
	require.Empty(t, res.RemovedLocks)
	l, ok = s.Locks().Get("/a/b")
	require.True(t, ok)
	require.Equal(t, dirlock.Locked, l.Status, "a late finish of an old cleaning released a newer lock")
	require.Equal(t, t2.Lock.Epoch, l.Epoch)

	// And nothing of the old cleaning comes back after a restart.
	require.NoError(t, s.Close())
	s = open(t, dir)
	cl, err = s.Cleanings()
	require.NoError(t, err)
	require.Empty(t, cl)
	l, ok = s.Locks().Get("/a/b")
	require.True(t, ok)
	require.Equal(t, dirlock.Locked, l.Status)
}

// TestCleaningRecordOfAMissingDirectoryIsIgnored: a cleaning record whose
// directory is gone (it cannot happen through Apply) is skipped at
// startup rather than keeping the namespace from opening.
func TestCleaningRecordOfAMissingDirectoryIsIgnored(t *testing.T) {
	s := open(t, t.TempDir())
	v, err := proto.Marshal(&bfspb.CleaningRecord{Epoch: 3})
	require.NoError(t, err)
	require.NoError(t, s.db.Set(cleanKey(12345), v, pebble.Sync))
	cl, err := s.Cleanings()
	require.NoError(t, err)
	require.Empty(t, cl)
}
