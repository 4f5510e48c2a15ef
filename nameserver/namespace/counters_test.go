package namespace

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Ids and epochs come from counters stored in the state and taken in the
// batch of the command that uses them (SPEC §3, §6 I2): what a command
// that fails, is refused or is a retry does takes nothing, so one log
// gives the same ids and epochs wherever it is applied.

// storedCounters reads the counters as stored (not as kept in memory).
func storedCounters(t *testing.T, s *Store) counters {
	t.Helper()
	id, err := s.getUint64(keyNextID)
	require.NoError(t, err)
	epoch, err := s.getUint64(keyEpoch)
	require.NoError(t, err)
	return counters{lastID: id, lastEpoch: epoch}
}

// TestEpochsTakenOnlyByGrants: a grant takes the next epoch, in its own
// batch; a retried grant keeps its epoch, and a refused one, a lock of a
// missing directory or one for an ended session takes none. The
// cleaning before a grant takes one (it is the epoch of that cleaning).
// Epochs go on from the stored counter after a restart, and the store
// reports the grants (OnLockChange) in the order their epochs grow.
func TestEpochsTakenOnlyByGrants(t *testing.T) {
	dir := t.TempDir()
	var reported []dirlock.Epoch
	onLock := func(cmd *bfspb.Command, res *Result) {
		if cmd.GetLockDir() != nil {
			for _, l := range res.SetLocks {
				reported = append(reported, l.Epoch)
			}
		}
	}
	s := openWith(t, Options{Dir: dir, OnLockChange: onLock})
	openSessions(t, s, "A", "B", "gone")
	require.NoError(t, closeSession(s, "gone"))
	require.NoError(t, mkdir(s, "/t/sub", true))
	require.NoError(t, mkdir(s, "/u", false))
	epoch := func(res *Result, err error) dirlock.Epoch {
		t.Helper()
		require.NoError(t, err)
		return res.Lock.Epoch
	}
	refused := func(want error) func(*Result, error) {
		return func(_ *Result, err error) {
			t.Helper()
			require.ErrorIs(t, err, want)
		}
	}

	e1 := epoch(lockDir(s, "/t", "A"))
	require.EqualValues(t, 1, e1, "the first grant")
	require.Equal(t, e1, epoch(lockDir(s, "/t", "A")), "a retried grant keeps its epoch")
	refused(dirlock.ErrLocked)(lockDir(s, "/t", "B"))
	refused(dirlock.ErrLocked)(lockDir(s, "/t/sub", "B"))
	refused(dirlock.ErrLocked)(lockDir(s, "/", "B"))
	refused(ErrNotFound)(lockDir(s, "/nope", "B"))
	refused(ErrSessionExpired)(lockDir(s, "/u", "gone"))
	require.Equal(t, counters{lastID: s.counters.lastID, lastEpoch: 1}, storedCounters(t, s), "nothing refused took an epoch")

	e2 := epoch(lockDir(s, "/u", "B"))
	require.Equal(t, e1+1, e2, "the next grant takes the next epoch")
	// An operator lock is a grant like any other.
	res, err := s.apply(cmdOf(5, &bfspb.LockDirCmd{Path: "/t/sub", Holder: "ops", Operator: true}))
	refused(dirlock.ErrLocked)(res, err)
	_, err = unlockDir(s, "/u", "B", false)
	require.NoError(t, err)
	require.NoError(t, lockOperator(s, "/u"))
	e3, ok := s.Locks().Get("/u")
	require.True(t, ok)
	require.Equal(t, e2+1, e3.Epoch)

	// A grant that must first clean another session's open file: the
	// cleaning takes the epoch, and the grant after it the next.
	require.NoError(t, mkdir(s, "/w", false))
	require.NoError(t, createAs(s, "/w/f", "B", true))
	res, err = lockDir(s, "/w", "A")
	require.NoError(t, err)
	require.Equal(t, dirlock.Cleaning, res.Lock.Status)
	require.Equal(t, e3.Epoch+1, res.Lock.Epoch)
	refused(dirlock.ErrCleaning)(lockDir(s, "/w", "A"))
	_, err = s.apply(cmdOf(8, &bfspb.CloseFileCmd{Path: "/w/f", EntryId: mustStat(t, s, "/w/f").EntryId}))
	require.NoError(t, err)
	_, err = finishCleaningOf(s, "/w", uint64(res.Lock.Epoch))
	require.NoError(t, err)
	e5 := epoch(lockDir(s, "/w", "A"))
	require.Equal(t, res.Lock.Epoch+1, e5)
	require.Equal(t, uint64(e5), storedCounters(t, s).lastEpoch)
	require.NoError(t, s.Close())

	s = openWith(t, Options{Dir: dir, OnLockChange: onLock})
	require.Equal(t, uint64(e5), s.counters.lastEpoch)
	require.Equal(t, e5, epoch(lockDir(s, "/w", "A")), "a retry after a restart keeps its epoch")
	_, err = s.apply(cmdOf(6, &bfspb.UnlockDirCmd{Path: "/t", Force: true, Reason: "force"}))
	require.NoError(t, err)
	require.Equal(t, e5+1, epoch(lockDir(s, "/t", "B")), "epochs go on after a restart")
	require.Equal(t, []dirlock.Epoch{1, 2, 3, 4, 5, 6}, reported, "every grant, in the order of its epoch")
}

