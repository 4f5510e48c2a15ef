package nameserver_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// TestDegradedWrite: with two live chunkservers a file of replication 3
// gets a block on both, keeps its replication of 3, reports two live
// replicas, and the block counts as under-replicated until its file is
// removed.
func TestDegradedWrite(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	maddr := lis.Addr().String()
	lis.Close()
	cl := testcluster.Start(t, testcluster.WithChunkservers(2), testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
		cfg.MetricsAddr = maddr
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	defer c.Close()
	w, err := c.Create(ctx, "/f", sdk.Replication(3))
	require.NoError(t, err)
	_, err = w.Write([]byte("data"))
	require.NoError(t, err)
	require.NoError(t, w.Close())

	fi, err := c.Stat(ctx, "/f")
	require.NoError(t, err)
	require.Equal(t, 3, fi.Replication)
	require.Equal(t, 2, fi.LiveReplicas)
	ns := bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr))
	loc, err := ns.GetFileLocation(ctx, &bfspb.GetFileLocationRequest{Path: "/f"})
	require.NoError(t, err)
	require.Len(t, loc.Info.Blocks[0].WriteSet, 2)
	require.EqualValues(t, 2, loc.Info.GetLiveReplicas())
	require.Equal(t, "1", gauge(t, cl, maddr, "bfs_nameserver_under_replicated_blocks"))

	require.NoError(t, c.Remove(ctx, "/f"))
	require.Eventually(t, func() bool { return gauge(t, cl, maddr, "bfs_nameserver_under_replicated_blocks") == "0" },
		10*time.Second, 10*time.Millisecond)
}

// gauge scrapes the nameserver's metrics for the value of an unlabelled
// gauge.
func gauge(t *testing.T, cl *testcluster.Cluster, maddr, name string) string {
	t.Helper()
	for _, l := range strings.Split(cl.Metrics(maddr), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	t.Fatalf("no %s in the metrics", name)
	return ""
}
