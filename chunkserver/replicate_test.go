package chunkserver

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// writeSealed writes data to a new replica of block id on c and seals it.
func writeSealed(t *testing.T, c bfspb.ChunkServerClient, id int64, data []byte) {
	t.Helper()
	createBlock(t, c, id)
	if len(data) == 0 {
		r, err := c.Seal(context.Background(), &bfspb.SealRequest{BlockId: id})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_OK, r.Status, r.Message)
		return
	}
	st := writeStream(t, c)
	var seq int64
	for off := 0; off < len(data); off += 1 << 20 {
		end := min(off+1<<20, len(data))
		seq++
		p := &bfspb.WritePacket{BlockId: id, Seq: seq, Offset: int64(off), Data: data[off:end], Crc32C: blockstore.Checksum(data[off:end]), Last: end == len(data)}
		ack := roundTrip(t, st, p)
		require.Equal(t, bfspb.StatusCode_OK, ack.Status, ack.Message)
	}
}

func replicate(t *testing.T, target *chunkserver, req *bfspb.ReplicateBlockRequest) *bfspb.ReplicateBlockResponse {
	t.Helper()
	resp, err := target.client.ReplicateBlock(context.Background(), req)
	require.NoError(t, err)
	return resp
}

// TestReplicateBlock: a copy from another chunkserver is byte for byte
// the source's, sealed and reported; a second copy changes nothing.
func TestReplicateBlock(t *testing.T) {
	ns, nsAddr := startRecorder(t)
	src := startChunkServer(t, Config{})
	dst := startChunkServer(t, Config{NameServerAddr: nsAddr})
	data := make([]byte, 2<<20+12345)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	writeSealed(t, src.client, 7, data)
	writeSealed(t, src.client, 8, nil)

	resp := replicate(t, dst, &bfspb.ReplicateBlockRequest{BlockId: 7, Source: src.addr, Size: int64(len(data)), Version: 3, ClusterId: "test-cluster"})
	require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
	require.Equal(t, int64(len(data)), resp.Size)
	got, code := readAll(t, dst.client, 7, 0, 0)
	require.Equal(t, bfspb.StatusCode_OK, code)
	require.True(t, bytes.Equal(data, got), "the copy differs from the source")
	info, err := dst.client.GetBlockInfo(context.Background(), &bfspb.GetBlockInfoRequest{BlockId: 7})
	require.NoError(t, err)
	require.True(t, info.Sealed)
	require.Equal(t, uint64(3), info.Version)
	ns.wait(t, "BlockReceived of the copy", func() bool {
		r := ns.receivedLocked(7)
		return r != nil && r.Sealed && r.Size == int64(len(data))
	})

	resp = replicate(t, dst, &bfspb.ReplicateBlockRequest{BlockId: 7, Source: src.addr, Size: int64(len(data))})
	require.Equal(t, bfspb.StatusCode_EXISTS, resp.Status, resp.Message)

	resp = replicate(t, dst, &bfspb.ReplicateBlockRequest{BlockId: 8, Source: src.addr})
	require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
	info, err = dst.client.GetBlockInfo(context.Background(), &bfspb.GetBlockInfoRequest{BlockId: 8})
	require.NoError(t, err)
	require.True(t, info.Sealed && info.Size == 0, "an empty block is copied sealed: %+v", info)
}

