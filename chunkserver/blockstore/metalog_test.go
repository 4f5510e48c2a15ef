package blockstore

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGroupCommit holds the committer on its first frame while more seals
// queue up, and checks that those go to disk together, in one frame.
func TestGroupCommit(t *testing.T) {
	const waiting = 20
	release := make(chan struct{})
	var mu sync.Mutex
	var frames []int
	var sealing atomic.Bool // the frames of the replicas' creation do not count
	dir := t.TempDir()
	s := openStoreWith(t, dir, options{logLimit: defaultLogLimit, beforeFrame: func(n int) {
		if !sealing.Load() {
			return
		}
		mu.Lock()
		frames = append(frames, n)
		first := len(frames) == 1
		mu.Unlock()
		if first {
			<-release
		}
	}})
	data := randBytes(1000, 1)
	for id := BlockID(1); id <= waiting+1; id++ {
		writeAll(t, s, id, data, len(data), nil)
	}
	sealing.Store(true)
	var wg sync.WaitGroup
	seal := func(id BlockID) {
		wg.Go(func() {
			size, _, err := s.Seal(id)
			require.NoError(t, err)
			require.EqualValues(t, len(data), size)
		})
	}
	seal(1)
	waitFor(t, "the first frame", func() bool { mu.Lock(); defer mu.Unlock(); return len(frames) == 1 })
	for id := BlockID(2); id <= waiting+1; id++ {
		seal(id)
	}
	waitFor(t, "the seals to queue", func() bool {
		s.log.mu.Lock()
		defer s.log.mu.Unlock()
		return len(s.log.mu.queue) == waiting
	})
	close(release)
	wg.Wait()
	require.Equal(t, []int{1, waiting}, frames)

	s2 := openStore(t, crashCopy(t, dir))
	for id := BlockID(1); id <= waiting+1; id++ {
		info, err := s2.Info(id)
		require.NoError(t, err)
		require.Equal(t, BlockInfo{ID: id, Size: int64(len(data)), Sealed: true}, info)
	}
}

// waitFor waits until cond holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
		runtime.Gosched()
	}
}

// TestLogRecovery works a store whose meta log is tiny, so that logs fill
// and are checkpointed all along, and opens a copy of it taken as a crash
// would leave it: every acknowledged seal, sync, truncate and delete is
// there, whether it was still only in a log or already in a meta file.
// Recovery then leaves no log behind.
func TestLogRecovery(t *testing.T) {
	dir := t.TempDir()
	s := openStoreWith(t, dir, options{logLimit: 1 << 10})
	want := make(map[BlockID][]byte)
	for id := BlockID(1); id <= 40; id++ {
		data := randBytes(int(id)*5000, uint64(id))
		writeAll(t, s, id, data, 3000, sealLast)
		want[id] = data
	}
	synced := randBytes(10_000, 99)
	seq := writeAll(t, s, 41, synced, 4000, syncLast)
	_, err := s.Write(pkt(41, seq+1, int64(len(synced)), []byte("not synced")))
	require.NoError(t, err)
	want[41] = synced
	for _, id := range []BlockID{3, 39} { // one checkpointed by now, one in the log
		require.NoError(t, s.Delete(id))
		delete(want, id)
	}
	for _, id := range []BlockID{5, 40} {
		require.NoError(t, s.Truncate(id, 1234))
		want[id] = want[id][:1234]
	}
	_, _, err = s.Seal(42) // never seen
	require.NoError(t, err)
	want[42] = []byte{}

	copied := crashCopy(t, dir)
	s2 := openStore(t, copied)
	require.Len(t, s2.List(), len(want))
	for id, data := range want {
		info, err := s2.Info(id)
		require.NoError(t, err, "block %d", id)
		require.Equal(t, BlockInfo{ID: id, Size: int64(len(data)), Sealed: id != 41}, info)
		got, err := s2.Read(id, 0, 1e6)
		require.NoError(t, err)
		require.Equal(t, data, got, "block %d", id)
	}
	logs, err := listLogs(filepath.Join(copied, logDir))
	require.NoError(t, err)
	require.Len(t, logs, 1, "only the new log")
	for id := range want {
		require.FileExists(t, s2.base(id)+metaExt)
	}

	// A clean Close leaves everything in the meta files.
	require.NoError(t, s.Close())
	logs, err = listLogs(filepath.Join(dir, logDir))
	require.NoError(t, err)
	require.Empty(t, logs)
	s3 := openStore(t, dir)
	require.Equal(t, s2.List(), s3.List())
}

// testLog builds a log of frames, each holding the meta records of ids.
func testLog(frames ...[]BlockID) (buf []byte, ends []int) {
	buf = append(buf, logMagic[:]...)
	for _, ids := range frames {
		frame := make([]byte, frameHeader)
		for _, id := range ids {
			rec, _ := metaRecord(meta{id: id, size: int64(id) * 100, seq: 1}, make([]uint32, 1))
			frame = append(frame, rec...)
		}
		sealFrame(frame)
		buf = append(buf, frame...)
		ends = append(ends, len(buf))
	}
	return buf, ends
}