// TestEpochsReplayTheSame replays one log, with refused and retried
// grants, on a second store that restarts halfway, right after a refused
// grant (as a replica catching up would): every grant gets the same
// epoch on both, and they end byte-identical. An epoch taken from
// memory, which what was refused had advanced, gives the grants after
// the restart other epochs.
func TestEpochsReplayTheSame(t *testing.T) {
	var log cmdLog
	live := openEmpty(t, t.TempDir())
	var want []dirlock.Epoch
	restartAfter := uint64(0)
	for _, op := range []proto.Message{
		&bfspb.FormatCmd{ClusterId: "c"},
		&bfspb.OpenSessionCmd{Session: &bfspb.SessionRecord{SessionId: "A"}},
		&bfspb.OpenSessionCmd{Session: &bfspb.SessionRecord{SessionId: "B"}},
		&bfspb.MkdirCmd{Path: "/t/sub", Parents: true},
		&bfspb.LockDirCmd{Path: "/t", SessionId: "A", Holder: "a"},
		&bfspb.LockDirCmd{Path: "/t", SessionId: "A", Holder: "a"},     // a retry
		&bfspb.LockDirCmd{Path: "/t", SessionId: "B", Holder: "b"},     // refused: LOCKED
		&bfspb.LockDirCmd{Path: "/t/sub", SessionId: "B", Holder: "b"}, // refused: under A's lock
		nil, // the replica restarts here
		&bfspb.UnlockDirCmd{Path: "/t", SessionId: "A"},
		&bfspb.LockDirCmd{Path: "/t", SessionId: "B", Holder: "b"},
		&bfspb.LockDirCmd{Path: "/t/sub", SessionId: "B", Holder: "b"},
		&bfspb.LockDirCmd{Path: "/t/sub", SessionId: "A", Holder: "a"}, // refused
		&bfspb.UnlockDirCmd{Path: "/t", Force: true},
		&bfspb.LockDirCmd{Path: "/t", SessionId: "A", Holder: "a"},
	} {
		if op == nil {
			restartAfter = log.entries[len(log.entries)-1].index
			continue
		}
		res, err := log.apply(live, cmdOf(1, op))
		if _, isLock := op.(*bfspb.LockDirCmd); isLock && err == nil {
			want = append(want, res.Lock.Epoch)
		}
	}
	require.Equal(t, []dirlock.Epoch{1, 1, 2, 3, 4}, want)

	dir := t.TempDir()
	replica := openEmpty(t, dir)
	var got []dirlock.Epoch
	for _, e := range log.entries {
		if e.index == restartAfter+1 {
			require.NoError(t, replica.Close())
			replica = openEmpty(t, dir)
		}
		res, err := replica.Apply(e.index, proto.Clone(e.cmd).(*bfspb.Command))
		require.Equal(t, e.outcome, outcome(err), "entry %d", e.index)
		if err == nil && e.cmd.GetLockDir() != nil {
			got = append(got, res.Lock.Epoch)
		}
	}
	require.Equal(t, want, got, "the epochs of the grants on the replica")
	requireSameState(t, live, replica)
}

