package namespace

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// ungated are the commands that pass no lock check, each for the reason
// its description gives. Anything else a Command can carry mutates the
// file tree for a client and must be gated.
var ungated = map[protoreflect.Name]bool{
	"open_session":    true,
	"close_session":   true,
	"close_file":      true,
	"lock_dir":        true,
	"unlock_dir":      true,
	"finish_cleaning": true,
	"drain":           true,
	"format":          true,
	"member":          true,
	"chunkserver":     true,
	"block_key":       true,
}

// TestEveryCommandIsDescribed lists every op a bfspb.Command can carry
// and fails if one has no description, no apply step or no gate, or is
// ungated without being one of the commands documented as such: adding
// a command to the protocol and forgetting its lock check fails here.
func TestEveryCommandIsDescribed(t *testing.T) {
	fields := opOneof.Fields()
	require.NotZero(t, fields.Len())
	ops := make(map[protoreflect.FullName]bool)
	for i := range fields.Len() {
		fd := fields.Get(i)
		ops[fd.Message().FullName()] = true
		d := commands[fd.Message().FullName()]
		if d == nil {
			t.Errorf("command %s (%s) has no description", fd.Name(), fd.Message().FullName())
			continue
		}
		switch {
		case d.apply == nil:
			t.Errorf("command %s has no apply step", fd.Name())
		case d.gate == gateUnset:
			t.Errorf("command %s has no gate", fd.Name())
		case d.gate == GateNone && !ungated[fd.Name()]:
			t.Errorf("command %s passes no lock check; only %v may", fd.Name(), ungated)
		case d.gate == GateNone && d.ungated == "":
			t.Errorf("command %s passes no lock check and does not say why", fd.Name())
		case d.gate != GateNone && d.ungated != "":
			t.Errorf("command %s is gated but says why it is not", fd.Name())
		}

		// The command binds to its description, and its gate takes the
		// paths it names.
		cmd := &bfspb.Command{}
		m := cmd.ProtoReflect()
		m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
		o, err := bind(cmd)
		require.NoError(t, err, "bind %s", fd.Name())
		require.Same(t, d, o.d)
		paths := o.paths()
		for j := range paths {
			paths[j] = "/x"
		}
		require.NoError(t, d.gate.check(dirlock.NewTable(), paths, "s", nil), "gate %v of %s over %d paths", d.gate, fd.Name(), len(paths))
	}
	require.Len(t, ops, fields.Len(), "two ops carry the same message: the table cannot tell them apart")
	for name := range commands {
		require.True(t, ops[name], "%s is described but no op of a Command carries it", name)
	}
}

func TestCommandsWithoutDescriptionOrGateAreRefused(t *testing.T) {
	s := open(t, t.TempDir())
	_, err := s.apply(&bfspb.Command{})
	require.ErrorIs(t, err, ErrInvalid, "an empty command")
	_, err = s.apply(&bfspb.Command{Op: &bfspb.Command_OpenSession{}})
	require.ErrorIs(t, err, ErrInvalid, "an op without its message")
	require.ErrorIs(t, gateUnset.check(dirlock.NewTable(), []string{"/x"}, "s", nil), ErrInvalid)
	require.ErrorIs(t, GateMove.check(dirlock.NewTable(), []string{"/x"}, "s", nil), ErrInvalid, "a move names two paths")
}

// TestGate: the gate the nameserver runs for requests that are not one
// command (FinishFile) is the commands' own: the fences first, then the
// locks, over normalized paths only.
func TestGate(t *testing.T) {
	s := open(t, t.TempDir())
	openSessions(t, s, "A")
	require.NoError(t, mkdir(s, "/t/d", true))
	res, err := lockDir(s, "/t", "A")
	require.NoError(t, err)
	epoch := uint64(res.Lock.Epoch)
	fence := []*bfspb.Fence{{Path: "/t", Epoch: epoch}}

	require.NoError(t, s.Gate(GateTarget, []string{"/t/d/f"}, "A", fence))
	require.NoError(t, s.Gate(GateTarget, []string{"/elsewhere"}, "B", nil))
	require.ErrorIs(t, s.Gate(GateTarget, []string{"/t/d/f"}, "B", nil), dirlock.ErrLocked)
	require.ErrorIs(t, s.Gate(GateTarget, []string{"/t/d/f"}, "A", []*bfspb.Fence{{Path: "/t", Epoch: epoch + 1}}), dirlock.ErrStaleEpoch)
	require.ErrorIs(t, s.Gate(GateSubtree, []string{"/"}, "B", nil), dirlock.ErrLocked)
	require.NoError(t, s.Gate(GateMove, []string{"/t/d", "/u"}, "A", nil), "the holder moves out of its lock")
	require.ErrorIs(t, s.Gate(GateMove, []string{"/t", "/u"}, "A", nil), dirlock.ErrLocked, "a lock never moves")
	require.ErrorIs(t, s.Gate(GateTarget, []string{"/t//d"}, "A", nil), ErrInvalid)
	require.ErrorIs(t, s.Gate(GateTarget, []string{"/t/d"}, "A", []*bfspb.Fence{{Path: "/t"}}), ErrInvalid, "a fence without an epoch")

	_, err = unlockDir(s, "/t", "", true)
	require.NoError(t, err)
	require.ErrorIs(t, s.Gate(GateTarget, []string{"/t/d/f"}, "A", fence), dirlock.ErrStaleEpoch, "a lock taken away fences its client")
}

