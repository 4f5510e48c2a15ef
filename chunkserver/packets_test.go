package chunkserver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestLateFirstPacketIsRefused (I4): a first packet for a block that was
// sealed before any packet arrived and then deleted is refused; it does
// not create a replica that no file points to. Neither does a first
// packet for a block never created.
func TestLateFirstPacketIsRefused(t *testing.T) {
	cs := standalone(t)
	ctx := context.Background()
	seal, err := cs.client.Seal(ctx, &bfspb.SealRequest{BlockId: 5})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, seal.Status, seal.Message)
	require.Zero(t, seal.Size)
	del, err := cs.client.DeleteBlocks(ctx, &bfspb.DeleteBlocksRequest{BlockIds: []int64{5}})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, del.Status, del.Message)

	for _, id := range []int64{5, 6} {
		st := writeStream(t, cs.client)
		p := packet(id, 1, 0, "late")
		p.Sync = true
		ack := roundTrip(t, st, p)
		require.Equal(t, bfspb.StatusCode_NOT_FOUND, ack.Status, "block %d: %s", id, ack.Message)
		require.NotEmpty(t, ack.Message)
		info, err := cs.client.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: id})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_NOT_FOUND, info.Status, "block %d has a replica", id)
	}
	require.Empty(t, cs.store.List())
}
