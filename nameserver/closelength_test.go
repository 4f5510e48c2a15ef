package nameserver_test

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/internal/testcluster"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// The tests here drive the nameserver and the chunkservers with raw RPCs,
// as a client that does not follow the SDK's protocol would: a writer
// that never sends a packet, one that claims more bytes synced than it
// wrote, replicas of one block left at different lengths.

// rawCreate creates path open for write by session and gives it its block.
func rawCreate(t *testing.T, ns bfspb.NameServerClient, path, session string) *bfspb.LocatedBlock {
	t.Helper()
	openForWrite(t, ns, path, session)
	r, err := ns.AddBlock(context.Background(), &bfspb.AddBlockRequest{Path: path, SessionId: session})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, r.Status, r.Message)
	require.Len(t, r.Block.Replicas, 3)
	return r.Block
}

func replicaAddrs(b *bfspb.LocatedBlock) []string {
	var out []string
	for _, r := range b.Replicas {
		out = append(out, r.Address)
	}
	return out
}

// rawPacket sends one packet to the replica of b at addr and waits for
// its acknowledgement, which must be OK.
func rawPacket(t *testing.T, addr string, b *bfspb.LocatedBlock, p *bfspb.WritePacket) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := bfspb.NewChunkServerClient(dial(t, addr)).Write(ctx)
	require.NoError(t, err)
	p.BlockId, p.Version = b.BlockId, b.Version
	p.Crc32C = crc32.Checksum(p.Data, crc32.MakeTable(crc32.Castagnoli))
	require.NoError(t, stream.Send(p))
	ack, err := stream.Recv()
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, ack.Status, "packet %d to %s: %s", p.Seq, addr, ack.Message)
	require.NoError(t, stream.CloseSend())
	for {
		if _, err := stream.Recv(); err != nil {
			require.ErrorIs(t, err, io.EOF)
			return
		}
	}
}

func blockInfo(t *testing.T, addr string, block int64) *bfspb.GetBlockInfoResponse {
	t.Helper()
	r, err := bfspb.NewChunkServerClient(dial(t, addr)).GetBlockInfo(context.Background(), &bfspb.GetBlockInfoRequest{BlockId: block})
	require.NoError(t, err)
	return r
}

// TestFinishWithoutPacketsCloses: a writer that was given its block but
// sent no packet, so that nothing sealed the replicas, finishes the file.
// The nameserver seals them itself, and the file closes at length 0 at
// once, not when the writer's session ends; whether or not the
// chunkservers hold an empty replica of the block already.
func TestFinishWithoutPacketsCloses(t *testing.T) {
	c := testcluster.Start(t, testcluster.WithChunkservers(3))
	ns := bfspb.NewNameServerClient(dial(t, c.NameServerAddr))
	for _, empty := range []bool{false, true} {
		t.Run(fmt.Sprintf("empty replicas=%v", empty), func(t *testing.T) {
			sess := openSession(t, ns, "writer")
			path := fmt.Sprintf("/f-%v", empty)
			b := rawCreate(t, ns, path, sess)
			if empty {
				for _, addr := range replicaAddrs(b) {
					rawPacket(t, addr, b, &bfspb.WritePacket{Seq: 1})
					require.False(t, blockInfo(t, addr, b.BlockId).Sealed)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := ns.FinishFile(ctx, &bfspb.FinishFileRequest{Path: path, SessionId: sess, Wait: true})
			require.NoError(t, err, "the finish never returned: the file waits for seals nobody sends")
			require.Equal(t, bfspb.StatusCode_OK, r.Status, r.Message)
			require.Empty(t, r.Info.WriterSession, "the file is still open")
			require.Zero(t, r.Info.Size)
			for _, addr := range replicaAddrs(b) {
				info := blockInfo(t, addr, b.BlockId)
				require.Equal(t, bfspb.StatusCode_OK, info.Status, "replica on %s: %s", addr, info.Message)
				require.True(t, info.Sealed, "replica on %s is not sealed: a late packet could still land", addr)
				require.Zero(t, info.Size)
			}
		})
	}
}
