package chunkserver

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// storeWithBlocks returns a data directory holding sealed blocks 1..n.
func storeWithBlocks(t *testing.T, n int) string {
	dir := t.TempDir()
	store, err := blockstore.Open(dir)
	require.NoError(t, err)
	for id := range blockstore.BlockID(n) {
		data := []byte("block")
		require.NoError(t, store.Create(context.Background(), id+1))
		_, err := store.Write(blockstore.Packet{BlockID: id + 1, Seq: 1, Data: data, CRC32C: blockstore.Checksum(data), Last: true, Sync: true, Version: 1})
		require.NoError(t, err)
	}
	require.NoError(t, store.Close())
	return dir
}

// TestClusterIDGuardsDeletes: the chunkserver records the cluster id of
// its first registration, and from then on applies no obsolete list,
// delete or truncate that comes with another id.
func TestClusterIDGuardsDeletes(t *testing.T) {
	dir := storeWithBlocks(t, 3)
	ns, nsAddr := startRecorder(t)
	clk := clock.NewFake(time.Unix(1e9, 0))
	cs := startChunkServer(t, Config{DataDir: dir, NameServerAddr: nsAddr, Clock: clk,
		HeartbeatInterval: time.Second, ReportInterval: 10 * time.Second})
	ns.wait(t, "register and block report", func() bool { return len(ns.reports) == 1 })
	b, err := os.ReadFile(filepath.Join(dir, clusterIDFile))
	require.NoError(t, err)
	require.Equal(t, "test-cluster\n", string(b))
	ns.mu.Lock()
	require.Empty(t, ns.registers[0].ClusterId, "a chunkserver never registered presents no id")
	ns.mu.Unlock()

	// Another cluster's nameserver calls everything obsolete.
	ns.record(func() { ns.clusterID, ns.obsolete = "other-cluster", []int64{1, 2, 3} })
	ctx := context.Background()
	require.NoError(t, clk.BlockUntil(ctx, 3)) // heartbeat, report and volume check timers
	clk.Advance(10 * time.Second)
	ns.wait(t, "periodic report", func() bool { return len(ns.reports) == 2 })
	require.NoError(t, clk.BlockUntil(ctx, 3)) // the report's answer has been handled
	require.Len(t, cs.vols.List(), 3, "blocks deleted on the word of another cluster")

	del, err := cs.client.DeleteBlocks(ctx, &bfspb.DeleteBlocksRequest{BlockIds: []int64{1}, ClusterId: "other-cluster"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_WRONG_CLUSTER, del.Status)
	require.Contains(t, del.Message, "test-cluster")
	require.Contains(t, del.Message, "other-cluster")
	tr, err := cs.client.Truncate(ctx, &bfspb.TruncateRequest{BlockId: 1, Size: 0, ClusterId: "other-cluster"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_WRONG_CLUSTER, tr.Status)
	require.Len(t, cs.vols.List(), 3)
	info, err := cs.vols.Info(1)
	require.NoError(t, err)
	require.EqualValues(t, 5, info.Size)

	del, err = cs.client.DeleteBlocks(ctx, &bfspb.DeleteBlocksRequest{BlockIds: []int64{1}, ClusterId: "test-cluster"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, del.Status)
	require.Len(t, cs.vols.List(), 2)
}

// TestClusterIDRefusesOtherNameserver: a chunkserver that joined a
// cluster does not register with a nameserver of another one.
func TestClusterIDRefusesOtherNameserver(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, clusterIDFile), []byte("cluster-a\n"), 0o644))
	ns, nsAddr := startRecorder(t)
	ns.record(func() { ns.clusterID = "cluster-b" })
	cs := startChunkServer(t, Config{DataDir: dir, NameServerAddr: nsAddr})
	// A second attempt means the first answer was refused.
	ns.wait(t, "two registration attempts", func() bool { return len(ns.registers) >= 2 })
	ns.mu.Lock()
	require.Equal(t, "cluster-a", ns.registers[0].ClusterId)
	require.Empty(t, ns.reports, "a block report was sent to another cluster's nameserver")
	ns.mu.Unlock()
	select {
	case <-cs.member.registered:
		t.Fatal("registered with another cluster's nameserver")
	default:
	}
}

func TestClusterIDFileEmptyIsRefused(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, clusterIDFile), nil, 0o644))
	_, err := New(Config{DataDir: dir, NameServerAddr: "127.0.0.1:1", Insecure: true})
	require.ErrorContains(t, err, clusterIDFile)
}
