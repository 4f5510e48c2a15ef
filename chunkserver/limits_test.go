package chunkserver

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/daemon"
	"github.com/bfs-go/bfs/internal/limit"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// refusals reads bfs_chunkserver_limit_refusals_total{limit=name}.
func refusals(t *testing.T, cs *chunkserver, name limit.Name) float64 {
	t.Helper()
	families, err := cs.metrics.registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "bfs_chunkserver_limit_refusals_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == string(name) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no refusal counter of %s", name)
	return 0
}

// TestMessageSizeLimit: a write packet or a request over the
// chunkserver's --max-message-size is refused RESOURCE_EXHAUSTED, and
// counted; one under it goes through.
func TestMessageSizeLimit(t *testing.T) {
	const max = 64 << 10
	cs := startChunkServer(t, Config{MaxMessageSize: max})
	require.Zero(t, refusals(t, cs, limit.MessageSize))
	createBlock(t, cs.client, 1)
	st := writeStream(t, cs.client)
	ack := roundTrip(t, st, packet(1, 1, 0, strings.Repeat("x", max/2)))
	require.Equal(t, bfspb.StatusCode_OK, ack.Status, ack.Message)
	require.NoError(t, st.Send(packet(1, 2, max/2, strings.Repeat("y", max))))
	_, err := st.Recv()
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.EqualValues(t, 1, refusals(t, cs, limit.MessageSize))

	ids := make([]int64, max/4) // some 5 bytes each on the wire
	for i := range ids {
		ids[i] = int64(i) + 1<<30
	}
	_, err = cs.client.DeleteBlocks(context.Background(), &bfspb.DeleteBlocksRequest{BlockIds: ids})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.EqualValues(t, 2, refusals(t, cs, limit.MessageSize))
	require.Zero(t, refusals(t, cs, limit.WriteIdle))
}

// TestMessageSizeDefault: the default bound is 4 MiB.
func TestMessageSizeDefault(t *testing.T) {
	cs := startChunkServer(t, Config{})
	require.Equal(t, daemon.DefaultMaxMessageSize, cs.cfg.MaxMessageSize)
	createBlock(t, cs.client, 1)
	st := writeStream(t, cs.client)
	require.NoError(t, st.Send(packet(1, 1, 0, strings.Repeat("x", daemon.DefaultMaxMessageSize))))
	_, err := st.Recv()
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.EqualValues(t, 1, refusals(t, cs, limit.MessageSize))
}

// TestIdleWriteStreamEnds: a Write stream that sends no packet for
// --write-idle-timeout is ended RESOURCE_EXHAUSTED, naming the limit in
// its trailer, after the acks of what it sent; a stream that keeps
// sending is not, however long it lives. Time is a fake clock's: the
// stream's timer runs only while its handler waits for a packet.
func TestIdleWriteStreamEnds(t *testing.T) {
	const idle = time.Minute
	fake := clock.NewFake(time.Unix(1e9, 0))
	cs := startChunkServer(t, Config{WriteIdleTimeout: idle, Clock: fake})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := fake.WaiterCount()
	createBlock(t, cs.client, 1)
	st := writeStream(t, cs.client)
	var sent string
	for i, data := range []string{"one", "two", "three", "four"} {
		ack := roundTrip(t, st, packet(1, int64(i+1), int64(len(sent)), data))
		require.Equal(t, bfspb.StatusCode_OK, ack.Status, ack.Message)
		sent += data
		// The handler waits for the next packet: three quarters of the
		// timeout pass, four times over.
		require.NoError(t, fake.BlockUntil(ctx, base+1))
		fake.Advance(idle * 3 / 4)
	}
	require.Zero(t, refusals(t, cs, limit.WriteIdle))

	fake.Advance(idle / 4)
	_, err := st.Recv()
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "idle")
	require.Equal(t, []string{string(limit.WriteIdle)}, st.Trailer().Get(limit.Trailer))
	require.EqualValues(t, 1, refusals(t, cs, limit.WriteIdle))
	require.Zero(t, refusals(t, cs, limit.MessageSize), "an idle stream is not a message over the size")

	// A new stream goes on where the other stopped.
	st = writeStream(t, cs.client)
	last := packet(1, 5, int64(len(sent)), "five")
	last.Last = true
	ack := roundTrip(t, st, last)
	require.Equal(t, bfspb.StatusCode_OK, ack.Status, ack.Message)
	require.NoError(t, st.CloseSend())
	_, err = st.Recv()
	require.ErrorIs(t, err, io.EOF)
	data, code := readAll(t, cs.client, 1, 0, 0)
	require.Equal(t, bfspb.StatusCode_OK, code)
	require.Equal(t, sent+"five", string(data))
}
