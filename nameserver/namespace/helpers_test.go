package namespace

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// The helpers the package's tests share.

// open opens the store in dir, formatting it if it is new, and closes it
// when the test ends.
func open(t testing.TB, dir string) *Store {
	t.Helper()
	return openWith(t, Options{Dir: dir})
}

// openWith is open with options.
func openWith(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	if !s.Formatted() {
		require.NoError(t, format(s))
	}
	return s
}

// format applies a FormatCmd with a new cluster id.
func format(s *Store) error {
	id, err := NewClusterID()
	if err != nil {
		return err
	}
	_, err = s.apply(cmdOf(1, &bfspb.FormatCmd{ClusterId: id}))
	return err
}

// apply applies cmd as the next command of the store's log: at the index
// after the last one applied (a command that fails takes none, as in a
// log whose failed entries leave no mark).
func (s *Store) apply(cmd *bfspb.Command) (*Result, error) {
	return s.Apply(s.AppliedIndex()+1, cmd)
}

// cmdOf wraps op (one of the messages a Command carries) into a
// Command at time now.
func cmdOf(now int64, op proto.Message) *bfspb.Command {
	cmd := &bfspb.Command{TimeNs: now}
	m := cmd.ProtoReflect()
	name := op.ProtoReflect().Descriptor().FullName()
	fields := opOneof.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); fd.Message().FullName() == name {
			m.Set(fd, protoreflect.ValueOfMessage(op.ProtoReflect()))
			return cmd
		}
	}
	panic(fmt.Sprintf("no op of a Command carries %s", name))
}

// apply1 applies op at time 7.
func apply1(t *testing.T, s *Store, op proto.Message) (*Result, error) {
	t.Helper()
	return s.apply(cmdOf(7, op))
}

// openSessions opens the sessions named.
func openSessions(t testing.TB, s *Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		_, err := s.apply(cmdOf(1, &bfspb.OpenSessionCmd{Session: &bfspb.SessionRecord{SessionId: id, Holder: "h-" + id, TtlMs: 1000}}))
		require.NoError(t, err, "open session %s", id)
	}
}

func closeSession(s *Store, id string) error {
	_, err := s.apply(cmdOf(1, &bfspb.CloseSessionCmd{SessionId: id}))
	return err
}

func mkdir(s *Store, path string, parents bool) error {
	_, err := s.apply(cmdOf(1, &bfspb.MkdirCmd{Path: path, Parents: parents}))
	return err
}

func create(s *Store, path string, overwrite bool) error {
	_, err := s.apply(cmdOf(1, &bfspb.CreateCmd{Path: path, Overwrite: overwrite}))
	return err
}

func createAs(s *Store, path, session string, open bool) error {
	_, err := s.apply(cmdOf(1, &bfspb.CreateCmd{Path: path, SessionId: session, OpenForWrite: open}))
	return err
}

func del(s *Store, path string) error {
	_, err := s.apply(cmdOf(1, &bfspb.DeleteFileCmd{Path: path}))
	return err
}

func rmdir(s *Store, path string, recursive bool) error {
	_, err := s.apply(cmdOf(1, &bfspb.DeleteDirCmd{Path: path, Recursive: recursive}))
	return err
}

func rename(s *Store, src, dst string) error {
	return renameAs(s, src, dst, "")
}

func renameAs(s *Store, src, dst, session string) error {
	_, err := s.apply(cmdOf(1, &bfspb.RenameCmd{Src: src, Dst: dst, SessionId: session}))
	return err
}

func lockDir(s *Store, path, session string) (*Result, error) {
	return s.apply(cmdOf(5, &bfspb.LockDirCmd{Path: path, SessionId: session, Holder: "h-" + session}))
}

func unlockDir(s *Store, path, session string, force bool) (*Result, error) {
	return s.apply(cmdOf(6, &bfspb.UnlockDirCmd{Path: path, SessionId: session, Force: force, Reason: "holder"}))
}

func finishCleaningOf(s *Store, path string, epoch uint64) (*Result, error) {
	info, err := s.Stat(path)
	if err != nil {
		return nil, err
	}
	return s.apply(cmdOf(9, &bfspb.FinishCleaningCmd{Path: path, EntryId: info.EntryId, Epoch: epoch}))
}

func names(t *testing.T, s *Store, dir string) []string {
	t.Helper()
	entries, _, err := s.List(dir, "", 0)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name)
	}
	return out
}

func mustStat(t *testing.T, s *Store, p string) *bfspb.FileInfo {
	t.Helper()
	info, err := s.Stat(p)
	require.NoError(t, err)
	return info
}

// logEntry is a command of a command log, at its index, with what
// applying it answered ("" for success).
type logEntry struct {
	index   uint64
	cmd     *bfspb.Command
	outcome string
}

// cmdLog is a command log as a replicated log would hold it: every
// command proposed takes the next index, whether it applies or fails.
type cmdLog struct {
	entries []logEntry
}

// apply appends cmd to the log and applies it to s at its index.
func (l *cmdLog) apply(s *Store, cmd *bfspb.Command) (*Result, error) {
	index := uint64(1)
	if n := len(l.entries); n > 0 {
		index = l.entries[n-1].index + 1
	}
	res, err := s.Apply(index, cmd)
	if IsStorageError(err) {
		return res, err // not a command's outcome: not logged
	}
	l.entries = append(l.entries, logEntry{index: index, cmd: proto.Clone(cmd).(*bfspb.Command), outcome: outcome(err)})
	return res, err
}

// replay applies to s every entry after index from, and fails if one
// answers otherwise than it did when logged.
func (l *cmdLog) replay(t testing.TB, s *Store, from uint64) {
	t.Helper()
	if err := l.replayErr(s, from); err != nil {
		t.Fatal(err)
	}
}

