package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/nameserver/namespace"
)

// testLog returns the entry a test stores at index: every field set, and
// varied (empty and nil data, zero and non-zero times, every type), so
// that a field the encoding dropped would show.
func testLog(index, term uint64) *raft.Log {
	data := make([]byte, index%97)
	for i := range data {
		data[i] = byte(index*31 + uint64(i))
	}
	l := &raft.Log{Index: index, Term: term, Type: raft.LogType(index % 6), Data: data}
	if index%3 != 0 {
		l.Extensions = fmt.Appendf(nil, "ext-%d", index)
	}
	if index%5 != 0 {
		l.AppendedAt = time.Unix(1_700_000_000+int64(index), int64(index*7919%1e9))
	}
	return l
}

func testLogs(lo, hi, term uint64) []*raft.Log {
	var logs []*raft.Log
	for i := lo; i <= hi; i++ {
		logs = append(logs, testLog(i, term))
	}
	return logs
}

// sameLog reports how got differs from want, "" if it does not.
func sameLog(want, got *raft.Log) string {
	switch {
	case want.Index != got.Index, want.Term != got.Term, want.Type != got.Type:
		return fmt.Sprintf("entry %d/%d/%v, want %d/%d/%v", got.Index, got.Term, got.Type, want.Index, want.Term, want.Type)
	case !bytes.Equal(want.Data, got.Data):
		return fmt.Sprintf("entry %d: data %x, want %x", want.Index, got.Data, want.Data)
	case !bytes.Equal(want.Extensions, got.Extensions):
		return fmt.Sprintf("entry %d: extensions %q, want %q", want.Index, got.Extensions, want.Extensions)
	case !want.AppendedAt.Equal(got.AppendedAt):
		return fmt.Sprintf("entry %d: appended at %v, want %v", want.Index, got.AppendedAt, want.AppendedAt)
	}
	return ""
}

// testOptions opens dir with Pebble's log lines in the test's log and its
// errors failing the test.
func testOptions(t testing.TB, dir string) LogStoreOptions {
	return LogStoreOptions{Dir: dir, Logger: testLogger{t}}
}

type testLogger struct{ t testing.TB }

func (testLogger) Infof(string, ...any) {}

func (l testLogger) Errorf(format string, args ...any) {
	l.t.Errorf("pebble: "+format, args...)
}

