package nameserver_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/testdisk"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// putSmall writes a small file of replication 3.
func putSmall(ctx context.Context, t *testing.T, c *sdk.Client, p string) {
	t.Helper()
	w, err := c.Create(ctx, p, sdk.Replication(3))
	require.NoError(t, err)
	_, err = w.Write(bytes.Repeat([]byte(p), 1000))
	require.NoError(t, err)
	require.NoError(t, w.Close())
}

// volumesOf returns the volumes of the chunkserver at addr as the
// nameserver's report has them.
func volumesOf(ctx context.Context, t *testing.T, c *sdk.Client, addr string) []sdk.Volume {
	t.Helper()
	servers, err := c.Chunkservers(ctx)
	require.NoError(t, err)
	for _, s := range servers {
		if s.Address == addr {
			return s.Volumes
		}
	}
	t.Fatalf("%s is not in the report", addr)
	return nil
}

// TestReadOnlyVolumeOutOfService: a chunkserver with two volumes, one of
// them on a disk that turns read-only under the writers. The volume goes
// out of service (the report says failed), no put fails, the chunkserver
// keeps serving its other volume, and every file ends with 3 good
// replicas: what the failed volume held no longer counts and is made
// again elsewhere. (Before, a chunkserver had one data directory and a
// read-only one stayed in service: its replicas counted, new blocks kept
// going there and failing.)
func TestReadOnlyVolumeOutOfService(t *testing.T) {
	disk := testdisk.New(t, 256)
	const gib = 1 << 30
	cl := testcluster.Start(t, testcluster.WithChunkservers(4),
		testcluster.WithChunkserverConfig(func(i int, cfg *chunkserver.Config) {
			if i == 3 {
				cfg.DataDirs = []string{disk.Dir, filepath.Join(t.TempDir(), "other")}
			}
			// Every volume looks alike: chunkserver 3, with two, takes
			// twice the others' share of new blocks.
			cfg.TestingKnobs.DiskSpace = func(string) (int64, int64) { return 100 * gib, 50 * gib }
		}),
		testcluster.WithNameServerConfig(func(cfg *nameserver.Config) { cfg.RepairInterval = 100 * time.Millisecond }))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, err)
	defer c.Close()
	addr := cl.ChunkserverAddrs()[3]
	var paths []string
	for i := range 12 {
		p := fmt.Sprintf("/before%d", i)
		putSmall(ctx, t, c, p)
		paths = append(paths, p)
	}
	before := volumesOf(ctx, t, c, addr)
	require.Len(t, before, 2)
	require.Positive(t, before[0].Blocks, "the disk to fail holds replicas")

	disk.ReadOnly()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []string
	)
	for w := range 4 {
		wg.Go(func() {
			for i := range 6 {
				p := fmt.Sprintf("/after-w%d-%d", w, i)
				err := func() error {
					wr, err := c.Create(ctx, p, sdk.Replication(3))
					if err != nil {
						return err
					}
					if _, err := wr.Write(bytes.Repeat([]byte(p), 1000)); err != nil {
						return err
					}
					return wr.Close()
				}()
				mu.Lock()
				if err != nil {
					failed = append(failed, fmt.Sprintf("%s: %v", p, err))
				} else {
					paths = append(paths, p)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Empty(t, failed, "puts failed with a volume out of service and three chunkservers to spare")
	require.Eventually(t, func() bool {
		v := volumesOf(ctx, t, c, addr)
		return v[0].State == sdk.VolumeFailed && v[1].State == sdk.VolumeHealthy
	}, 10*time.Second, 20*time.Millisecond, "the read-only volume reported failed, the other healthy")
	require.Eventually(t, func() bool {
		for _, p := range paths {
			fi, err := c.Stat(ctx, p)
			require.NoError(t, err)
			if fi.LiveReplicas != 3 {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "every file with 3 good replicas")
	totals, err := c.Fsck(ctx, "/", func(sdk.FsckFile) error { return nil })
	require.NoError(t, err)
	require.Zero(t, totals.UnderReplicatedBlocks+totals.MissingBlocks, "%+v", totals)
	servers, err := c.Chunkservers(ctx)
	require.NoError(t, err)
	for _, s := range servers {
		require.Equal(t, sdk.ChunkserverLive, s.State, "%s still serves", s.Address)
	}
}

// TestEveryReplicaCorruptIsMissing: a block whose replicas are all known
// corrupt has no good replica: fsck counts it missing (and is not
// healthy), and so does the missing_blocks gauge. (Both said 0 before:
// a block counted as missing only when no replica at all was known.)
func TestEveryReplicaCorruptIsMissing(t *testing.T) {
	cl, maddr := repairCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, err)
	defer c.Close()
	writeFiles(ctx, t, c, 1)
	loc, err := c.Locate(ctx, "/f0")
	require.NoError(t, err)
	for _, a := range loc.Blocks[0].Replicas {
		reportOwnCorrupt(ctx, t, cl, loc.Blocks[0].ID, a)
	}

	totals, err := c.Fsck(ctx, "/", func(sdk.FsckFile) error { return nil })
	require.NoError(t, err)
	require.EqualValues(t, 1, totals.MissingBlocks, "%+v", totals)
	require.False(t, totals.Healthy())
	require.Eventually(t, func() bool { return counter(t, cl, maddr, "bfs_nameserver_missing_blocks") == 1 },
		10*time.Second, 20*time.Millisecond)
	fi, err := c.Stat(ctx, "/f0")
	require.NoError(t, err)
	require.Zero(t, fi.LiveReplicas)
}

// TestShortReplicaDoesNotCount: a replica sealed short of its block's
// length is no full copy: once a block report shows it, readers are not
// sent to it, fsck calls the block under-replicated and stat counts 2
// live replicas. (Before, fsck said 0 under-replicated and stat 3.)
func TestShortReplicaDoesNotCount(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(3), testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
		cfg.ReportInterval = 100 * time.Millisecond
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, err)
	defer c.Close()
	data := bytes.Repeat([]byte("0123456789abcdef"), 8192)
	w, err := c.Create(ctx, "/f", sdk.Replication(3))
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	loc, err := c.Locate(ctx, "/f")
	require.NoError(t, err)
	block, short := loc.Blocks[0].ID, loc.Blocks[0].Replicas[0]

	// The nameserver's own call, at its term.
	gs, err := c.GroupStatus(ctx)
	require.NoError(t, err)
	require.Len(t, gs.Members, 1)
	cs := bfspb.NewChunkServerClient(cl.DialCreds(short, cl.NameServerCreds()))
	tr, err := cs.Truncate(ctx, &bfspb.TruncateRequest{BlockId: block, Size: int64(len(data) / 2), Term: gs.Members[0].Term})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, tr.Status, tr.Message)
	require.Eventually(t, func() bool {
		loc, err := c.Locate(ctx, "/f")
		require.NoError(t, err)
		return !slices.Contains(loc.Blocks[0].Replicas, short)
	}, 10*time.Second, 20*time.Millisecond, "a report shows the replica short")
	var files []sdk.FsckFile
	totals, err := c.Fsck(ctx, "/", func(f sdk.FsckFile) error { files = append(files, f); return nil })
	require.NoError(t, err)
	require.EqualValues(t, 1, totals.UnderReplicatedBlocks, "%+v", totals)
	require.Len(t, files, 1)
	require.Equal(t, []string{short}, files[0].Blocks[0].Stale)
	fi, err := c.Stat(ctx, "/f")
	require.NoError(t, err)
	require.Equal(t, 2, fi.LiveReplicas)
}

// TestDeadChunkserversAfterRestart: a chunkserver declared dead is still
// in the report after the nameserver restarts (it vanished before: the
// list lived in memory), and so is one that was registered before the
// restart and does not come back within the dead timeout; one that comes
// back is live.
func TestDeadChunkserversAfterRestart(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(4))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, err)
	defer c.Close()
	addrs := cl.ChunkserverAddrs()
	state := func(addr string) sdk.ChunkserverState {
		servers, err := c.Chunkservers(ctx)
		require.NoError(t, err)
		for _, s := range servers {
			if s.Address == addr {
				return s.State
			}
		}
		return -1
	}
	cl.StopChunkserver(3)
	require.Eventually(t, func() bool { return state(addrs[3]) == sdk.ChunkserverDead }, 10*time.Second, 20*time.Millisecond)
	cl.StopChunkserver(2) // stopped while the nameserver restarts
	cl.RestartNameServer()
	require.Equal(t, sdk.ChunkserverDead, state(addrs[3]), "dead before the restart, dead after it")
	require.Eventually(t, func() bool { return state(addrs[2]) == sdk.ChunkserverDead }, 10*time.Second, 50*time.Millisecond,
		"registered before the restart, not back")
	require.Equal(t, sdk.ChunkserverLive, state(addrs[0]))
	cl.RestartChunkserver(3)
	require.Equal(t, sdk.ChunkserverLive, state(addrs[3]), "back")
}

// TestSafeModeWaitsForChunkservers: after a restart, safe mode lasts
// until --safemode-min-chunkservers have sent a full report, even when
// the first report covers every block.
func TestSafeModeWaitsForChunkservers(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(3), testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
		cfg.SafeModeMinChunkservers = 3
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, err)
	defer c.Close()
	require.Eventually(t, func() bool {
		sm, err := c.SafeMode(ctx)
		require.NoError(t, err)
		return !sm.On
	}, 10*time.Second, 20*time.Millisecond, "three chunkservers report")
	putSmall(ctx, t, c, "/f")
	cl.StopChunkserver(1)
	cl.StopChunkserver(2)
	cl.RestartNameServer()
	sm, err := c.SafeMode(ctx)
	require.NoError(t, err)
	require.True(t, sm.On)
	require.Eventually(t, func() bool {
		sm, err := c.SafeMode(ctx)
		require.NoError(t, err)
		return sm.Reported == 1 && sm.ReportedChunkservers == 1
	}, 10*time.Second, 20*time.Millisecond, "one chunkserver reports every block")
	sm, err = c.SafeMode(ctx)
	require.NoError(t, err)
	require.True(t, sm.On, "still in safe mode with one chunkserver of three: %+v", sm)
	cl.RestartChunkserver(1)
	cl.RestartChunkserver(2)
	require.Eventually(t, func() bool {
		sm, err := c.SafeMode(ctx)
		require.NoError(t, err)
		return !sm.On
	}, 10*time.Second, 20*time.Millisecond)
}