// TestReadLogDamage checks what a log's reader makes of what a crash can
// leave at its end (dropped) and of damage before it (ErrCorrupt).
func TestReadLogDamage(t *testing.T) {
	intact, ends := testLog([]BlockID{1, 2}, []BlockID{3}, []BlockID{4, 5, 6})
	lastFrame := ends[1]
	for _, tc := range []struct {
		name    string
		damage  func(b []byte) []byte
		records int // -1: ErrCorrupt
	}{
		{"intact", func(b []byte) []byte { return b }, 6},
		{"last frame cut", func(b []byte) []byte { return b[:len(b)-10] }, 3},
		{"last frame header cut", func(b []byte) []byte { return b[:lastFrame+5] }, 3},
		{"zeros past the end", func(b []byte) []byte { return append(b, make([]byte, 4096)...) }, 6},
		{"last frame zeroed in part", func(b []byte) []byte { clear(b[lastFrame+20 : lastFrame+40]); return b }, 3},
		{"last frame header zeroed", func(b []byte) []byte { clear(b[lastFrame : lastFrame+frameHeader]); return b }, 3},
		{"empty", func(b []byte) []byte { return nil }, 0},
		{"magic cut", func(b []byte) []byte { return b[:3] }, 0},
		{"committed frame damaged", func(b []byte) []byte { b[ends[0]+frameHeader+2] ^= 1; return b }, -1},
		{"committed frame length damaged", func(b []byte) []byte { b[len(logMagic)+4] ^= 0x40; return b }, -1},
		{"committed frame marker damaged", func(b []byte) []byte { b[len(logMagic)] ^= 1; return b }, -1},
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }, -1},
		{"garbage", func(b []byte) []byte { return randBytes(3000, 7) }, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), logName(1))
			require.NoError(t, os.WriteFile(path, tc.damage(append([]byte(nil), intact...)), 0o644))
			recs, err := readLog(path)
			if tc.records < 0 {
				require.ErrorIs(t, err, ErrCorrupt)
				require.Contains(t, err.Error(), path)
				return
			}
			require.NoError(t, err)
			require.Len(t, recs, tc.records)
			for i, r := range recs {
				require.Equal(t, BlockID(i+1), r.id)
			}
		})
	}
}

// TestReadLogBadRecord: a frame whose checksum holds but whose records do
// not parse is damage too.
func TestReadLogBadRecord(t *testing.T) {
	for name, rec := range map[string][]byte{
		"unknown kind":      {9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"short header":      {1, 2, 3},
		"body past the end": {1, 1, 0, 0, 0, 0, 0, 0, 0, 200, 0, 0, 0},
		"meta of another":   func() []byte { r, _ := metaRecord(meta{id: 2}, nil); r[1] = 1; return r }(),
		"delete with body":  append(deleteRecord(1)[:9:9], 1, 0, 0, 0, 'x'),
	} {
		t.Run(name, func(t *testing.T) {
			frame := append(make([]byte, frameHeader), rec...)
			sealFrame(frame)
			path := filepath.Join(t.TempDir(), logName(1))
			require.NoError(t, os.WriteFile(path, append(logMagic[:], frame...), 0o644))
			_, err := readLog(path)
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

// TestOpenCorruptLog: a store whose meta log is damaged does not open,
// with an error naming the file, rather than forget acknowledged seals.
func TestOpenCorruptLog(t *testing.T) {
	dir := t.TempDir()
	buf, ends := testLog([]BlockID{1}, []BlockID{2})
	buf[ends[0]-1] ^= 1
	require.NoError(t, os.MkdirAll(filepath.Join(dir, logDir), 0o755))
	path := filepath.Join(dir, logDir, logName(7))
	require.NoError(t, os.WriteFile(path, buf, 0o644))
	_, err := Open(dir)
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), path)
	// The directory is not left locked.
	require.NoError(t, os.Remove(path))
	s := openStore(t, dir)
	require.Empty(t, s.List())
}

// FuzzReadLog: no bytes make the reader panic, and whatever it accepts
// carries only well-formed records.
func FuzzReadLog(f *testing.F) {
	intact, _ := testLog([]BlockID{1, 2}, []BlockID{3})
	f.Add(intact)
	f.Add(intact[:len(intact)-7])
	f.Add(logMagic[:])
	f.Fuzz(func(t *testing.T, buf []byte) {
		path := filepath.Join(t.TempDir(), logName(1))
		require.NoError(t, os.WriteFile(path, buf, 0o644))
		recs, err := readLog(path)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		}
		for _, r := range recs {
			require.NoError(t, r.check())
		}
	})
}
