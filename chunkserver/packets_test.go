package chunkserver

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestSecondWriterGetsNoFalseAcks: a second stream writing the same block
// (a second writer, or a confused retry) is not told that its packets are
// stored when the replica holds other bytes under their sequence numbers,
// whichever stream came first; the replica keeps the first writer's bytes.
func TestSecondWriterGetsNoFalseAcks(t *testing.T) {
	cs := standalone(t)
	createBlock(t, cs.client, 3)
	first := writeStream(t, cs.client)
	for i, p := range []*bfspb.WritePacket{packet(3, 1, 0, "xxxxx"), packet(3, 2, 5, "yyyyy")} {
		ack := roundTrip(t, first, p)
		require.Equal(t, bfspb.StatusCode_OK, ack.Status, "packet %d: %s", i+1, ack.Message)
	}

	second := writeStream(t, cs.client)
	sync := packet(3, 2, 5, "bbbbb")
	sync.Sync = true
	for i, p := range []*bfspb.WritePacket{packet(3, 1, 0, "aaaaa"), sync, packet(3, 1, 0, "xxxxxx")} {
		ack := roundTrip(t, second, p)
		require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, ack.Status, "packet %d of the second writer: acknowledged", i+1)
		require.NotEmpty(t, ack.Message)
	}
	// An exact retransmit is acknowledged, from any stream.
	ack := roundTrip(t, second, packet(3, 2, 5, "yyyyy"))
	require.Equal(t, bfspb.StatusCode_OK, ack.Status, ack.Message)

	data, code := readAll(t, cs.client, 3, 0, 0)
	require.Equal(t, bfspb.StatusCode_OK, code)
	require.Equal(t, "xxxxxyyyyy", string(data))
}

// TestRefusalsHideSequenceNumbers: a stream that did not write a block's
// packets learns nothing of the replica's sequence numbers from a
// refusal: a gap, a wrong offset and a mismatched retransmit are refused
// with one and the same message, which names no number but the block's.
// The writer itself is told what the replica expects.
func TestRefusalsHideSequenceNumbers(t *testing.T) {
	cs := standalone(t)
	const block = 1000
	createBlock(t, cs.client, block)
	writer := writeStream(t, cs.client)
	for seq := int64(1); seq <= 5; seq++ {
		ack := roundTrip(t, writer, packet(block, seq, (seq-1)*3, "abc"))
		require.Equal(t, bfspb.StatusCode_OK, ack.Status, ack.Message)
	}

	other := writeStream(t, cs.client)
	var msgs []string
	for _, p := range []*bfspb.WritePacket{
		packet(block, 9, 15, "gap"),  // past the next packet
		packet(block, 6, 14, "off"),  // the next packet, at a wrong offset
		packet(block, 3, 6, "xyz"),   // a packet already applied, other bytes
		packet(block, 7, 100, "far"), // both wrong
	} {
		ack := roundTrip(t, other, p)
		require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, ack.Status, ack.Message)
		rest := strings.ReplaceAll(ack.Message, "1000", "")
		require.False(t, regexp.MustCompile(`[0-9]`).MatchString(rest), "refusal to another stream names a number: %q", ack.Message)
		msgs = append(msgs, ack.Message)
	}
	for _, m := range msgs[1:] {
		require.Equal(t, msgs[0], m, "refusals to another stream must not tell a gap from a wrong offset or a mismatch")
	}

	ack := roundTrip(t, writer, packet(block, 9, 15, "gap"))
	require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, ack.Status)
	require.Contains(t, ack.Message, "expected 6", "the writer is told which packet comes next")
}

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
	require.Empty(t, cs.vols.List())
}
