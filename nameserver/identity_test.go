package nameserver_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

func nameServerClient(cl *testcluster.Cluster) bfspb.NameServerClient {
	return bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr))
}

// adminClient is nameServerClient presenting the admin certificate.
func adminClient(cl *testcluster.Cluster) bfspb.NameServerClient {
	return bfspb.NewNameServerClient(cl.DialAs(cl.NameServerAddr, certs.AdminUser))
}

// TestRegisterChecksClusterID: the chunkservers record the nameserver's
// cluster id; the id survives a restart; a chunkserver presenting another
// id is refused.
func TestRegisterChecksClusterID(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(1))
	ctx := context.Background()
	id := cl.NameServer().ClusterID()
	require.Len(t, id, 32)
	// The chunkserver writes the file once the nameserver has answered.
	var recorded string
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(cl.ChunkserverConfig(0).DataDir, "CLUSTER_ID"))
		recorded = strings.TrimSpace(string(b))
		return err == nil
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, id, recorded)
	cl.RestartNameServer()
	require.Equal(t, id, cl.NameServer().ClusterID(), "the cluster id changed across a restart")

	ns := fakeChunkserver(t, cl)
	resp, err := ns.Register(ctx, &bfspb.RegisterRequest{Address: "127.0.0.1:1", ClusterId: "0123456789abcdef"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_WRONG_CLUSTER, resp.Status)
	require.Contains(t, resp.Message, "0123456789abcdef")
	require.Contains(t, resp.Message, id)
	require.Zero(t, resp.ChunkserverId)
	resp, err = ns.Register(ctx, &bfspb.RegisterRequest{Address: "127.0.0.1:1", ClusterId: id})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, resp.Status)
	require.Equal(t, id, resp.ClusterId)
}

// TestSafeModeHoldsDeletes: after a restart the nameserver calls nothing
// obsolete until the reports cover the blocks it knows or an operator
// leaves safe mode; a block id it never allocated is not obsolete before
// its grace period has passed.
func TestSafeModeHoldsDeletes(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(3))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	defer c.Close()
	blockOf := func(p string) int64 {
		w, err := c.Create(ctx, p)
		require.NoError(t, err)
		_, err = w.Write([]byte("bytes of " + p))
		require.NoError(t, err)
		require.NoError(t, w.Close())
		loc, err := c.Locate(ctx, p)
		require.NoError(t, err)
		return loc.Blocks[0].ID
	}
	keep, gone := blockOf("/keep"), blockOf("/gone")
	require.NoError(t, c.Remove(ctx, "/gone"))
	for i := range 3 {
		cl.StopChunkserver(i)
	}
	cl.RestartNameServer()
	ns := nameServerClient(cl)
	sm, err := ns.GetSafeMode(ctx, &bfspb.GetSafeModeRequest{})
	require.NoError(t, err)
	require.True(t, sm.On)
	require.EqualValues(t, 1, sm.KnownBlocks)
	require.Zero(t, sm.ReportedBlocks)
	require.InDelta(t, 0.999, sm.Threshold, 1e-9)

	// A chunkserver holding only the deleted block and an id the
	// namespace never handed out (kept: its grace period is an hour).
	cs := fakeChunkserver(t, cl)
	reg, err := cs.Register(ctx, &bfspb.RegisterRequest{Address: "127.0.0.1:1", ClusterId: cl.NameServer().ClusterID()})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, reg.Status)
	unknown := int64(1) << 40
	report := func(ids ...int64) []int64 {
		req := &bfspb.BlockReportRequest{ChunkserverId: reg.ChunkserverId, Address: "127.0.0.1:1"}
		for _, id := range ids {
			req.Blocks = append(req.Blocks, &bfspb.ReportedBlock{BlockId: id, Size: 1, Version: 1, Sealed: true})
		}
		resp, err := cs.BlockReport(ctx, req)
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
		require.Equal(t, cl.NameServer().ClusterID(), resp.ClusterId)
		return resp.Obsolete
	}
	require.Empty(t, report(gone, unknown), "obsolete answered in safe mode")
	_, err = adminClient(cl).LeaveSafeMode(ctx, &bfspb.LeaveSafeModeRequest{})
	require.NoError(t, err)
	sm, err = ns.GetSafeMode(ctx, &bfspb.GetSafeModeRequest{})
	require.NoError(t, err)
	require.False(t, sm.On)
	require.True(t, sm.LeftByOperator)
	require.Equal(t, []int64{gone}, report(gone, unknown), "only the deleted block is obsolete")

	// Safe mode ends by itself once the known block is reported.
	cl.RestartNameServer()
	ns = nameServerClient(cl)
	cs = fakeChunkserver(t, cl)
	reg, err = cs.Register(ctx, &bfspb.RegisterRequest{Address: "127.0.0.1:1", ClusterId: cl.NameServer().ClusterID()})
	require.NoError(t, err)
	require.Empty(t, report(gone))
	sm, err = ns.GetSafeMode(ctx, &bfspb.GetSafeModeRequest{})
	require.NoError(t, err)
	require.True(t, sm.On)
	// The report that covers the threshold ends safe mode before its
	// blocks are judged.
	require.Equal(t, []int64{gone}, report(keep, gone))
	sm, err = ns.GetSafeMode(ctx, &bfspb.GetSafeModeRequest{})
	require.NoError(t, err)
	require.False(t, sm.On)
	require.False(t, sm.LeftByOperator)
	require.EqualValues(t, 1, sm.ReportedBlocks)
}