func (l testLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

func openTestStore(t testing.TB, dir string) *LogStore {
	t.Helper()
	s, err := OpenLogStore(testOptions(t, dir))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// requireBounds checks FirstIndex and LastIndex.
func requireBounds(t *testing.T, s raft.LogStore, first, last uint64) {
	t.Helper()
	f, err := s.FirstIndex()
	require.NoError(t, err)
	l, err := s.LastIndex()
	require.NoError(t, err)
	require.Equal(t, [2]uint64{first, last}, [2]uint64{f, l}, "first and last index")
}

// requireStored checks that exactly the indexes in want (as written by
// testLog with the term given) are stored in lo..hi.
func requireStored(t *testing.T, s raft.LogStore, lo, hi uint64, want map[uint64]uint64) {
	t.Helper()
	for i := lo; i <= hi; i++ {
		var got raft.Log
		err := s.GetLog(i, &got)
		term, ok := want[i]
		if !ok {
			require.Truef(t, err == raft.ErrLogNotFound, "GetLog(%d) = %v, want raft.ErrLogNotFound itself", i, err)
			continue
		}
		require.NoError(t, err, "GetLog(%d)", i)
		require.Empty(t, sameLog(testLog(i, term), &got))
	}
}

// span is the entries lo..hi, stored by testLog with term.
type span struct{ lo, hi, term uint64 }

// spans returns the term of every index in the spans, for requireStored.
func spans(ss ...span) map[uint64]uint64 {
	m := map[uint64]uint64{}
	for _, sp := range ss {
		for i := sp.lo; i <= sp.hi; i++ {
			m[i] = sp.term
		}
	}
	return m
}

// TestConformance runs the LogStore contract on the store and on the
// store wrapped in raft.LogCache, as raft will use it.
func TestConformance(t *testing.T) {
	for _, wrap := range []struct {
		name string
		wrap func(*testing.T, *LogStore) raft.LogStore
	}{
		{"store", func(_ *testing.T, s *LogStore) raft.LogStore { return s }},
		{"logcache", func(t *testing.T, s *LogStore) raft.LogStore {
			c, err := raft.NewLogCache(8, s)
			require.NoError(t, err)
			return c
		}},
	} {
		t.Run(wrap.name, func(t *testing.T) {
			for _, tc := range conformanceCases {
				t.Run(tc.name, func(t *testing.T) {
					dir := t.TempDir()
					s := openTestStore(t, dir)
					tc.run(t, wrap.wrap(t, s))
				})
			}
		})
	}
}

var conformanceCases = []struct {
	name string
	run  func(*testing.T, raft.LogStore)
}{
	{"empty", func(t *testing.T, s raft.LogStore) {
		requireBounds(t, s, 0, 0)
		requireStored(t, s, 0, 3, nil)
		require.True(t, s.GetLog(math.MaxUint64, new(raft.Log)) == raft.ErrLogNotFound)
	}},
	{"one", func(t *testing.T, s raft.LogStore) {
		require.NoError(t, s.StoreLog(testLog(1, 1)))
		requireBounds(t, s, 1, 1)
		requireStored(t, s, 0, 3, spans(span{1, 1, 1}))
	}},
	{"many, some stored again", func(t *testing.T, s raft.LogStore) {
		require.NoError(t, s.StoreLogs(testLogs(1, 100, 1)))
		require.NoError(t, s.StoreLogs(testLogs(101, 300, 2)))
		// An entry stored again replaces the old one (raft truncates the
		// tail first; the contract does not ask it to).
		require.NoError(t, s.StoreLogs(testLogs(50, 150, 3)))
		requireBounds(t, s, 1, 300)
		requireStored(t, s, 0, 302, spans(span{1, 49, 1}, span{50, 150, 3}, span{151, 300, 2}))
	}},
	{"every field", func(t *testing.T, s raft.LogStore) {
		big := bytes.Repeat([]byte{0xa5}, 1<<20)
		logs := []*raft.Log{
			{Index: 1, Term: math.MaxUint64, Type: raft.LogConfiguration, Data: big, Extensions: []byte{0}, AppendedAt: time.Unix(0, 999_999_999)},
			{Index: 2, Term: 0, Type: raft.LogType(255), AppendedAt: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)},
			{Index: 3, Term: 7, Type: raft.LogCommand, Data: []byte{}, Extensions: []byte{}, AppendedAt: time.Unix(-5, 3)},
			{Index: 4, Term: 7, Type: raft.LogNoop, AppendedAt: time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)},
			{Index: math.MaxUint64, Term: 8, Type: raft.LogBarrier, Data: []byte("last")},
		}
		require.NoError(t, s.StoreLogs(logs))
		requireBounds(t, s, 1, math.MaxUint64)
		for _, want := range logs {
			var got raft.Log
			require.NoError(t, s.GetLog(want.Index, &got))
			require.Empty(t, sameLog(want, &got))
		}
	}},
	{"gaps", func(t *testing.T, s raft.LogStore) {
		// A gap, as raft leaves one after a snapshot when the store
		// allows it: bounds as raft.InmemStore reports them.
		require.NoError(t, s.StoreLogs(testLogs(1, 5, 1)))
		require.NoError(t, s.StoreLogs(testLogs(10, 12, 1)))
		requireBounds(t, s, 1, 12)
		requireStored(t, s, 0, 13, spans(span{1, 5, 1}, span{10, 12, 1}))
		// A batch with a gap inside it.
		require.NoError(t, s.StoreLogs([]*raft.Log{testLog(20, 2), testLog(22, 2)}))
		requireBounds(t, s, 1, 22)
		requireStored(t, s, 19, 23, map[uint64]uint64{20: 2, 22: 2})
	}},
	{"below first", func(t *testing.T, s raft.LogStore) {
		// raft.InmemStore keeps FirstIndex at the first index ever stored;
		// this store reports the lowest stored one, as raft-boltdb does.
		require.NoError(t, s.StoreLogs(testLogs(20, 22, 1)))
		require.NoError(t, s.StoreLog(testLog(15, 1)))
		requireBounds(t, s, 15, 22)
	}},
	{"delete head, tail, middle", func(t *testing.T, s raft.LogStore) {
		for _, d := range []struct {
			lo, hi, first, last uint64
			left                []span
		}{
			{1, 3, 4, 10, []span{{4, 10, 1}}},            // raft's compaction
			{8, 10, 1, 7, []span{{1, 7, 1}}},             // a follower's conflict
			{4, 6, 1, 10, []span{{1, 3, 1}, {7, 10, 1}}}, // allowed, never made by raft
		} {
			require.NoError(t, s.StoreLogs(testLogs(1, 10, 1))) // whole again
			require.NoError(t, s.DeleteRange(d.lo, d.hi))
			requireBounds(t, s, d.first, d.last)
			requireStored(t, s, 0, 11, spans(d.left...))
		}
	}},
	{"delete to a gap", func(t *testing.T, s raft.LogStore) {
		// A range that ends in a gap moves the bound to the next stored
		// entry, not to the end of the range.
		require.NoError(t, s.StoreLogs(testLogs(1, 5, 1)))
		require.NoError(t, s.StoreLogs(testLogs(10, 12, 1)))
		require.NoError(t, s.StoreLogs(testLogs(20, 22, 1)))
		require.NoError(t, s.DeleteRange(1, 7))
		requireBounds(t, s, 10, 22)
		require.NoError(t, s.DeleteRange(15, 30))
		requireBounds(t, s, 10, 12)
		requireStored(t, s, 0, 23, spans(span{10, 12, 1}))
	}},
	{"delete all", func(t *testing.T, s raft.LogStore) {
		require.NoError(t, s.StoreLogs(testLogs(1, 10, 1)))
		require.NoError(t, s.DeleteRange(1, 10))
		requireBounds(t, s, 0, 0)
		requireStored(t, s, 0, 11, nil)
		// After a snapshot the log starts again past it.
		require.NoError(t, s.StoreLogs(testLogs(50, 52, 3)))
		requireBounds(t, s, 50, 52)
		require.NoError(t, s.DeleteRange(0, math.MaxUint64))
		requireBounds(t, s, 0, 0)
		requireStored(t, s, 49, 53, nil)
	}},
	{"delete nothing", func(t *testing.T, s raft.LogStore) {
		require.NoError(t, s.DeleteRange(0, 0)) // raft.RecoverCluster on an empty log
		requireBounds(t, s, 0, 0)
		require.NoError(t, s.StoreLogs(testLogs(5, 10, 1)))
		require.NoError(t, s.DeleteRange(1, 4))
		require.NoError(t, s.DeleteRange(11, 20))
		require.NoError(t, s.DeleteRange(8, 7))
		requireBounds(t, s, 5, 10)
		requireStored(t, s, 0, 11, spans(span{5, 10, 1}))
	}},
	{"refused", func(t *testing.T, s raft.LogStore) {
		require.Error(t, s.StoreLog(testLog(0, 1)))
		require.Error(t, s.StoreLogs([]*raft.Log{testLog(1, 1), nil}))
		require.NoError(t, s.StoreLogs(nil))
		requireBounds(t, s, 0, 0)
		requireStored(t, s, 0, 2, nil)
	}},
}

