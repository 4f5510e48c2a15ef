package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/testdisk"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// glog starts its flush daemon in init; it is not ours to stop.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
	)
}

// open opens a Set of cfg (its Dirs made under a temporary directory if
// empty), closed at the end of the test.
func open(t *testing.T, cfg Config) *Set {
	t.Helper()
	s, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func dirs(t *testing.T, n int) []string {
	base := t.TempDir()
	out := make([]string, n)
	for i := range out {
		out[i] = filepath.Join(base, string(rune('a'+i)))
	}
	return out
}

// sealed writes a sealed replica of block id holding data.
func sealed(t *testing.T, s *Set, id blockstore.BlockID, data string) {
	t.Helper()
	require.NoError(t, s.Create(context.Background(), id))
	_, err := s.Write(blockstore.Packet{BlockID: id, Seq: 1, Data: []byte(data), CRC32C: blockstore.Checksum([]byte(data)), Last: true})
	require.NoError(t, err)
}

func TestConfigErrors(t *testing.T) {
	d := dirs(t, 2)
	for _, cfg := range []Config{
		{},
		{Dirs: []string{d[0], ""}},
		{Dirs: []string{d[0], d[0] + "/"}},
		{Dirs: d, FailedTolerated: -2},
		{Dirs: d, FailedTolerated: 2},
		{Dirs: d, CheckInterval: -time.Second},
		{Dirs: d, CheckTimeout: -time.Second},
		{Dirs: make([]string, MaxVolumes+1)},
	} {
		_, err := Open(cfg)
		require.Error(t, err, "%+v", cfg)
	}
}

// TestOneReplicaPerBlock: a block is created on one volume only, however
// many creates and seals race for it, and every call about it goes to
// that volume.
func TestOneReplicaPerBlock(t *testing.T) {
	s := open(t, Config{Dirs: dirs(t, 3)})
	var wg sync.WaitGroup
	for id := range blockstore.BlockID(50) {
		for range 4 {
			wg.Go(func() { require.NoError(t, s.Create(context.Background(), id+1)) })
		}
		wg.Go(func() { s.Seal(id + 1) })
	}
	wg.Wait()
	held := 0
	for _, v := range s.Volumes() {
		held += len(v.Store().List())
	}
	require.Equal(t, 50, held)
	require.Len(t, s.List(), 50)
	for _, r := range s.List() {
		require.Equal(t, r.Volume, s.Volume(r.ID))
	}
}

// TestChooseByHeadroom: new replicas go to the volumes at random in
// proportion to their free space above the policy's reserve; a volume
// with none takes nothing, and with no volume that has room a create is
// ENOSPC.
func TestChooseByHeadroom(t *testing.T) {
	d := dirs(t, 3)
	free := map[string]int64{d[0]: 30 << 30, d[1]: 10 << 30, d[2]: 1 << 30}
	var mu sync.Mutex
	s := open(t, Config{Dirs: d, DiskSpace: func(dir string) (int64, int64) {
		mu.Lock()
		defer mu.Unlock()
		return 100 << 30, free[dir]
	}})
	s.SetPolicy(Policy{MinFree: 2 << 30})
	count := map[int]int{}
	for range 4000 {
		v, err := s.choose()
		require.NoError(t, err)
		count[v.index]++
	}
	require.Zero(t, count[2], "below the floor")
	require.InDelta(t, 4000*28/36, count[0], 130, "%v: 28 GiB of room against 8", count) // five standard deviations
	for id := range blockstore.BlockID(20) {
		require.NoError(t, s.Create(context.Background(), id+1))
		require.NotEqual(t, 2, s.Volume(id+1))
	}

	st := s.Status()
	require.Equal(t, Full, st[2].State)
	require.Contains(t, st[2].Reason, "no more than")
	s.SetPolicy(Policy{MaxFill: 0.5})
	mu.Lock()
	free[d[0]], free[d[1]] = 50<<30, 40<<30
	mu.Unlock()
	err := s.Create(context.Background(), 5000)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.ErrorIs(t, s.Create(context.Background(), 1), nil, "a replica that exists needs no room")
}

// TestFailedVolumeOutOfService: a volume whose disk fails (read-only) is
// checked after an error on it, taken out of service: its replicas are
// no longer listed or served, OnChange is called, and the others serve
// on. One more failure than tolerated delivers Fatal.
func TestFailedVolumeOutOfService(t *testing.T) {
	disk := testdisk.New(t, 64)
	var changes atomic.Int64
	other := filepath.Join(t.TempDir(), "other")
	s := open(t, Config{Dirs: []string{disk.Dir, other}, FailedTolerated: 0, OnChange: func() { changes.Add(1) },
		DiskSpace: func(string) (int64, int64) { return 1 << 30, 1 << 29 }}) // alike: each takes half
	s.SetPolicy(Policy{})
	for id := range blockstore.BlockID(40) {
		sealed(t, s, id+1, "data")
	}
	var onDisk []blockstore.BlockID
	for _, r := range s.List() {
		if r.Volume == 0 {
			onDisk = append(onDisk, r.ID)
		}
	}
	require.NotEmpty(t, onDisk)

	disk.ReadOnly()
	// Creates that land on the read-only volume fail, and have it checked.
	var failures int
	for id := blockstore.BlockID(100); failures == 0 && id < 200; id++ {
		if err := s.Create(context.Background(), id); err != nil {
			failures++
		}
	}
	require.Equal(t, 1, failures)
	select {
	case err := <-s.Fatal():
		require.ErrorContains(t, err, "1 of 2 volumes failed, 0 tolerated")
	case <-time.After(30 * time.Second):
		t.Fatal("no Fatal past the tolerated failures")
	}
	require.Positive(t, changes.Load())
	st := s.Status()
	require.Equal(t, Failed, st[0].State)
	require.Contains(t, st[0].Reason, "read-only")
	require.Equal(t, Healthy, st[1].State)
	for _, id := range onDisk {
		_, err := s.Info(id)
		require.ErrorIs(t, err, blockstore.ErrNotFound)
	}
	for _, r := range s.List() {
		require.Equal(t, 1, r.Volume)
	}
	for id := blockstore.BlockID(300); id < 340; id++ {
		require.NoError(t, s.Create(context.Background(), id), "the other volume takes every new replica")
	}
}

// TestReadErrorChecksTheVolume: a read that fails on an I/O error has its
// volume checked before it answers; the disk failing, the replica went
// with it.
func TestReadErrorChecksTheVolume(t *testing.T) {
	disk := testdisk.New(t, 128)
	s := open(t, Config{Dirs: []string{disk.Dir, filepath.Join(t.TempDir(), "other")},
		DiskSpace: func(string) (int64, int64) { return 1 << 30, 1 << 29 }})
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	var ids []blockstore.BlockID
	for id := blockstore.BlockID(1); len(ids) < 30; id++ {
		require.NoError(t, s.Create(context.Background(), id))
		_, err := s.Write(blockstore.Packet{BlockID: id, Seq: 1, Data: data, CRC32C: blockstore.Checksum(data), Last: true})
		require.NoError(t, err)
		if s.Volume(id) == 0 {
			ids = append(ids, id)
		}
	}
	disk.FailReads(8)
	var volumeFailed int
	for _, id := range ids {
		_, err := s.ReadAt(id, make([]byte, 1<<20), 0)
		switch {
		case errors.Is(err, ErrVolumeFailed), errors.Is(err, blockstore.ErrNotFound):
			volumeFailed++
		case err != nil && !errors.Is(err, blockstore.ErrCorrupt):
			t.Fatalf("read of block %d: %v: neither the volume's failure nor a corrupt replica", id, err)
		}
	}
	require.Positive(t, volumeFailed)
	require.Equal(t, Failed, s.Status()[0].State)
}

// TestFullVolumeComesBack: a volume whose disk fills is Full at the first
// ENOSPC and takes no new replica, serves what it holds, and is Healthy
// again once a check finds room (space freed, a margin above the
// reserve).
func TestFullVolumeComesBack(t *testing.T) {
	disk := testdisk.New(t, 32)
	clk := clock.NewFake(time.Unix(1e9, 0))
	var changes atomic.Int64
	// The clock moves by hand, faster than the disk works: a check under
	// way must not time out.
	s := open(t, Config{Dirs: []string{disk.Dir}, Clock: clk, CheckTimeout: 1000 * time.Hour, OnChange: func() { changes.Add(1) }})
	sealed(t, s, 1, "kept")
	require.NoError(t, s.Create(context.Background(), 2))
	filler := disk.Fill()
	chunk := make([]byte, 64<<10)
	var err error
	for seq, off := int64(1), int64(0); err == nil && seq < 10_000; seq, off = seq+1, off+int64(len(chunk)) {
		_, err = s.Write(blockstore.Packet{BlockID: 2, Seq: seq, Offset: off, Data: chunk, CRC32C: blockstore.Checksum(chunk)})
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	st := s.Status()[0]
	require.Equal(t, Full, st.State, "%+v", st)
	require.Contains(t, st.Reason, "no space")
	require.EqualValues(t, 1, changes.Load())
	require.ErrorIs(t, s.Create(context.Background(), 3), syscall.ENOSPC)
	got := make([]byte, 4)
	_, err = s.ReadAt(1, got, 0)
	require.NoError(t, err)
	require.Equal(t, "kept", string(got))

	require.NoError(t, os.Remove(filler))
	// Checked again fullRecheck after the last check, on the clock.
	require.Eventually(t, func() bool {
		clk.Advance(fullRecheck)
		return s.Status()[0].State == Healthy
	}, 10*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 2, changes.Load())
	require.NoError(t, s.Create(context.Background(), 3))
}

// TestOpenToleratesFailedVolumes: a volume that does not open counts as
// failed: the Set opens while no more than tolerated failed, and not
// otherwise.
func TestOpenToleratesFailedVolumes(t *testing.T) {
	d := dirs(t, 2)
	require.NoError(t, os.WriteFile(d[1], []byte("a file, not a directory"), 0o644))
	s := open(t, Config{Dirs: d, FailedTolerated: -1})
	st := s.Status()
	require.Equal(t, Healthy, st[0].State)
	require.Equal(t, Failed, st[1].State)
	require.NotEmpty(t, st[1].Reason)
	_, err := Open(Config{Dirs: []string{d[1]}, FailedTolerated: -1})
	require.ErrorContains(t, err, "1 of 1 volumes failed")
}

// TestDuplicateReplicasAcrossVolumes: two volumes that come back with the
// same block keep one replica: the sealed one, then the longer.
func TestDuplicateReplicasAcrossVolumes(t *testing.T) {
	d := dirs(t, 2)
	for i, dir := range d {
		st, err := blockstore.Open(dir)
		require.NoError(t, err)
		require.NoError(t, st.Create(context.Background(), 7))
		data := []byte("abc")
		_, err = st.Write(blockstore.Packet{BlockID: 7, Seq: 1, Data: data, CRC32C: blockstore.Checksum(data), Sync: true, Last: i == 1})
		require.NoError(t, err)
		require.NoError(t, st.Close())
	}
	s := open(t, Config{Dirs: d})
	require.Len(t, s.List(), 1)
	info, err := s.Info(7)
	require.NoError(t, err)
	require.True(t, info.Sealed)
	require.Equal(t, 1, s.Volume(7))
}
