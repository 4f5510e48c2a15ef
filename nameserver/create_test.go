package nameserver_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// addBlock opens path for write in session and adds its block.
func addBlock(t *testing.T, ns bfspb.NameServerClient, path, session string) *bfspb.AddBlockResponse {
	t.Helper()
	openForWrite(t, ns, path, session)
	ab, err := ns.AddBlock(context.Background(), &bfspb.AddBlockRequest{Path: path, SessionId: session})
	require.NoError(t, err)
	return ab
}

// TestAddBlockCreatesReplicas: AddBlock answers once every chunkserver of
// the write set holds an empty, unsealed replica of the new block; no
// packet creates one.
func TestAddBlockCreatesReplicas(t *testing.T) {
	c := testcluster.Start(t, testcluster.WithChunkservers(3))
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	sid := openSession(t, ns, "writer")
	ab := addBlock(t, ns, "/f", sid)
	require.Equal(t, bfspb.StatusCode_OK, ab.Status, ab.Message)
	require.Len(t, ab.Block.Replicas, 3)
	for _, r := range ab.Block.Replicas {
		info := blockInfo(t, c, r.Address, ab.Block.BlockId)
		require.Equal(t, bfspb.StatusCode_OK, info.Status, "no replica on %s: %s", r.Address, info.Message)
		require.Zero(t, info.Size)
		require.False(t, info.Sealed)
	}
}

// TestAddBlockWhenCreatesFail: a chunkserver whose create fails stays in
// the write set (the writer drops it); when every create fails AddBlock
// answers UNAVAILABLE, and a retry creates the replicas again.
func TestAddBlockWhenCreatesFail(t *testing.T) {
	var failing [3]atomic.Bool
	c := testcluster.Start(t, testcluster.WithChunkservers(3), testcluster.WithChunkserverConfig(func(i int, cfg *chunkserver.Config) {
		cfg.TestingKnobs.CreateBlock = func(int64) error {
			if failing[i].Load() {
				return errors.New("disk on fire")
			}
			return nil
		}
	}))
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	sid := openSession(t, ns, "writer")
	addrs := c.ChunkserverAddrs()

	failing[0].Store(true)
	ab := addBlock(t, ns, "/one", sid)
	require.Equal(t, bfspb.StatusCode_OK, ab.Status, ab.Message)
	require.Len(t, ab.Block.Replicas, 3, "the write set still names the chunkserver that failed")
	for i, addr := range addrs {
		want := bfspb.StatusCode_OK
		if i == 0 {
			want = bfspb.StatusCode_NOT_FOUND
		}
		require.Equal(t, want, blockInfo(t, c, addr, ab.Block.BlockId).Status, "chunkserver %d", i)
	}

	for i := range failing {
		failing[i].Store(true)
	}
	ab = addBlock(t, ns, "/all", sid)
	require.Equal(t, bfspb.StatusCode_UNAVAILABLE, ab.Status, ab.Message)
	require.Contains(t, ab.Message, "disk on fire")

	for i := range failing {
		failing[i].Store(false)
	}
	ab, err := ns.AddBlock(context.Background(), &bfspb.AddBlockRequest{Path: "/all", SessionId: sid})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, ab.Status, ab.Message)
	for _, r := range ab.Block.Replicas {
		require.Equal(t, bfspb.StatusCode_OK, blockInfo(t, c, r.Address, ab.Block.BlockId).Status, "retry left %s without a replica", r.Address)
	}
}

// TestDeleteWaitsForCreates (I4): a file deleted while the creates of its
// block are in flight has its replicas deleted after the creates, never
// before: a delete that overtook a create would leave a replica that no
// file points to, open to a late packet.
func TestDeleteWaitsForCreates(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	c := testcluster.Start(t, testcluster.WithChunkservers(1), testcluster.WithChunkserverConfig(func(_ int, cfg *chunkserver.Config) {
		cfg.TestingKnobs.CreateBlock = func(int64) error {
			close(entered)
			<-release
			return nil
		}
	}))
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	sid := openSession(t, ns, "writer")
	ctx := context.Background()
	cr, err := ns.Create(ctx, &bfspb.CreateRequest{Path: "/f", SessionId: sid, OpenForWrite: true, Replication: 1})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, cr.Status, cr.Message)

	added := make(chan *bfspb.AddBlockResponse, 1)
	go func() {
		ab, err := ns.AddBlock(ctx, &bfspb.AddBlockRequest{Path: "/f", SessionId: sid})
		if err != nil {
			ab = &bfspb.AddBlockResponse{Status: bfspb.StatusCode_INTERNAL, Message: err.Error()}
		}
		added <- ab
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no CreateBlock reached the chunkserver")
	}
	del, err := ns.DeleteFile(ctx, &bfspb.DeleteFileRequest{Path: "/f", SessionId: sid})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, del.Status, del.Message)
	close(release)
	ab := <-added
	require.Equal(t, bfspb.StatusCode_OK, ab.Status, ab.Message)

	// The create went through (AddBlock answered OK with one replica); the
	// delete that waited for it removes the replica.
	cs := bfspb.NewChunkServerClient(c.Dial(c.ChunkserverAddrs()[0]))
	require.Eventually(t, func() bool {
		info, err := cs.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: ab.Block.BlockId})
		return err == nil && info.Status == bfspb.StatusCode_NOT_FOUND
	}, 10*time.Second, 10*time.Millisecond, "the replica of the deleted file's block is still there")
}