// TestReopen checks that a reopened store has the same entries, bounds
// and stable values.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenLogStore(testOptions(t, dir))
	require.NoError(t, err)
	require.NoError(t, s.StoreLogs(testLogs(1, 40, 1)))
	require.NoError(t, s.StoreLogs(testLogs(50, 60, 2)))
	require.NoError(t, s.DeleteRange(1, 9))
	require.NoError(t, s.DeleteRange(58, 60))
	require.NoError(t, s.SetUint64([]byte("CurrentTerm"), 9))
	require.NoError(t, s.Set([]byte("LastVoteCand"), []byte("ns2")))
	require.NoError(t, s.Close())

	s = openTestStore(t, dir)
	requireBounds(t, s, 10, 57)
	requireStored(t, s, 0, 61, spans(span{10, 40, 1}, span{50, 57, 2}))
	term, err := s.GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.Equal(t, uint64(9), term)
	cand, err := s.Get([]byte("LastVoteCand"))
	require.NoError(t, err)
	require.Equal(t, "ns2", string(cand))

	// Deleting everything survives a reopen too.
	require.NoError(t, s.DeleteRange(10, 57))
	require.NoError(t, s.Close())
	s = openTestStore(t, dir)
	requireBounds(t, s, 0, 0)
}

func TestStable(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	v, err := s.Get([]byte("LastVoteCand"))
	require.ErrorIs(t, err, ErrKeyNotFound)
	require.Equal(t, "not found", err.Error(), "raft matches the text")
	require.Empty(t, v)
	n, err := s.GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.Zero(t, n)

	require.NoError(t, s.Set([]byte("k"), []byte("v1")))
	require.NoError(t, s.Set([]byte("k"), []byte("v2")))
	v, err = s.Get([]byte("k"))
	require.NoError(t, err)
	require.Equal(t, "v2", string(v))
	v[0] = 'x' // the caller owns what Get returns
	v, _ = s.Get([]byte("k"))
	require.Equal(t, "v2", string(v))

	require.NoError(t, s.Set([]byte("empty"), nil))
	v, err = s.Get([]byte("empty"))
	require.NoError(t, err, "a key set to nothing is not a missing key")
	require.Empty(t, v)

	require.NoError(t, s.SetUint64([]byte("CurrentTerm"), math.MaxUint64))
	n, err = s.GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.Equal(t, uint64(math.MaxUint64), n)
	_, err = s.GetUint64([]byte("k"))
	require.ErrorIs(t, err, ErrCorrupt)

	// Stable keys and log entries do not see each other.
	require.NoError(t, s.StoreLogs(testLogs(1, 3, 1)))
	requireBounds(t, s, 1, 3)
	_, err = s.Get([]byte("l"))
	require.ErrorIs(t, err, ErrKeyNotFound)
}

