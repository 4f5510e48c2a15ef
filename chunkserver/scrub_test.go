package chunkserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/chunkserver/volume"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// scrubSize is the size of the test replicas: two whole pieces and half
// of a third.
const scrubSize = 2*scrubPiece + scrubPiece/2

// sealedStore makes the store in dir hold sealed replicas ids of
// scrubSize bytes each, and closes it.
func sealedStore(t *testing.T, dir string, ids ...blockstore.BlockID) {
	t.Helper()
	st, err := blockstore.Open(dir)
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	data := make([]byte, scrubSize)
	for i := range data {
		data[i] = byte(i * 7)
	}
	const n = 256 << 10
	for _, id := range ids {
		require.NoError(t, st.Create(context.Background(), id))
		var seq int64
		for off := 0; off < len(data); off += n {
			seq++
			piece := data[off:min(off+n, len(data))]
			_, err := st.Write(blockstore.Packet{BlockID: id, Seq: seq, Offset: int64(off), Data: piece,
				CRC32C: blockstore.Checksum(piece), Last: off+n >= len(data)})
			require.NoError(t, err)
		}
	}
}

// openVolumes opens a volume set of the one volume dir.
func openVolumes(t *testing.T, dir string) *volume.Set {
	t.Helper()
	vols, err := volume.Open(volume.Config{Dirs: []string{dir}})
	require.NoError(t, err)
	t.Cleanup(func() { vols.Close() })
	return vols
}

// scrubRun is a scrubber running on a fake clock.
type scrubRun struct {
	s       *scrubber
	clk     *clock.Fake
	start   time.Time
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	corrupt []blockstore.BlockID
}

func startScrub(t *testing.T, dir string) *scrubRun {
	t.Helper()
	start := time.Unix(1e9, 0)
	r := &scrubRun{clk: clock.NewFake(start), start: start, done: make(chan struct{})}
	vols := openVolumes(t, dir)
	m := newMetrics(gauges{blocks: func() float64 { return 0 }, bytes: func() float64 { return 0 }, writeStreams: func() float64 { return 0 }}, vols)
	r.s = &scrubber{vol: vols.Volumes()[0], vols: vols, clock: r.clk, metrics: m, dataDir: dir, rate: scrubPiece, // a piece a second
		corrupt: func(id blockstore.BlockID, reason string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.corrupt = append(r.corrupt, id)
		}}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { defer close(r.done); r.s.run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

// until advances the fake clock in steps of 100ms, each once the scrubber
// sleeps, until cond holds; it returns the fake time elapsed.
func (r *scrubRun) until(t *testing.T, cond func() bool) time.Duration {
	return r.untilStep(t, 100*time.Millisecond, cond)
}

func (r *scrubRun) untilStep(t *testing.T, step time.Duration, cond func() bool) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		require.NoError(t, r.clk.BlockUntil(ctx, 1))
		if cond() {
			return r.clk.Now().Sub(r.start)
		}
		r.clk.Advance(step)
	}
}

func (r *scrubRun) vols() *volume.Set { return r.s.vols }

func (r *scrubRun) stop() {
	r.cancel()
	<-r.done
}

func (r *scrubRun) verified(t *testing.T) int { return int(value(t, r.s.metrics.scrubReplicas)) }

func dataFile(dir string, id blockstore.BlockID) string {
	u := uint64(id)
	return filepath.Join(dir, "blocks", fmt.Sprintf("%02x", (u>>16)&0xff), fmt.Sprintf("%02x", (u>>8)&0xff), fmt.Sprintf("%016x.data", u))
}

func TestScrubberFindsPlantedCorruption(t *testing.T) {
	dir := t.TempDir()
	sealedStore(t, dir, 1, 2, 3)
	flip(t, dataFile(dir, 2), scrubPiece+5)

	r := startScrub(t, dir)
	elapsed := r.until(t, func() bool { return r.verified(t) == 2 })
	// Held to the rate: block 1 whole (2.5 pieces), block 2's first piece,
	// block 3 whole, at a piece a second.
	require.Equal(t, 6*time.Second, elapsed)
	require.EqualValues(t, 6*scrubPiece, value(t, r.s.metrics.scrubBytes))
	require.EqualValues(t, 1, value(t, r.s.metrics.scrubCorrupt))
	require.EqualValues(t, 1, value(t, r.s.metrics.scrubPasses))
	r.mu.Lock()
	require.Equal(t, []blockstore.BlockID{2}, r.corrupt)
	r.mu.Unlock()

	// The replica reads as corrupt from now on, even where its bytes are
	// intact; the others read.
	_, err := r.s.vols.ReadAt(2, make([]byte, 100), 0)
	require.ErrorIs(t, err, blockstore.ErrCorrupt)
	_, err = r.s.vols.ReadAt(3, make([]byte, 100), 0)
	require.NoError(t, err)

	// The next pass starts an hour after the first did; it reports the
	// replica again (a restarted nameserver forgot it) but counts it once.
	elapsed = r.untilStep(t, time.Hour-elapsed, func() bool { return value(t, r.s.metrics.scrubBytes) > 6*scrubPiece })
	require.Equal(t, time.Hour, elapsed, "the next pass waits for scrubMinPass")
	r.untilStep(t, time.Second, func() bool { return value(t, r.s.metrics.scrubPasses) == 2 })
	r.mu.Lock()
	require.Equal(t, []blockstore.BlockID{2, 2}, r.corrupt)
	r.mu.Unlock()
	require.EqualValues(t, 1, value(t, r.s.metrics.scrubCorrupt))
}

func TestScrubberResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	sealedStore(t, dir, 1, 2, 3)

	r := startScrub(t, dir)
	r.until(t, func() bool { return r.verified(t) == 1 })
	r.stop()
	raw, err := os.ReadFile(filepath.Join(dir, scrubPositionFile))
	require.NoError(t, err)
	require.Equal(t, "1\n", string(raw))

	// A new scrubber starts after block 1: blocks 2 and 3 end the pass.
	r.vols().Close()
	r = startScrub(t, dir)
	elapsed := r.until(t, func() bool { return value(t, r.s.metrics.scrubPasses) == 1 })
	require.Equal(t, 5*time.Second, elapsed)
	require.Equal(t, 2, r.verified(t))
	raw, err = os.ReadFile(filepath.Join(dir, scrubPositionFile))
	require.NoError(t, err)
	require.Equal(t, "0\n", string(raw), "a finished pass starts the next at the beginning")
}

// flip damages one byte of a file in place.
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0x5a
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// TestCorruptReplicaReported: a replica that fails a read's checksum, or
// the scrubber's, is marked corrupt and reported to the nameserver.
func TestCorruptReplicaReported(t *testing.T) {
	dir := t.TempDir()
	sealedStore(t, dir, 1, 2, 3)
	flip(t, dataFile(dir, 2), 5)
	flip(t, dataFile(dir, 3), scrubPiece+5)

	ns, nsAddr := startRecorder(t)
	clk := clock.NewFake(time.Unix(1e9, 0))
	cs := startChunkServer(t, Config{DataDir: dir, NameServerAddr: nsAddr, Clock: clk, ScrubRate: scrubPiece})
	ns.wait(t, "registration", func() bool { return len(ns.registers) == 1 })

	// A read finds block 2 bad: the scrubber cannot have, it sleeps on the
	// fake clock within block 1.
	_, code := readAll(t, cs.client, 2, 0, 0)
	require.Equal(t, bfspb.StatusCode_CORRUPT, code)
	ns.wait(t, "report of block 2", func() bool { return len(ns.bad) == 1 })
	ns.mu.Lock()
	requireProto(t, &bfspb.ReportBadReplicasRequest{ChunkserverId: 1, Address: cs.addr,
		Replicas: []*bfspb.BadReplica{{BlockId: 2, Address: cs.addr, Reason: ns.bad[0].Replicas[0].Reason}}}, ns.bad[0])
	require.Contains(t, ns.bad[0].Replicas[0].Reason, "checksum mismatch")
	ns.mu.Unlock()

	// The scrubber finds block 3 (whose first piece reads fine).
	_, code = readAll(t, cs.client, 3, 0, scrubPiece)
	require.Equal(t, bfspb.StatusCode_OK, code)
	// Let the scrubber's sleeps pass: advance the clock whenever it, the
	// membership loop (heartbeat and report timers) and the volume checks
	// wait on it.
	ticking, stop := context.WithCancel(context.Background())
	var ticker sync.WaitGroup
	ticker.Go(func() {
		for clk.BlockUntil(ticking, 4) == nil {
			clk.Advance(100 * time.Millisecond)
		}
	})
	ns.wait(t, "report of block 3", func() bool {
		for _, req := range ns.bad {
			for _, r := range req.Replicas {
				if r.BlockId == 3 {
					return true
				}
			}
		}
		return false
	})
	stop()
	ticker.Wait()
	_, code = readAll(t, cs.client, 3, 0, scrubPiece)
	require.Equal(t, bfspb.StatusCode_CORRUPT, code, "a replica found bad reads as CORRUPT")
	_, code = readAll(t, cs.client, 1, 0, 0)
	require.Equal(t, bfspb.StatusCode_OK, code)
}
