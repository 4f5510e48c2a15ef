package chunkserver

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/bfs-go/bfs/proto/bfspb"
)

func standalone(t *testing.T) *chunkserver {
	return startChunkServer(t, Config{})
}

func TestWriteAcks(t *testing.T) {
	cs := standalone(t)
	createBlock(t, cs.client, 1)
	st := writeStream(t, cs.client)
	badCRC := packet(1, 3, 10, "xxxxx")
	badCRC.Crc32C++
	sync := packet(1, 3, 10, "again")
	sync.Sync = true
	for i, step := range []struct {
		p    *bfspb.WritePacket
		code bfspb.StatusCode
		size int64
	}{
		{packet(1, 1, 0, "hello"), bfspb.StatusCode_OK, 5},
		{packet(1, 2, 5, "world"), bfspb.StatusCode_OK, 10},
		{packet(1, 2, 5, "world"), bfspb.StatusCode_OK, 10},              // duplicate
		{packet(1, 4, 15, "gap"), bfspb.StatusCode_INVALID_ARGUMENT, 10}, // gap
		{packet(1, 3, 9, "off"), bfspb.StatusCode_INVALID_ARGUMENT, 10},  // wrong offset
		{badCRC, bfspb.StatusCode_CORRUPT, 0},                            // bad checksum
		{packet(2, 1, 0, "other"), bfspb.StatusCode_INVALID_ARGUMENT, 0}, // another block
		{sync, bfspb.StatusCode_OK, 15},                                  // the gap filled, synced
		{packet(1, 4, 15, "!"), bfspb.StatusCode_OK, 16},
	} {
		ack := roundTrip(t, st, step.p)
		require.Equal(t, step.code, ack.Status, "step %d: %s", i, ack.Message)
		require.Equal(t, step.size, ack.Size, "step %d", i)
		if step.code != bfspb.StatusCode_OK {
			require.NotEmpty(t, ack.Message, "step %d", i)
		}
	}
	require.NoError(t, st.CloseSend())

	info, err := cs.client.GetBlockInfo(context.Background(), &bfspb.GetBlockInfoRequest{BlockId: 1})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, info.Status)
	require.EqualValues(t, 16, info.Size)
	require.False(t, info.Sealed)
	data, code := readAll(t, cs.client, 1, 0, 0)
	require.Equal(t, bfspb.StatusCode_OK, code)
	require.Equal(t, "helloworldagain!", string(data))
	info, err = cs.client.GetBlockInfo(context.Background(), &bfspb.GetBlockInfoRequest{BlockId: 2})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_NOT_FOUND, info.Status)

	h, err := healthpb.NewHealthClient(dialT(t, cs.addr)).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "bfs.ChunkServer"})
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, h.Status)
}

func dialT(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// writeBlock creates a block and writes data to it in packets of n bytes
// on a new stream, sending them all before reading the acks, the last one
// sealing.
func writeBlock(t *testing.T, c bfspb.ChunkServerClient, id int64, data []byte, n int, seal bool) {
	t.Helper()
	createBlock(t, c, id)
	st := writeStream(t, c)
	var sent int
	for off := 0; off < len(data); off += n {
		p := packet(id, int64(sent+1), int64(off), string(data[off:min(off+n, len(data))]))
		p.Last = seal && off+n >= len(data)
		require.NoError(t, st.Send(p))
		sent++
	}
	for i := range sent {
		ack, err := st.Recv()
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_OK, ack.Status, "packet %d: %s", i+1, ack.Message)
	}
	// Ended, so its idle timer is no longer armed (tests count the
	// timers of a fake clock).
	require.NoError(t, st.CloseSend())
	_, err := st.Recv()
	require.ErrorIs(t, err, io.EOF)
}

