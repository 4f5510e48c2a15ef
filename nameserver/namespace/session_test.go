package namespace

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// sessionCommands are, for a session id, a command of each kind that
// acts for that session, each of which would apply were the session
// live (on the tree TestSessionGate builds).
func sessionCommands(id string) map[protoreflect.Name]proto.Message {
	return map[protoreflect.Name]proto.Message{
		"mkdir":         &bfspb.MkdirCmd{Path: "/free/new", SessionId: id},
		"create":        &bfspb.CreateCmd{Path: "/free/new-file", SessionId: id},
		"delete_file":   &bfspb.DeleteFileCmd{Path: "/free/f", SessionId: id},
		"delete_dir":    &bfspb.DeleteDirCmd{Path: "/free/d", SessionId: id},
		"rename":        &bfspb.RenameCmd{Src: "/free/f", Dst: "/free/g", SessionId: id},
		"chmod":         &bfspb.ChmodCmd{Path: "/free/f", Mode: 0o600, SessionId: id},
		"add_block":     &bfspb.AddBlockCmd{Path: "/free/open", SessionId: id, Block: &bfspb.BlockMeta{WriteSet: []string{"cs1"}}},
		"sync_block":    &bfspb.SyncBlockCmd{Path: "/free/written", SessionId: id, BlockId: -1, Size: 10}, // BlockId set by the test
		"lock_dir":      &bfspb.LockDirCmd{Path: "/free/d", SessionId: id, Holder: "h"},
		"unlock_dir":    &bfspb.UnlockDirCmd{Path: "/held", SessionId: id},
		"close_session": &bfspb.CloseSessionCmd{SessionId: id},
	}
}

// TestSessionGate: once a session is closed (or if it never was), every
// command that acts for it fails with ErrSessionExpired and changes
// nothing, not even the applied index; the commands that act for nobody
// (a forced unlock, an operator lock, the nameserver's close of a file)
// still apply to what it left behind.
func TestSessionGate(t *testing.T) {
	s := open(t, t.TempDir())
	openSessions(t, s, "S")
	require.NoError(t, mkdir(s, "/free/d", true))
	require.NoError(t, mkdir(s, "/held", false))
	require.NoError(t, create(s, "/free/f", false))
	require.NoError(t, createAs(s, "/free/open", "S", true))
	require.NoError(t, createAs(s, "/free/written", "S", true))
	res, err := s.apply(cmdOf(1, &bfspb.AddBlockCmd{Path: "/free/written", SessionId: "S", Block: &bfspb.BlockMeta{WriteSet: []string{"cs1"}}}))
	require.NoError(t, err)
	block := res.Info.Blocks[0].Id
	_, err = lockDir(s, "/held", "S")
	require.NoError(t, err)

	// Each would apply for a live session: try them on a copy.
	live := s.checkpointCopy(t)
	for name, op := range sessionCommands("S") {
		if c, ok := op.(*bfspb.SyncBlockCmd); ok {
			c.BlockId = block
		}
		_, err := live.apply(cmdOf(2, op))
		require.NoError(t, err, "%s for a live session", name)
		live = s.checkpointCopy(t)
	}

	require.NoError(t, closeSession(s, "S"))
	for _, id := range []string{"S", "never-opened"} {
		before, applied := dump(t, s), s.AppliedIndex()
		for name, op := range sessionCommands(id) {
			if c, ok := op.(*bfspb.SyncBlockCmd); ok {
				c.BlockId = block
			}
			_, err := s.apply(cmdOf(2, op))
			require.ErrorIs(t, err, ErrSessionExpired, "%s for session %s", name, id)
			require.False(t, IsStorageError(err))
		}
		require.Equal(t, applied, s.AppliedIndex())
		require.Empty(t, diffState(before, dump(t, s)), "a command for an ended session changed the state")
	}

	// What acts for nobody still applies.
	res, err = s.apply(cmdOf(6, &bfspb.UnlockDirCmd{Path: "/held", SessionId: "S", Force: true}))
	require.NoError(t, err, "a forced unlock names the session it ends, live or not")
	require.Equal(t, dirlock.Unlocked, res.Lock.Status)
	require.NoError(t, lockOperator(s, "/held"))
	_, err = s.apply(cmdOf(8, &bfspb.CloseFileCmd{Path: "/free/open", EntryId: mustStat(t, s, "/free/open").EntryId}))
	require.NoError(t, err, "the nameserver closes the files of an ended session")
}

// TestEverySessionCommandIsGated: every kind of command whose
// description names a session is in sessionCommands, so TestSessionGate
// tries it. A new command acting for a session fails here until it is.
func TestEverySessionCommandIsGated(t *testing.T) {
	tried := sessionCommands("x")
	fields := opOneof.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		cmd := &bfspb.Command{}
		m := cmd.ProtoReflect()
		msg := m.NewField(fd).Message()
		if sf := msg.Descriptor().Fields().ByName("session_id"); sf != nil {
			msg.Set(sf, protoreflect.ValueOfString("x"))
		}
		m.Set(fd, protoreflect.ValueOfMessage(msg))
		o, err := bind(cmd)
		require.NoError(t, err)
		if o.session() != "" {
			require.Contains(t, tried, fd.Name(), "%s acts for a session", fd.Name())
			delete(tried, fd.Name())
		}
	}
	require.Empty(t, tried, "listed as acting for a session, but their descriptions name none")
}

// checkpointCopy returns a store holding what s holds now.
func (s *Store) checkpointCopy(t *testing.T) *Store {
	t.Helper()
	dir := t.TempDir() + "/ckpt"
	_, err := s.Checkpoint(dir)
	require.NoError(t, err)
	c, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSessionRecord: the record of a session, with its owner, reads back
// as stored while the session lives, and not once it is closed; a record
// stored without an owner (before owners were recorded) reads back
// without one.
func TestSessionRecord(t *testing.T) {
	s := open(t, t.TempDir())
	rec := &bfspb.SessionRecord{SessionId: "S", Holder: "h", TtlMs: 1000, OpenedNs: 7, Owner: "client/tablet"}
	_, err := s.apply(cmdOf(1, &bfspb.OpenSessionCmd{Session: rec}))
	require.NoError(t, err)
	openSessions(t, s, "old")
	got, err := s.Session("S")
	require.NoError(t, err)
	require.True(t, proto.Equal(rec, got), "%v", got)
	got, err = s.Session("old")
	require.NoError(t, err)
	require.Empty(t, got.Owner)
	_, err = s.Session("never-opened")
	require.ErrorIs(t, err, ErrSessionExpired)
	require.NoError(t, closeSession(s, "S"))
	_, err = s.Session("S")
	require.ErrorIs(t, err, ErrSessionExpired)
}