// TestIDsTakenOnlyByCommandsThatApply: entry and block ids are taken in
// the batch of the command that uses them: a create, mkdir or AddBlock
// that fails takes none, so the next one that applies gets the next id;
// a mkdir -p takes one per directory it makes, outermost first; an
// overwrite is a new entry with a new id; a retried AddBlock takes none.
func TestIDsTakenOnlyByCommandsThatApply(t *testing.T) {
	s := open(t, t.TempDir())
	openSessions(t, s, "A", "B", "gone")
	require.NoError(t, closeSession(s, "gone"))
	id := func(op proto.Message) uint64 {
		t.Helper()
		res, err := s.apply(cmdOf(1, op))
		require.NoError(t, err)
		return res.Info.EntryId
	}
	require.Equal(t, firstID, id(&bfspb.MkdirCmd{Path: "/a"}), "the first id after the root's")
	require.Equal(t, firstID+1, id(&bfspb.CreateCmd{Path: "/a/f", SessionId: "A", OpenForWrite: true}))
	require.NoError(t, mkdir(s, "/l", false))
	_, err := lockDir(s, "/l", "A")
	require.NoError(t, err)
	last := firstID + 2
	require.Equal(t, last, s.counters.lastID)

	for _, tc := range []struct {
		op   proto.Message
		want error
	}{
		{&bfspb.CreateCmd{Path: "/a/f"}, ErrExists},
		{&bfspb.CreateCmd{Path: "/nope/f"}, ErrNotFound},
		{&bfspb.CreateCmd{Path: "/a/f/g"}, ErrNotDirectory},
		{&bfspb.CreateCmd{Path: "/a/x", Replication: 99}, ErrInvalid},
		{&bfspb.CreateCmd{Path: "/a/x", SessionId: "gone"}, ErrSessionExpired},
		{&bfspb.CreateCmd{Path: "/l/x", SessionId: "B"}, dirlock.ErrLocked},
		{&bfspb.MkdirCmd{Path: "/a"}, ErrExists},
		{&bfspb.MkdirCmd{Path: "/a/f/x/y", Parents: true}, ErrNotDirectory},
		{&bfspb.MkdirCmd{Path: "/l/x/y", Parents: true, SessionId: "B"}, dirlock.ErrLocked},
		{&bfspb.AddBlockCmd{Path: "/a/f", SessionId: "B", Block: &bfspb.BlockMeta{WriteSet: []string{"cs1"}}}, ErrNotOpen},
		{&bfspb.AddBlockCmd{Path: "/a/f", SessionId: "A", Block: &bfspb.BlockMeta{Id: 99, WriteSet: []string{"cs1"}}}, ErrInvalid},
	} {
		_, err := s.apply(cmdOf(1, tc.op))
		require.ErrorIs(t, err, tc.want, "%v", tc.op)
		require.Equal(t, last, s.counters.lastID, "%v took an id", tc.op)
	}
	require.Equal(t, last, storedCounters(t, s).lastID)

	require.Equal(t, last+1, id(&bfspb.CreateCmd{Path: "/a/g"}), "the next id after the failures")
	leaf := id(&bfspb.MkdirCmd{Path: "/p/q/r", Parents: true})
	require.Equal(t, last+4, leaf)
	require.Equal(t, []uint64{last + 2, last + 3, last + 4},
		[]uint64{mustStat(t, s, "/p").EntryId, mustStat(t, s, "/p/q").EntryId, mustStat(t, s, "/p/q/r").EntryId}, "outermost first")
	res, err := s.apply(cmdOf(1, &bfspb.AddBlockCmd{Path: "/a/f", SessionId: "A", Block: &bfspb.BlockMeta{WriteSet: []string{"cs1"}}}))
	require.NoError(t, err)
	require.Equal(t, int64(last+5), res.Info.Blocks[0].Id, "a block's id comes from the same counter")
	res, err = s.apply(cmdOf(1, &bfspb.AddBlockCmd{Path: "/a/f", SessionId: "A", Block: &bfspb.BlockMeta{WriteSet: []string{"cs2"}}}))
	require.NoError(t, err)
	require.Equal(t, int64(last+5), res.Info.Blocks[0].Id, "a retried AddBlock")
	require.Equal(t, last+6, id(&bfspb.CreateCmd{Path: "/a/g", Overwrite: true}), "an overwrite is a new entry")
	require.Equal(t, counters{lastID: last + 6, lastEpoch: 1}, storedCounters(t, s))
	require.Equal(t, storedCounters(t, s), s.counters)
}