func TestOperatorSession(t *testing.T) {
	id := OperatorSession(42)
	require.True(t, IsOperatorSession(id))
	require.False(t, IsOperatorSession("0123456789abcdef0123456789abcdef"), "a client's session")
	st := open(t, t.TempDir())
	res, err := st.apply(cmdOf(1, &bfspb.LockDirCmd{Path: "/", Holder: "ops", Operator: true}))
	require.NoError(t, err)
	require.True(t, IsOperatorSession(res.Lock.Session))
	require.Equal(t, OperatorSession(uint64(res.Lock.Epoch)), res.Lock.Session)
}

// TestDrainIsRecorded: DrainCmd records and clears draining addresses,
// and they survive a reopen.
func TestDrainIsRecorded(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	var err error
	drain := func(cancel bool, addrs ...string) error {
		_, err := s.apply(cmdOf(1, &bfspb.DrainCmd{Addresses: addrs, Cancel: cancel}))
		return err
	}
	require.NoError(t, drain(false, "b:1", "a:1", "c:1"))
	require.NoError(t, drain(true, "c:1", "never:1"))
	require.ErrorIs(t, drain(false, "d:1", ""), ErrInvalid)
	got, err := s.Draining()
	require.NoError(t, err)
	require.Equal(t, []string{"a:1", "b:1"}, got)
	require.NoError(t, s.Close())

	s, err = Open(Options{Dir: dir})
	require.NoError(t, err)
	defer s.Close()
	got, err = s.Draining()
	require.NoError(t, err)
	require.Equal(t, []string{"a:1", "b:1"}, got, "after a reopen")
}

// TestChunkserverIsRecorded: ChunkserverCmd records, replaces and forgets
// what is remembered of chunkservers, and it survives a reopen.
func TestChunkserverIsRecorded(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	var err error
	apply := func(c *bfspb.ChunkserverCmd) error {
		_, err := s.apply(&bfspb.Command{Op: &bfspb.Command_Chunkserver{Chunkserver: c}})
		return err
	}
	require.NoError(t, apply(&bfspb.ChunkserverCmd{Address: "a:1", Record: &bfspb.ChunkserverRecord{Host: "a"}}))
	require.NoError(t, apply(&bfspb.ChunkserverCmd{Address: "b:1", Record: &bfspb.ChunkserverRecord{Host: "b"}}))
	require.NoError(t, apply(&bfspb.ChunkserverCmd{Address: "a:1", Record: &bfspb.ChunkserverRecord{Host: "a", Dead: true, LastHeartbeatNs: 7, Blocks: 3}}))
	require.NoError(t, apply(&bfspb.ChunkserverCmd{Address: "b:1", Forget: true}))
	require.ErrorIs(t, apply(&bfspb.ChunkserverCmd{Address: "", Record: &bfspb.ChunkserverRecord{}}), ErrInvalid)
	require.ErrorIs(t, apply(&bfspb.ChunkserverCmd{Address: "c:1"}), ErrInvalid)
	require.NoError(t, s.Close())

	s, err = Open(Options{Dir: dir})
	require.NoError(t, err)
	defer s.Close()
	got, err := s.Chunkservers()
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.True(t, proto.Equal(&bfspb.ChunkserverRecord{Host: "a", Dead: true, LastHeartbeatNs: 7, Blocks: 3}, got["a:1"]), "%v", got["a:1"])
}
