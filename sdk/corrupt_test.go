package sdk_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// locatingNameServer sends readers to fixed replicas and records the
// reports of bad ones.
type locatingNameServer struct {
	steadySession
	size  int64
	block *bfspb.LocatedBlock

	mu  sync.Mutex
	bad []*bfspb.BadReplica
}

func (f *locatingNameServer) GetFileLocation(context.Context, *bfspb.GetFileLocationRequest) (*bfspb.GetFileLocationResponse, error) {
	return &bfspb.GetFileLocationResponse{Info: &bfspb.FileInfo{Name: "f", Size: f.size}, Blocks: []*bfspb.LocatedBlock{f.block}}, nil
}

func (f *locatingNameServer) ReportBadReplicas(_ context.Context, req *bfspb.ReportBadReplicasRequest) (*bfspb.ReportBadReplicasResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bad = append(f.bad, req.Replicas...)
	return &bfspb.ReportBadReplicasResponse{}, nil
}

// TestReadAroundCorruptReplicaReportsIt: a replica damaged on disk answers
// CORRUPT; the reader reads the right bytes from another and reports the
// bad one to the nameserver.
func TestReadAroundCorruptReplicaReportsIt(t *testing.T) {
	// Plaintext: the reader's nameserver below is a fake, and a client
	// speaks one way to every daemon.
	cl := testcluster.Start(t, testcluster.WithChunkservers(3), testcluster.Insecure())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	defer c.Close()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
	w, err := c.Create(ctx, "/f")
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	loc, err := c.Locate(ctx, "/f")
	require.NoError(t, err)
	require.Len(t, loc.Blocks[0].Replicas, 3)
	block, bad := loc.Blocks[0].ID, loc.Blocks[0].Replicas[0]

	// Damage the replica on disk.
	i := slices.Index(cl.ChunkserverAddrs(), bad)
	require.GreaterOrEqual(t, i, 0)
	u := uint64(block)
	path := filepath.Join(cl.ChunkserverConfig(i).DataDir, "blocks", fmt.Sprintf("%02x", (u>>16)&0xff), fmt.Sprintf("%02x", (u>>8)&0xff), fmt.Sprintf("%016x.data", u))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	raw[100] ^= 0x5a
	require.NoError(t, os.WriteFile(path, raw, 0o644))

	// Readers are sent to the bad replica first.
	// With the real nameserver's read token: the chunkservers ask for one.
	real, err := bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr)).GetFileLocation(ctx, &bfspb.GetFileLocationRequest{Path: "/f"})
	require.NoError(t, err)
	require.Len(t, real.Blocks, 1)
	ns := &locatingNameServer{size: int64(len(data)), block: &bfspb.LocatedBlock{BlockId: block, Size: int64(len(data)), Token: real.Blocks[0].Token}}
	for _, a := range loc.Blocks[0].Replicas {
		ns.block.Replicas = append(ns.block.Replicas, &bfspb.Replica{Address: a})
	}
	c2, err := sdk.Dial(ctx, serveFake(t, ns))
	require.NoError(t, err)
	r, err := c2.Open(ctx, "/f")
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, data, got)
	buf := make([]byte, 1000)
	_, err = r.ReadAt(buf, 50)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	// ReadAt reads around it too.
	r, err = c2.Open(ctx, "/f")
	require.NoError(t, err)
	_, err = r.ReadAt(buf, 50)
	require.NoError(t, err)
	require.Equal(t, data[50:1050], buf)
	require.NoError(t, r.Close())

	require.Eventually(t, func() bool {
		ns.mu.Lock()
		defer ns.mu.Unlock()
		return len(ns.bad) >= 2
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, c2.Close())
	ns.mu.Lock()
	defer ns.mu.Unlock()
	require.Len(t, ns.bad, 2, "reported once by each reader")
	for _, b := range ns.bad {
		require.Equal(t, block, b.BlockId)
		require.Equal(t, bad, b.Address)
		require.NotEmpty(t, b.Reason)
	}

	// Against the real nameserver, once reported (by the reader or the
	// chunkserver), the bad replica is no longer located.
	r, err = c.Open(ctx, "/f")
	require.NoError(t, err)
	got, err = io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.NoError(t, r.Close())
	require.Eventually(t, func() bool {
		loc, err := c.Locate(ctx, "/f")
		return err == nil && len(loc.Blocks[0].Replicas) == 2 && !slices.Contains(loc.Blocks[0].Replicas, bad)
	}, 10*time.Second, 10*time.Millisecond)
}