func (l *cmdLog) replayErr(s *Store, from uint64) error {
	for _, e := range l.entries {
		if e.index <= from {
			continue
		}
		_, err := s.Apply(e.index, proto.Clone(e.cmd).(*bfspb.Command))
		if got := outcome(err); got != e.outcome {
			return fmt.Errorf("entry %d (%v) answered %q on replay, %q when logged", e.index, e.cmd, got, e.outcome)
		}
	}
	return nil
}

func outcome(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// kv is one stored key and its value.
type kv struct{ k, v []byte }

// dump returns every key the store holds, with its value, in key order,
// as its reads see them (merges resolved).
func dump(t testing.TB, s *Store) []kv {
	t.Helper()
	it, err := s.db.NewIter(&pebble.IterOptions{})
	require.NoError(t, err)
	var out []kv
	for it.First(); it.Valid(); it.Next() {
		out = append(out, kv{bytes.Clone(it.Key()), bytes.Clone(it.Value())})
	}
	require.NoError(t, errors.Join(it.Error(), it.Close()))
	return out
}

// diffState describes the first difference between two dumps ("" if
// they are byte-identical).
func diffState(want, got []kv) string {
	for i := range min(len(want), len(got)) {
		w, g := want[i], got[i]
		if !bytes.Equal(w.k, g.k) {
			return fmt.Sprintf("key %d: %q here, %q there", i, g.k, w.k)
		}
		if !bytes.Equal(w.v, g.v) {
			return fmt.Sprintf("key %q: value %x here, %x there", g.k, g.v, w.v)
		}
	}
	if len(want) != len(got) {
		return fmt.Sprintf("%d keys here, %d there", len(got), len(want))
	}
	return ""
}

// requireSameState fails unless got holds exactly what want holds, byte
// for byte, and keeps the same things in memory.
func requireSameState(t testing.TB, want, got *Store) {
	t.Helper()
	if d := diffState(dump(t, want), dump(t, got)); d != "" {
		t.Fatalf("the stores differ: %s", d)
	}
	if d := diffMemory(want, got); d != "" {
		t.Fatalf("the stores differ in memory: %s", d)
	}
}

// diffMemory compares what two stores keep in memory: the applied index,
// the counters, the cluster id, the member table, the lock table and the
// open-file index ("" if the same).
func diffMemory(want, got *Store) string {
	switch {
	case want.AppliedIndex() != got.AppliedIndex():
		return fmt.Sprintf("applied index %d, want %d", got.AppliedIndex(), want.AppliedIndex())
	case want.counters != got.counters:
		return fmt.Sprintf("counters %+v, want %+v", got.counters, want.counters)
	case want.ClusterID() != got.ClusterID():
		return fmt.Sprintf("cluster id %q, want %q", got.ClusterID(), want.ClusterID())
	}
	wm, gm := want.Members(), got.Members()
	if len(wm) != len(gm) {
		return fmt.Sprintf("%d members, want %d", len(gm), len(wm))
	}
	for i := range wm {
		if !proto.Equal(wm[i], gm[i]) {
			return fmt.Sprintf("member %v, want %v", gm[i], wm[i])
		}
	}
	wl, gl := want.Locks().List("/", false, 0), got.Locks().List("/", false, 0)
	if fmt.Sprint(wl) != fmt.Sprint(gl) {
		return fmt.Sprintf("locks %v, want %v", gl, wl)
	}
	if w, g := openUnderRoot(want), openUnderRoot(got); fmt.Sprint(w) != fmt.Sprint(g) {
		return fmt.Sprintf("open-file index %v, want %v", g, w)
	}
	return ""
}

// openUnderRoot is what the open-file index finds in the whole tree, and
// how many nodes it has.
func openUnderRoot(s *Store) [2]any {
	return [2]any{s.open.under(RootID, nil), s.open.len()}
}

// seedIDs takes n new ids for entries and blocks a test writes straight
// to Pebble, as commands would have taken them: the stored counter and
// the store's own move past them.
func seedIDs(t testing.TB, s *Store, n int) []uint64 {
	t.Helper()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	ids := make([]uint64, n)
	last := max(s.counters.lastID, firstID-1)
	for i := range ids {
		ids[i] = last + 1 + uint64(i)
	}
	last += uint64(n)
	require.NoError(t, s.db.Set(keyNextID, encodeUint64(last), pebble.Sync))
	s.counters.lastID = last
	s.lastID.Store(last)
	return ids
}

// lockOperator takes an operator lock of path (bound to no session).
func lockOperator(s *Store, path string) error {
	_, err := s.apply(cmdOf(5, &bfspb.LockDirCmd{Path: path, Holder: "ops", Operator: true}))
	return err
}

// openEmpty opens the store in dir as it is (a new one stays empty).
func openEmpty(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// lockPaths lists the paths of the lock table.
func lockPaths(s *Store) []string {
	var out []string
	for _, l := range s.Locks().List("/", false, 0) {
		out = append(out, l.Path)
	}
	return out
}

func member(s *Store, name, raft, client string) error {
	_, err := s.apply(cmdOf(1, &bfspb.MemberCmd{Member: &bfspb.Member{Name: name, RaftAddress: raft, ClientAddress: client}}))
	return err
}

func removeMember(s *Store, name string) error {
	_, err := s.apply(cmdOf(1, &bfspb.MemberCmd{Member: &bfspb.Member{Name: name}, Remove: true}))
	return err
}

// memberTable lists the member table as name=raft,client.
func memberTable(s *Store) []string {
	var out []string
	for _, m := range s.Members() {
		out = append(out, m.Name+"="+m.RaftAddress+","+m.ClientAddress)
	}
	return out
}
