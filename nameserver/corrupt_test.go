package nameserver_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// TestReportedCorruptReplicaIsNotLocated: a replica reported corrupt is no
// longer given to readers, and the file reads from the others.
func TestReportedCorruptReplicaIsNotLocated(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(3))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	defer c.Close()

	data := bytes.Repeat([]byte("corrupt?"), 4096)
	w, err := c.Create(ctx, "/f")
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	loc, err := c.Locate(ctx, "/f")
	require.NoError(t, err)
	require.Len(t, loc.Blocks[0].Replicas, 3)
	block, bad := loc.Blocks[0].ID, loc.Blocks[0].Replicas[1]

	conn, err := grpc.NewClient(cl.NameServerAddr, cl.DialOption())
	require.NoError(t, err)
	defer conn.Close()
	ns := bfspb.NewNameServerClient(conn)
	reportOwnCorrupt(ctx, t, cl, block, bad)
	resp, err := ns.ReportBadReplicas(ctx, &bfspb.ReportBadReplicasRequest{Replicas: []*bfspb.BadReplica{
		{BlockId: block + 1000, Address: bad, Reason: "no such block: ignored"},
	}})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)

	loc, err = c.Locate(ctx, "/f")
	require.NoError(t, err)
	require.Len(t, loc.Blocks[0].Replicas, 2)
	require.NotContains(t, loc.Blocks[0].Replicas, bad)
	r, err := c.Open(ctx, "/f")
	require.NoError(t, err)
	defer r.Close()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, data, got)

	resp, err = ns.ReportBadReplicas(ctx, &bfspb.ReportBadReplicasRequest{Replicas: []*bfspb.BadReplica{{BlockId: block}}})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, resp.Status)
}