// TestRaftOnStore runs a one-voter raft group on the store, wrapped in
// raft.LogCache: bootstrap, commands, a snapshot that compacts the head,
// then a restart that finds the term and the log again.
func TestRaftOnStore(t *testing.T) {
	dir := t.TempDir()
	snaps := raft.NewInmemSnapshotStore()
	var applied []string
	for round := range 2 {
		s, err := OpenLogStore(testOptions(t, dir))
		require.NoError(t, err)
		logs, err := raft.NewLogCache(16, s)
		require.NoError(t, err)
		conf := raft.DefaultConfig()
		conf.LocalID = "ns1"
		conf.HeartbeatTimeout = 50 * time.Millisecond
		conf.ElectionTimeout = 50 * time.Millisecond
		conf.LeaderLeaseTimeout = 50 * time.Millisecond
		conf.TrailingLogs = 5
		conf.SnapshotThreshold = math.MaxUint64 // snapshots only when asked
		conf.LogOutput = nil
		conf.LogLevel = "error"
		addr, trans := raft.NewInmemTransport("ns1")
		existing, err := raft.HasExistingState(logs, s, snaps)
		require.NoError(t, err)
		require.Equal(t, round > 0, existing)
		if !existing {
			require.NoError(t, raft.BootstrapCluster(conf, logs, s, snaps, trans,
				raft.Configuration{Servers: []raft.Server{{ID: "ns1", Address: addr}}}))
		}
		fsm := &listFSM{}
		r, err := raft.NewRaft(conf, fsm, logs, s, snaps, trans)
		require.NoError(t, err)
		waitLeader(t, r)
		for i := range 20 {
			require.NoError(t, r.Apply(fmt.Appendf(nil, "r%d-c%d", round, i), 5*time.Second).Error())
		}
		if round == 0 {
			require.NoError(t, r.Snapshot().Error())
			first, err := s.FirstIndex()
			require.NoError(t, err)
			require.Greater(t, first, uint64(1), "the snapshot compacted the head")
		}
		require.NoError(t, r.Shutdown().Error())
		require.NoError(t, trans.Close())
		applied = append(applied, fsm.entries()...)
		term, err := s.GetUint64([]byte("CurrentTerm"))
		require.NoError(t, err)
		require.NotZero(t, term)
		require.NoError(t, s.Close())
	}
	// The second round restored the snapshot and replayed nothing twice.
	require.Len(t, applied, 40)
}