func randData(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestRead(t *testing.T) {
	cs := standalone(t)
	data := randData(3<<20 + 12345)
	writeBlock(t, cs.client, 7, data, 64<<10, true)
	for _, r := range []struct{ off, length int64 }{
		{0, 0}, {0, 10}, {1 << 20, 1 << 20}, {100, 2<<20 + 7}, {int64(len(data)) - 5, 100}, {int64(len(data)), 0},
	} {
		got, code := readAll(t, cs.client, 7, r.off, r.length)
		require.Equal(t, bfspb.StatusCode_OK, code)
		end := int64(len(data))
		if r.length > 0 {
			end = min(end, r.off+r.length)
		}
		require.True(t, bytes.Equal(data[r.off:end], got), "range %+v", r)
	}
	for _, bad := range []struct {
		id, off int64
		code    bfspb.StatusCode
	}{
		{8, 0, bfspb.StatusCode_NOT_FOUND},
		{7, -1, bfspb.StatusCode_INVALID_ARGUMENT},
		{7, int64(len(data)) + 1, bfspb.StatusCode_INVALID_ARGUMENT},
	} {
		got, code := readAll(t, cs.client, bad.id, bad.off, 0)
		require.Equal(t, bad.code, code, "%+v", bad)
		require.Empty(t, got)
	}

	// Damage one byte on disk: the chunks before it still read, the
	// stream ends with CORRUPT before any bad byte.
	files, err := filepath.Glob(filepath.Join(cs.cfg.DataDir, "blocks", "*", "*", "0000000000000007.data"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	f, err := os.OpenFile(files[0], os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{^data[2<<20+5]}, 2<<20+5)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	got, code := readAll(t, cs.client, 7, 0, 0)
	require.Equal(t, bfspb.StatusCode_CORRUPT, code)
	require.Equal(t, data[:2<<20], got)
}

func TestSealUnknownBlock(t *testing.T) {
	cs := standalone(t)
	seal, err := cs.client.Seal(context.Background(), &bfspb.SealRequest{BlockId: 5})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, seal.Status)
	require.Zero(t, seal.Size)
	ack := roundTrip(t, writeStream(t, cs.client), packet(5, 1, 0, "late"))
	require.Equal(t, bfspb.StatusCode_SEALED, ack.Status)
	require.Zero(t, ack.Size)
}

// TestSealRacesWriteStream seals a block over gRPC while a writer streams
// packets at full speed without waiting for acks. Every packet the
// chunkserver acknowledged OK is in the sealed size, nothing after it, and
// after the first SEALED ack every later packet is refused.
func TestSealRacesWriteStream(t *testing.T) {
	ns, nsAddr := startRecorder(t)
	cs := startChunkServer(t, Config{NameServerAddr: nsAddr})
	createBlock(t, cs.client, 3)
	st := writeStream(t, cs.client)
	const packets, size = 2000, 4096
	payload := string(randData(size))
	var wg sync.WaitGroup
	wg.Go(func() {
		for seq := int64(1); seq <= packets; seq++ {
			if st.Send(packet(3, seq, (seq-1)*size, payload)) != nil {
				return
			}
		}
		st.CloseSend()
	})
	var (
		okSize   int64
		refused  int
		sealedAt int64
	)
	for seq := int64(1); seq <= packets; seq++ {
		ack, err := st.Recv()
		require.NoError(t, err)
		require.Equal(t, seq, ack.Seq)
		switch ack.Status {
		case bfspb.StatusCode_OK:
			require.Zero(t, refused, "packet %d accepted after a refusal", seq)
			okSize = ack.Size
		case bfspb.StatusCode_SEALED:
			refused++
			require.Equal(t, sealedAt, ack.Size)
		default:
			t.Fatalf("packet %d: %v %s", seq, ack.Status, ack.Message)
		}
		if seq == 50 {
			seal, err := cs.client.Seal(context.Background(), &bfspb.SealRequest{BlockId: 3})
			require.NoError(t, err)
			require.Equal(t, bfspb.StatusCode_OK, seal.Status)
			sealedAt = seal.Size
			require.GreaterOrEqual(t, sealedAt, int64(50*size))
		}
	}
	wg.Wait()
	require.Equal(t, sealedAt, okSize)
	require.Positive(t, refused, "the writer outran the seal; make packets smaller")
	info, err := cs.client.GetBlockInfo(context.Background(), &bfspb.GetBlockInfoRequest{BlockId: 3})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, info.Status)
	require.Equal(t, sealedAt, info.Size)
	require.True(t, info.Sealed)
	ns.wait(t, "BlockReceived of block 3", func() bool {
		b := ns.receivedLocked(3)
		return b != nil && b.Size == sealedAt && b.Sealed
	})
}

func TestTruncateAndDelete(t *testing.T) {
	cs := standalone(t)
	ctx := context.Background()
	data := randData(200_000)
	writeBlock(t, cs.client, 1, data, 30_000, true)
	for _, step := range []struct {
		id, size int64
		code     bfspb.StatusCode
	}{
		{1, 250_000, bfspb.StatusCode_INVALID_ARGUMENT},
		{1, 100_001, bfspb.StatusCode_OK},
		{1, 100_001, bfspb.StatusCode_OK}, // again: nothing to do
		{2, 0, bfspb.StatusCode_NOT_FOUND},
	} {
		resp, err := cs.client.Truncate(ctx, &bfspb.TruncateRequest{BlockId: step.id, Size: step.size})
		require.NoError(t, err)
		require.Equal(t, step.code, resp.Status, "%+v: %s", step, resp.Message)
	}
	got, code := readAll(t, cs.client, 1, 0, 0)
	require.Equal(t, bfspb.StatusCode_OK, code)
	require.Equal(t, data[:100_001], got)
	info, err := cs.client.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: 1})
	require.NoError(t, err)
	require.EqualValues(t, 100_001, info.Size)
	require.True(t, info.Sealed)

	del, err := cs.client.DeleteBlocks(ctx, &bfspb.DeleteBlocksRequest{BlockIds: []int64{1, 99}})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, del.Status)
	info, err = cs.client.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: 1})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_NOT_FOUND, info.Status)
}
