package nameserver_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// repairCluster starts n chunkservers and a nameserver that checks every
// block often, with metrics on a free port.
func repairCluster(t *testing.T, n int) (*testcluster.Cluster, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	maddr := lis.Addr().String()
	lis.Close()
	cl := testcluster.Start(t, testcluster.WithChunkservers(n), testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
		cfg.MetricsAddr = maddr
		cfg.RepairInterval = 100 * time.Millisecond
	}))
	return cl, maddr
}

// writeFiles writes count small files of replication 3 and returns their
// contents by path.
func writeFiles(ctx context.Context, t *testing.T, c *sdk.Client, count int) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for i := range count {
		p := fmt.Sprintf("/f%d", i)
		data := bytes.Repeat([]byte(p), 1000+i)
		w, err := c.Create(ctx, p, sdk.Replication(3))
		require.NoError(t, err)
		_, err = w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		files[p] = data
	}
	return files
}

// replicasOf returns where a closed file's block is, as the nameserver
// hands it to readers.
func replicasOf(ctx context.Context, t *testing.T, c *sdk.Client, p string) []string {
	t.Helper()
	loc, err := c.Locate(ctx, p)
	require.NoError(t, err)
	return loc.Blocks[0].Replicas
}

// waitReplicas waits until every file has exactly 3 replicas, none of
// them at any of avoid.
func waitReplicas(ctx context.Context, t *testing.T, c *sdk.Client, files map[string][]byte, avoid ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for p := range files {
			reps := replicasOf(ctx, t, c, p)
			if len(reps) != 3 || slices.ContainsFunc(reps, func(a string) bool { return slices.Contains(avoid, a) }) {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond)
}

func readAll(ctx context.Context, t *testing.T, c *sdk.Client, p string) []byte {
	t.Helper()
	r, err := c.Open(ctx, p)
	require.NoError(t, err)
	defer r.Close()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	return got
}

// counter sums the samples of name, every label set, in the nameserver's
// metrics: 0 if there are none.
func counter(t *testing.T, cl *testcluster.Cluster, maddr, name string) int {
	t.Helper()
	sum := 0.0
	for _, l := range strings.Split(cl.Metrics(maddr), "\n") {
		if rest, ok := strings.CutPrefix(l, name); ok && rest != "" && (rest[0] == ' ' || rest[0] == '{') {
			v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			require.NoError(t, err, l)
			sum += v
		}
	}
	return int(sum)
}

// TestRepairAfterChunkserverLoss: the blocks of a chunkserver that died
// are copied back up to 3 replicas on the others; when it comes back, the
// replicas now in excess are trimmed back to 3.
func TestRepairAfterChunkserverLoss(t *testing.T) {
	cl, maddr := repairCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	defer c.Close()
	files := writeFiles(ctx, t, c, 12)

	lost := replicasOf(ctx, t, c, "/f0")[0]
	idx := slices.Index(cl.ChunkserverAddrs(), lost)
	cl.StopChunkserver(idx)
	waitReplicas(ctx, t, c, files, lost)
	for p, data := range files {
		require.Equal(t, data, readAll(ctx, t, c, p), p)
	}
	require.Positive(t, counter(t, cl, maddr, "bfs_nameserver_repair_bytes_total"))
	require.Eventually(t, func() bool { return gauge(t, cl, maddr, "bfs_nameserver_under_replicated_blocks") == "0" },
		10*time.Second, 10*time.Millisecond)
	require.Equal(t, "0", gauge(t, cl, maddr, "bfs_nameserver_missing_blocks"))

	cl.RestartChunkserver(idx)
	require.Eventually(t, func() bool { return counter(t, cl, maddr, "bfs_nameserver_excess_replicas_deleted_total") > 0 },
		30*time.Second, 10*time.Millisecond)
	waitReplicas(ctx, t, c, files)
	for p, data := range files {
		require.Equal(t, data, readAll(ctx, t, c, p), p)
	}
}

// TestRepairReplacesCorruptReplica: a replica reported corrupt is
// replaced from a good one, then deleted from its chunkserver.
func TestRepairReplacesCorruptReplica(t *testing.T) {
	cl, maddr := repairCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	defer c.Close()
	files := writeFiles(ctx, t, c, 1)
	loc, err := c.Locate(ctx, "/f0")
	require.NoError(t, err)
	block, bad := loc.Blocks[0].ID, loc.Blocks[0].Replicas[1]

	reportOwnCorrupt(ctx, t, cl, block, bad)

	waitReplicas(ctx, t, c, files, bad)
	require.Eventually(t, func() bool { return blockInfo(t, cl, bad, block).Status == bfspb.StatusCode_NOT_FOUND },
		30*time.Second, 10*time.Millisecond, "the corrupt replica is deleted")
	require.Eventually(t, func() bool { return gauge(t, cl, maddr, "bfs_nameserver_corrupt_replicas") == "0" },
		10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, counter(t, cl, maddr, "bfs_nameserver_corrupt_replicas_deleted_total"))
	require.Equal(t, files["/f0"], readAll(ctx, t, c, "/f0"))
}

// TestDegradedWriteRepairedAfterClose: a file written while a chunkserver
// was down gets its third replica once it is closed and the chunkserver
// is back.
func TestDegradedWriteRepairedAfterClose(t *testing.T) {
	cl, maddr := repairCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	defer c.Close()
	down := cl.ChunkserverAddrs()[2]
	cl.StopChunkserver(2)
	require.Eventually(t, func() bool { return cl.NameServer().LiveChunkservers() == 2 }, 10*time.Second, 10*time.Millisecond)

	data := bytes.Repeat([]byte("degraded"), 1000)
	w, err := c.Create(ctx, "/f", sdk.Replication(3))
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))
	require.Equal(t, "1", gauge(t, cl, maddr, "bfs_nameserver_under_replicated_blocks"))
	cl.RestartChunkserver(2)
	require.Eventually(t, func() bool { return cl.NameServer().LiveChunkservers() == 3 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, w.Close())

	files := map[string][]byte{"/f": data}
	waitReplicas(ctx, t, c, files)
	require.Contains(t, replicasOf(ctx, t, c, "/f"), cl.ChunkserverAddrs()[2])
	require.Equal(t, down, cl.ChunkserverAddrs()[2])
	require.Equal(t, data, readAll(ctx, t, c, "/f"))
	fi, err := c.Stat(ctx, "/f")
	require.NoError(t, err)
	require.Equal(t, 3, fi.LiveReplicas)
}