func waitLeader(t *testing.T, r *raft.Raft) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for r.State() != raft.Leader {
		select {
		case <-r.LeaderCh():
		case <-deadline:
			t.Fatalf("no leader: state %v", r.State())
		}
	}
}

// listFSM records the commands it applies.
type listFSM struct {
	mu      sync.Mutex
	applied []string
}

func (f *listFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, string(l.Data))
	return nil
}

func (f *listFSM) entries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.applied...)
}

func (f *listFSM) Snapshot() (raft.FSMSnapshot, error) { return noSnapshot{}, nil }

func (f *listFSM) Restore(rc io.ReadCloser) error { return rc.Close() }

type noSnapshot struct{}

func (noSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (noSnapshot) Release()                             {}

func TestClosed(t *testing.T) {
	s, err := OpenLogStore(testOptions(t, t.TempDir()))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	_, err = s.FirstIndex()
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.GetLog(1, new(raft.Log)), ErrClosed)
	require.ErrorIs(t, s.StoreLog(testLog(1, 1)), ErrClosed)
	require.ErrorIs(t, s.DeleteRange(1, 2), ErrClosed)
	require.ErrorIs(t, s.Set([]byte("k"), nil), ErrClosed)
	_, err = s.Get([]byte("k"))
	require.ErrorIs(t, err, ErrClosed)
	_, err = OpenLogStore(LogStoreOptions{})
	require.Error(t, err)
}

// TestCorruptEntry writes bad bytes under log keys with Pebble itself:
// GetLog answers ErrCorrupt, it does not panic or make up an entry.
func TestCorruptEntry(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenLogStore(testOptions(t, dir))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	good := make([]byte, encodedLen(testLog(7, 1)))
	encodeLog(good, testLog(7, 1))
	setRaw(t, dir, map[string][]byte{
		string(logKey(1)): []byte("garbage"),
		string(logKey(2)): good, // entry 7 under key 2
	})

	s = openTestStore(t, dir)
	requireBounds(t, s, 1, 2)
	for _, i := range []uint64{1, 2} {
		err := s.GetLog(i, new(raft.Log))
		require.ErrorIs(t, err, ErrCorrupt, "GetLog(%d)", i)
		t.Logf("GetLog(%d): %v", i, err)
	}
}

// setRaw writes keys into the Pebble directory dir, bypassing the store.
func setRaw(t *testing.T, dir string, kv map[string][]byte) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: LogFormatMajorVersion, Logger: testLogger{t}})
	require.NoError(t, err)
	for k, v := range kv {
		require.NoError(t, db.Set([]byte(k), v, pebble.Sync))
	}
	require.NoError(t, db.Close())
}

func TestDecodeRejects(t *testing.T) {
	good := make([]byte, encodedLen(testLog(7, 3)))
	encodeLog(good, testLog(7, 3))
	l, err := decodeLog(good)
	require.NoError(t, err)
	require.Empty(t, sameLog(testLog(7, 3), &l))

	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for name, b := range map[string][]byte{
		"nil":            nil,
		"short header":   good[:logHeaderLen-1],
		"no lengths":     good[:logHeaderLen],
		"version 0":      edit(func(b []byte) []byte { b[0] = 0; return b }),
		"version 2":      edit(func(b []byte) []byte { b[0] = 2; return b }),
		"nanoseconds":    edit(func(b []byte) []byte { b[26] = 0xff; return b }),
		"data too long":  edit(func(b []byte) []byte { b[logHeaderLen] = 0x7f; return b }),
		"truncated":      good[:len(good)-1],
		"trailing byte":  append(append([]byte(nil), good...), 0),
		"varint overrun": append(good[:logHeaderLen:logHeaderLen], bytes.Repeat([]byte{0xff}, 11)...),
		"long varint":    append(good[:logHeaderLen:logHeaderLen], 0x80, 0x00, 0x00),
	} {
		_, err := decodeLog(b)
		require.ErrorIs(t, err, ErrCorrupt, name)
	}
}