// TestReplicateBlockRefusals: a copy that cannot be made leaves nothing
// behind, with the status the nameserver acts on.
func TestReplicateBlockRefusals(t *testing.T) {
	_, nsAddr := startRecorder(t)
	srcDir := t.TempDir()
	src := startChunkServer(t, Config{DataDir: srcDir})
	dst := startChunkServer(t, Config{NameServerAddr: nsAddr})
	data := bytes.Repeat([]byte("abcdefgh"), 40000)
	writeSealed(t, src.client, 1, data)
	createBlock(t, src.client, 2) // not sealed
	writeSealed(t, src.client, 3, data)
	flip(t, dataFile(srcDir, 3), 100000)

	for _, tc := range []struct {
		name string
		req  *bfspb.ReplicateBlockRequest
		want bfspb.StatusCode
	}{
		{"wrong size", &bfspb.ReplicateBlockRequest{BlockId: 1, Source: src.addr, Size: 5}, bfspb.StatusCode_NOT_FOUND},
		{"unsealed source", &bfspb.ReplicateBlockRequest{BlockId: 2, Source: src.addr}, bfspb.StatusCode_NOT_FOUND},
		{"no such block", &bfspb.ReplicateBlockRequest{BlockId: 9, Source: src.addr, Size: 1}, bfspb.StatusCode_NOT_FOUND},
		{"corrupt source", &bfspb.ReplicateBlockRequest{BlockId: 3, Source: src.addr, Size: int64(len(data))}, bfspb.StatusCode_CORRUPT},
		{"no source", &bfspb.ReplicateBlockRequest{BlockId: 1, Size: 5}, bfspb.StatusCode_INVALID_ARGUMENT},
		{"negative size", &bfspb.ReplicateBlockRequest{BlockId: 1, Source: src.addr, Size: -1}, bfspb.StatusCode_INVALID_ARGUMENT},
		{"source down", &bfspb.ReplicateBlockRequest{BlockId: 1, Source: "127.0.0.1:1", Size: int64(len(data))}, bfspb.StatusCode_UNAVAILABLE},
		{"other cluster", &bfspb.ReplicateBlockRequest{BlockId: 1, Source: src.addr, Size: int64(len(data)), ClusterId: "other"}, bfspb.StatusCode_WRONG_CLUSTER},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == bfspb.StatusCode_WRONG_CLUSTER {
				// The chunkserver records its cluster at registration.
				require.Eventually(t, func() bool { return dst.cluster.Check("test-cluster") == nil && dst.cluster.Check("other") != nil }, 10*time.Second, 10*time.Millisecond)
			}
			resp := replicate(t, dst, tc.req)
			require.Equal(t, tc.want, resp.Status, resp.Message)
			require.NotEmpty(t, resp.Message)
			info, err := dst.client.GetBlockInfo(context.Background(), &bfspb.GetBlockInfoRequest{BlockId: tc.req.BlockId})
			require.NoError(t, err)
			require.Equal(t, bfspb.StatusCode_NOT_FOUND, info.Status, "a failed copy leaves no replica")
		})
	}
}

// TestCopierBounds: copies beyond the bound, and a second copy of one
// block, are refused.
func TestCopierBounds(t *testing.T) {
	c := newCopier(1, 0, &clients{clock: clock.Real{}}, nil)
	defer c.peers.Close()
	require.NoError(t, c.claim(1))
	require.ErrorIs(t, c.claim(1), errCopyBusy)
	require.ErrorIs(t, c.claim(2), errCopyBusy)
	require.Equal(t, 1, c.inFlight())
	c.release(1)
	require.NoError(t, c.claim(2))
}

// TestCopiesYieldToClients: copies run at the disk's speed while the
// chunkserver's clients are idle, and are held to the copy rate while a
// client stream is open or ended less than a second ago. (Copies were
// held to the rate always: at the default 128 MiB/s a chunkserver of a
// dozen disks repaired at a fraction of its disks' speed.)
func TestCopiesYieldToClients(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	cl := &clients{clock: clk}
	c := newCopier(1, 1000, cl, nil)
	defer c.peers.Close()
	ctx := context.Background()
	// A chunk at 1000 bytes per second would take 17 minutes: a wait that
	// returns at once is no wait.
	soon := func() error {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		return c.wait(ctx, readChunkSize)
	}
	require.NoError(t, soon(), "idle: no cap")
	require.NoError(t, soon())
	end := cl.start()
	soon() // the burst of one chunk the limiter holds
	require.Error(t, soon(), "a client stream open: held to the rate")
	require.Equal(t, rate.Limit(1000), c.limit.Limit())
	end()
	require.Error(t, soon(), "a client stream ended just now")
	clk.Advance(clientIdle)
	require.NoError(t, soon(), "idle again")
	require.Equal(t, rate.Inf, c.limit.Limit())
}