// singleReplicaOn writes files of replication 1 until one lands on a
// chunkserver other than those in avoid, and returns where it landed: the
// only holder of a block, which keeps a restarted nameserver in safe mode
// while it is down.
func singleReplicaOn(ctx context.Context, t *testing.T, c *sdk.Client, avoid []string) string {
	t.Helper()
	for i := range 32 {
		p := fmt.Sprintf("/single-%d", i)
		w, err := c.Create(ctx, p, sdk.Replication(1))
		require.NoError(t, err)
		_, err = w.Write([]byte("one replica"))
		require.NoError(t, err)
		require.NoError(t, w.Close())
		if addr := replicasOf(ctx, t, c, p)[0]; !slices.Contains(avoid, addr) {
			return addr
		}
	}
	t.Fatalf("32 files of one replica, all on %v", avoid)
	return ""
}

// restartInSafeMode stops the chunkserver at gone and restarts the
// nameserver, which stays in safe mode (the block only gone held is not
// reported), and waits until the others have reported every other block.
func restartInSafeMode(ctx context.Context, t *testing.T, cl *testcluster.Cluster, gone string) bfspb.NameServerClient {
	t.Helper()
	cl.StopChunkserver(slices.Index(cl.ChunkserverAddrs(), gone))
	cl.RestartNameServer()
	ns := adminClient(cl) // leaves safe mode
	require.Eventually(t, func() bool {
		sm, err := ns.GetSafeMode(ctx, &bfspb.GetSafeModeRequest{})
		return err == nil && sm.On && sm.ReportedBlocks == sm.KnownBlocks-1 && cl.NameServer().LiveChunkservers() == len(cl.ChunkserverAddrs())-1
	}, 30*time.Second, 10*time.Millisecond)
	return ns
}

// TestSafeModeHoldsRepair: after a restart with a chunkserver gone, safe
// mode (a block known only to it is unreported) holds every copy; once an
// operator leaves it, the blocks short of a replica are repaired, and the
// block with no replica left is counted missing.
func TestSafeModeHoldsRepair(t *testing.T) {
	cl, maddr := repairCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	defer c.Close()
	files := writeFiles(ctx, t, c, 8)
	gone := singleReplicaOn(ctx, t, c, nil)
	short := 0
	for p := range files {
		if slices.Contains(replicasOf(ctx, t, c, p), gone) {
			short++
		}
	}
	require.Positive(t, short, "some file has a replica on %s", gone)

	ns := restartInSafeMode(ctx, t, cl, gone)
	require.Zero(t, counter(t, cl, maddr, "bfs_nameserver_repair_copies_total"), "a copy in safe mode")
	for p := range files {
		require.LessOrEqual(t, len(replicasOf(ctx, t, c, p)), 3)
	}

	_, err = ns.LeaveSafeMode(ctx, &bfspb.LeaveSafeModeRequest{})
	require.NoError(t, err)
	waitReplicas(ctx, t, c, files, gone)
	require.Eventually(t, func() bool { return gauge(t, cl, maddr, "bfs_nameserver_missing_blocks") == "1" },
		10*time.Second, 10*time.Millisecond)
	require.GreaterOrEqual(t, counter(t, cl, maddr, "bfs_nameserver_repair_copies_total"), short)
}

// TestSafeModeHoldsRemovedFilesDeletes: replica deletes asked for in safe mode (here,
// a file removed) are held, not dropped, and carried out as soon as safe
// mode ends, without waiting for the next block reports.
func TestSafeModeHoldsRemovedFilesDeletes(t *testing.T) {
	cl, _ := repairCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	defer c.Close()
	writeFiles(ctx, t, c, 1)
	victim := "/f0"
	loc, err := c.Locate(ctx, victim)
	require.NoError(t, err)
	block := loc.Blocks[0]
	// The chunkserver to stop holds none of victim's replicas: they stay
	// reachable.
	gone := singleReplicaOn(ctx, t, c, block.Replicas)
	ns := restartInSafeMode(ctx, t, cl, gone)
	require.NoError(t, c.Remove(ctx, victim))
	held := func() int {
		n := 0
		for _, addr := range block.Replicas {
			info, err := bfspb.NewChunkServerClient(cl.Dial(addr)).GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: block.ID})
			require.NoError(t, err)
			if info.Status == bfspb.StatusCode_OK {
				n++
			}
		}
		return n
	}
	time.Sleep(200 * time.Millisecond) // a delete sent at once would have landed
	require.Equal(t, len(block.Replicas), held(), "a replica deleted in safe mode")

	_, err = ns.LeaveSafeMode(ctx, &bfspb.LeaveSafeModeRequest{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return held() == 0 }, 10*time.Second, 10*time.Millisecond,
		"the held deletes are carried out once safe mode ends")
}