// FuzzDecodeLog: any bytes decode to an error or to an entry that encodes
// back to the same bytes; never a panic.
func FuzzDecodeLog(f *testing.F) {
	for _, i := range []uint64{1, 3, 5, 96} {
		b := make([]byte, encodedLen(testLog(i, 2)))
		encodeLog(b, testLog(i, 2))
		f.Add(b)
	}
	for _, sec := range []uint64{math.MaxInt64, 1 << 63} { // the extreme times
		b := make([]byte, encodedLen(testLog(1, 1)))
		encodeLog(b, testLog(1, 1))
		binary.BigEndian.PutUint64(b[18:], sec)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeLog(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again := make([]byte, encodedLen(&l))
		encodeLog(again, &l)
		if !bytes.Equal(again, b) {
			t.Fatalf("decoded %+v encodes to %x, not %x", l, again, b)
		}
	})
}

// TestConcurrent runs raft's pattern of calls at once: one goroutine
// appends, one compacts the head, readers read the bounds and the
// entries; then Close with the readers still running. A reader never finds
// LastIndex naming an entry it cannot read (only the head is deleted), and
// every call after Close answers ErrClosed.
func TestConcurrent(t *testing.T) {
	s, err := OpenLogStore(testOptions(t, t.TempDir()))
	require.NoError(t, err)
	const appends = 200
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	appended := make(chan struct{})
	wg.Go(func() {
		defer close(appended)
		for i := uint64(1); i <= appends; i++ {
			if err := s.StoreLogs(testLogs(2*i-1, 2*i, 1)); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-appended:
				return
			default:
			}
			first, last, err := s.Bounds()
			if err == nil && last > first+20 {
				err = s.DeleteRange(first, last-20)
			}
			if errors.Is(err, ErrClosed) {
				return
			}
			if err != nil {
				errs <- err
				return
			}
		}
	})
	for range 2 {
		wg.Go(func() {
			for {
				last, err := s.LastIndex()
				var l raft.Log
				if err == nil && last > 0 {
					if err = s.GetLog(last, &l); err == nil && l.Index != last {
						err = fmt.Errorf("GetLog(%d) returned entry %d", last, l.Index)
					}
					if errors.Is(err, raft.ErrLogNotFound) {
						// The compactor may have passed it meanwhile (a
						// reader descheduled long enough): then the head
						// is above it now.
						if first, _, berr := s.Bounds(); berr == nil && first > last {
							err = nil
						}
					}
				}
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	<-appended
	require.NoError(t, s.Close())
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestForeignDirectory: a directory holding another store, or a log store
// of another format, is refused and left as it was.
func TestForeignDirectory(t *testing.T) {
	// The namespace's directory (Pebble itself refuses it: its merger).
	dir := t.TempDir()
	ns, err := namespace.Open(namespace.Options{Dir: dir})
	require.NoError(t, err)
	id := ns.ClusterID()
	require.NoError(t, ns.Close())
	_, err = OpenLogStore(testOptions(t, dir))
	require.Error(t, err)
	t.Log(err)
	ns, err = namespace.Open(namespace.Options{Dir: dir})
	require.NoError(t, err)
	require.Equal(t, id, ns.ClusterID())
	require.NoError(t, ns.Close())

	// A directory in use.
	dir = t.TempDir()
	s := openTestStore(t, dir)
	_, err = OpenLogStore(testOptions(t, dir))
	require.Error(t, err)
	t.Log(err)
	requireBounds(t, s, 0, 0)

	// Any other Pebble data.
	dir = t.TempDir()
	setRaw(t, dir, map[string][]byte{"lost": []byte("data")})
	_, err = OpenLogStore(testOptions(t, dir))
	require.ErrorContains(t, err, "not a raft log store")
	_, err = OpenLogStore(testOptions(t, dir))
	require.ErrorContains(t, err, "not a raft log store", "the refusal wrote nothing")

	// A log store of a later format.
	dir = t.TempDir()
	s, err = OpenLogStore(testOptions(t, dir))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	setRaw(t, dir, map[string][]byte{string(keyFormat): []byte("bfs-raft-log/2")})
	_, err = OpenLogStore(testOptions(t, dir))
	require.ErrorContains(t, err, `format "bfs-raft-log/2"`)
}
