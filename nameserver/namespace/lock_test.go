package namespace

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

func lockDir(s *Store, path, session string) (*Result, error) {
	return s.Apply(&bfspb.Command{TimeNs: 5, Op: &bfspb.Command_LockDir{LockDir: &bfspb.LockDirCmd{
		Path: path, SessionId: session, Holder: "h-" + session, Epoch: s.AllocEpoch()}}})
}

func unlockDir(s *Store, path, session string, force bool) (*Result, error) {
	return s.Apply(&bfspb.Command{TimeNs: 6, Op: &bfspb.Command_UnlockDir{UnlockDir: &bfspb.UnlockDirCmd{
		Path: path, SessionId: session, Force: force, Reason: "holder"}}})
}

func createAs(s *Store, path, session string, open bool) error {
	_, err := s.Apply(&bfspb.Command{TimeNs: 1, Op: &bfspb.Command_Create{Create: &bfspb.CreateCmd{
		Path: path, Id: s.AllocIDs(1)[0], SessionId: session, OpenForWrite: open}}})
	return err
}

func TestLockGatesMutations(t *testing.T) {
	s := open(t, t.TempDir())
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
	_, err = s.Apply(&bfspb.Command{Op: &bfspb.Command_Chmod{Chmod: &bfspb.ChmodCmd{Path: "/tera/t1", Mode: 0o700}}})
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
	require.NoError(t, mkdir(s, "/t/lg0", true))
	_, err = lockDir(s, "/t", "A")
	require.NoError(t, err)
	_, err = lockDir(s, "/t/lg0", "A")
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
	require.Greater(t, s.AllocEpoch(), epoch+1, "epochs never go back after a restart")

	_, err = s.Apply(&bfspb.Command{TimeNs: 9, Op: &bfspb.Command_FinishCleaning{FinishCleaning: &bfspb.FinishCleaningCmd{
		Path: "/t", EntryId: cl[0].Dir.EntryId, Epoch: epoch + 100}}})
	require.ErrorIs(t, err, dirlock.ErrStaleEpoch)
	res, err = s.Apply(&bfspb.Command{TimeNs: 9, Op: &bfspb.Command_FinishCleaning{FinishCleaning: &bfspb.FinishCleaningCmd{
		Path: "/t", EntryId: cl[0].Dir.EntryId, Epoch: epoch, BytesTruncated: 7}}})
	require.NoError(t, err)
	require.Equal(t, dirlock.Unlocked, res.Lock.Status)
	require.Empty(t, s.Locks().List("/", false, 0))
	cl, err = s.Cleanings()
	require.NoError(t, err)
	require.Empty(t, cl)
	hist, err := s.History("/t")
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.EqualValues(t, 2, hist[0].FilesSealed)
	require.EqualValues(t, 7, hist[0].BytesTruncated)
}

func TestHolderRenamesAndDeletesInsideItsLock(t *testing.T) {
	s := open(t, t.TempDir())
	require.NoError(t, mkdir(s, "/t/a/b", true))
	_, err := lockDir(s, "/t", "A")
	require.NoError(t, err)
	_, err = lockDir(s, "/t/a/b", "A")
	require.NoError(t, err)
	_, err = s.Apply(&bfspb.Command{Op: &bfspb.Command_Rename{Rename: &bfspb.RenameCmd{Src: "/t/a", Dst: "/t/z", SessionId: "A"}}})
	require.NoError(t, err)
	_, ok := s.Locks().Get("/t/z/b")
	require.True(t, ok, "the nested lock moved with its directory")
	_, err = s.Apply(&bfspb.Command{Op: &bfspb.Command_DeleteDir{DeleteDir: &bfspb.DeleteDirCmd{Path: "/t/z", Recursive: true, SessionId: "A"}}})
	require.NoError(t, err)
	_, ok = s.Locks().Get("/t/z/b")
	require.False(t, ok)
	require.Len(t, s.Locks().List("/", false, 0), 1)
}

func TestHistoryIsBounded(t *testing.T) {
	s := open(t, t.TempDir())
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
