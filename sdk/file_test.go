package sdk_test

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/cluster/sandbox"
	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

func dataCluster(t *testing.T) (*testcluster.Cluster, *sdk.Client) {
	t.Helper()
	cl := testcluster.Start(t, testcluster.WithChunkservers(3))
	c := dial(t, cl.NameServerAddr, cl.AsClient())
	waitChunkservers(t, cl, 3)
	return cl, c
}

// waitChunkservers waits until n chunkservers have registered.
func waitChunkservers(t *testing.T, cl *testcluster.Cluster, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return cl.NameServer().LiveChunkservers() >= n },
		10*time.Second, 10*time.Millisecond, "chunkservers did not register")
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func put(t *testing.T, c *sdk.Client, path string, data []byte) {
	t.Helper()
	w, err := c.Create(context.Background(), path)
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
}

func get(t *testing.T, c *sdk.Client, path string) []byte {
	t.Helper()
	r, err := c.Open(context.Background(), path)
	require.NoError(t, err)
	defer r.Close()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return b
}

// replicaInfo asks every chunkserver of the cluster about block.
func replicaInfo(t *testing.T, cl *testcluster.Cluster, block int64) map[string]*bfspb.GetBlockInfoResponse {
	t.Helper()
	out := map[string]*bfspb.GetBlockInfoResponse{}
	for _, a := range cl.ChunkserverAddrs() {
		if a == "" {
			continue
		}
		conn, err := grpc.NewClient(a, cl.DialOption())
		require.NoError(t, err)
		resp, err := bfspb.NewChunkServerClient(conn).GetBlockInfo(context.Background(), &bfspb.GetBlockInfoRequest{BlockId: block})
		conn.Close()
		require.NoError(t, err)
		if resp.Status == bfspb.StatusCode_OK {
			out[a] = resp
		}
	}
	return out
}

func TestPutGet(t *testing.T) {
	cl, c := dataCluster(t)
	ctx := context.Background()
	for i, size := range []int{0, 1, 100 << 10, 5<<20 + 123} {
		path := "/f" + string(rune('a'+i))
		data := randomBytes(size, uint64(size))
		put(t, c, path, data)
		require.Equal(t, data, get(t, c, path), "size %d", size)

		fi, err := c.Stat(ctx, path)
		require.NoError(t, err)
		require.EqualValues(t, size, fi.Size)
		require.Empty(t, fi.WriterSession, "closed")

		loc, err := c.Locate(ctx, path)
		require.NoError(t, err)
		require.False(t, loc.Open)
		if size == 0 {
			continue
		}
		require.Len(t, loc.Blocks, 1)
		require.Len(t, loc.Blocks[0].Replicas, 3)
		infos := replicaInfo(t, cl, loc.Blocks[0].ID)
		require.Len(t, infos, 3)
		for a, in := range infos {
			require.True(t, in.Sealed, a)
			require.EqualValues(t, size, in.Size, a)
		}
		// ReadAt at odd places.
		r, err := c.Open(ctx, path)
		require.NoError(t, err)
		buf := make([]byte, 1000)
		off := int64(size / 3)
		n, err := r.ReadAt(buf, off)
		if int(off)+len(buf) <= size {
			require.NoError(t, err)
			require.Equal(t, data[off:off+int64(n)], buf[:n])
		}
		_, err = r.Seek(-1, io.SeekEnd)
		require.NoError(t, err)
		last, err := io.ReadAll(r)
		require.NoError(t, err)
		require.Equal(t, data[size-1:], last)
		require.NoError(t, r.Close())
	}
	_, err := c.Create(ctx, "/fa")
	require.ErrorIs(t, err, sdk.ErrExists)
	_, err = c.Open(ctx, "/")
	require.ErrorIs(t, err, sdk.ErrIsDirectory)
	_, err = c.Open(ctx, "/missing")
	require.ErrorIs(t, err, sdk.ErrNotFound)
}

// TestWritePacketsOnTheWire records the write packets every chunkserver
// receives, as bytes, and decodes them with the protobuf library: every
// replica gets the very same messages (the SDK encodes a packet once),
// and they carry the data in order, its checksum, and the syncs and the
// last packet where the writer asked for them.
func TestWritePacketsOnTheWire(t *testing.T) {
	var mu sync.Mutex
	wire := make(map[int][][]byte) // by chunkserver
	record := func(cfg *sandbox.Config) {
		prev := cfg.Chunkserver
		cfg.Chunkserver = func(i int, c *chunkserver.Config) {
			prev(i, c)
			c.TestingKnobs.WritePacket = func(b []byte) {
				mu.Lock()
				defer mu.Unlock()
				wire[i] = append(wire[i], bytes.Clone(b))
			}
		}
	}
	cl := testcluster.Start(t, testcluster.WithChunkservers(3), record)
	c := dial(t, cl.NameServerAddr, cl.AsClient())
	waitChunkservers(t, cl, 3)
	ctx := context.Background()
	data := randomBytes(600_000, 6)
	w, err := c.Create(ctx, "/wire", sdk.Replication(3))
	require.NoError(t, err)
	_, err = w.Write(data[:300_000]) // a full packet goes, the rest waits
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx)) // the rest, synced
	_, err = w.Write(data[300_000:])
	require.NoError(t, err)
	require.NoError(t, w.Close())

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, wire, 3)
	var got []byte
	for seq, b := range wire[0] {
		var p bfspb.WritePacket
		require.NoError(t, proto.Unmarshal(b, &p))
		require.EqualValues(t, seq+1, p.Seq)
		require.EqualValues(t, len(got), p.Offset)
		require.Equal(t, crc32.Checksum(p.Data, crc32.MakeTable(crc32.Castagnoli)), p.Crc32C)
		last := seq == len(wire[0])-1
		require.Equal(t, seq == 1 || last, p.Sync, "packet %d", p.Seq)
		require.Equal(t, last, p.Last, "packet %d", p.Seq)
		got = append(got, p.Data...)
	}
	require.Equal(t, data, got)
	require.Len(t, wire[0], 4)
	require.Equal(t, wire[0], wire[1])
	require.Equal(t, wire[0], wire[2])
}

func TestReadWhileWriting(t *testing.T) {
	_, c := dataCluster(t)
	ctx := context.Background()
	data := randomBytes(3<<20, 7)
	w, err := c.Create(ctx, "/growing")
	require.NoError(t, err)
	_, err = w.Write(data[:1<<20])
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))

	r, err := c.Open(ctx, "/growing")
	require.NoError(t, err)
	require.GreaterOrEqual(t, r.Size(), int64(1<<20), "synced bytes are visible")
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, data[:len(got)], got)
	r.Close()

	_, err = w.Write(data[1<<20:])
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.Equal(t, data, get(t, c, "/growing"))
}

func TestChunkserverKilledMidWrite(t *testing.T) {
	cl, c := dataCluster(t)
	ctx := context.Background()
	data := randomBytes(4<<20, 9)
	w, err := c.Create(ctx, "/survivor")
	require.NoError(t, err)
	_, err = w.Write(data[:2<<20])
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))

	loc, err := c.Locate(ctx, "/survivor")
	require.NoError(t, err)
	victim := slices.Index(cl.ChunkserverAddrs(), loc.Blocks[0].Replicas[0])
	require.GreaterOrEqual(t, victim, 0)
	cl.StopChunkserver(victim)

	_, err = w.Write(data[2<<20:])
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))
	require.NoError(t, w.Close())
	require.Equal(t, data, get(t, c, "/survivor"))
	loc, err = c.Locate(ctx, "/survivor")
	require.NoError(t, err)
	require.Len(t, loc.Blocks[0].Replicas, 2, "the dead replica left the write set")
	require.NotContains(t, loc.Blocks[0].Replicas, cl.ChunkserverAddrs()[victim])
}

// TestSealRacesWrite ends a writer's session while it writes: the
// nameserver seals the replicas under it. The writer must get ErrSealed,
// every replica must end at one length holding every synced byte, and no
// byte sent after the seal is on any replica.
func TestSealRacesWrite(t *testing.T) {
	cl, c := dataCluster(t)
	ctx := context.Background()
	raw := rawClient(t, cl)
	data := randomBytes(8<<20, 11)
	w, err := c.Create(ctx, "/fenced")
	require.NoError(t, err)
	_, err = w.Write(data[:1<<20])
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))
	synced := int64(1 << 20)

	sess, err := c.Session(ctx)
	require.NoError(t, err)
	writeErr := make(chan error, 1)
	go func() {
		for off := 1 << 20; off < len(data); off += 64 << 10 {
			if _, err := w.Write(data[off : off+64<<10]); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- w.Sync(ctx)
	}()
	resp, err := raw.CloseSession(ctx, &bfspb.CloseSessionRequest{SessionId: sess.ID()})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, resp.Status)

	err = <-writeErr
	// The writer raced the seal; if it got everything in first, its next
	// write is refused for sure.
	if err == nil {
		_, err = w.Write(data[:1])
		if err == nil {
			err = w.Sync(ctx)
		}
	}
	require.True(t, errors.Is(err, sdk.ErrSealed) || errors.Is(err, sdk.ErrSessionExpired) || errors.Is(err, sdk.ErrNotOpen),
		"a fenced writer fails: %v", err)
	_ = w.Close()

	closed := waitFileClosed(t, c, "/fenced")
	require.GreaterOrEqual(t, closed.Size, synced, "every synced byte is in the closed file")
	loc, err := c.Locate(ctx, "/fenced")
	require.NoError(t, err)
	var sizes []int64
	require.Eventually(t, func() bool {
		infos := replicaInfo(t, cl, loc.Blocks[0].ID)
		sizes = sizes[:0]
		for _, in := range infos {
			if !in.Sealed {
				return false
			}
			sizes = append(sizes, in.Size)
		}
		return len(sizes) == 3 && sizes[0] == closed.Size && sizes[1] == closed.Size && sizes[2] == closed.Size
	}, 10*time.Second, 20*time.Millisecond, "replicas agree on the closed length: %v vs %d", sizes, closed.Size)
	got := get(t, c, "/fenced")
	require.Equal(t, data[:closed.Size], got)
}

func waitFileClosed(t *testing.T, c *sdk.Client, path string) *sdk.FileInfo {
	t.Helper()
	var fi *sdk.FileInfo
	require.Eventually(t, func() bool {
		var err error
		fi, err = c.Stat(context.Background(), path)
		return err == nil && fi.WriterSession == ""
	}, 20*time.Second, 20*time.Millisecond, "%s was never closed", path)
	return fi
}

// TestSessionExpiryClosesAbandonedFile writes through raw RPCs under a
// session that is then never kept alive, as if the writer died: the
// nameserver must seal and close the file at a length holding every
// synced byte.
func TestSessionExpiryClosesAbandonedFile(t *testing.T) {
	cl, c := dataCluster(t)
	ctx := context.Background()
	raw := rawClient(t, cl)
	open, err := raw.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: "doomed", TtlMs: 500})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, open.Status)
	sid := open.SessionId
	// The writer is alive until its last sync: keep its session alive
	// until then, however slowly the machine runs the set-up.
	alive := make(chan struct{})
	var keeper sync.WaitGroup
	keeper.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-alive:
				return
			case <-tick.C:
				raw.KeepAlive(ctx, &bfspb.KeepAliveRequest{SessionId: sid})
			}
		}
	})
	cr, err := raw.Create(ctx, &bfspb.CreateRequest{Path: "/abandoned", SessionId: sid, OpenForWrite: true})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, cr.Status)
	ab, err := raw.AddBlock(ctx, &bfspb.AddBlockRequest{Path: "/abandoned", SessionId: sid})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, ab.Status)

	data := randomBytes(300<<10, 3)
	// Every replica gets a synced packet, then an unsynced one that only
	// some replicas receive.
	for i, rep := range ab.Block.Replicas {
		conn, err := grpc.NewClient(rep.Address, cl.DialOption())
		require.NoError(t, err)
		wctx, err := blocktoken.Attach(ctx, ab.Block.Token)
		require.NoError(t, err)
		st, err := bfspb.NewChunkServerClient(conn).Write(wctx)
		require.NoError(t, err)
		send := func(seq, off int64, b []byte, sync bool) {
			require.NoError(t, st.Send(&bfspb.WritePacket{BlockId: ab.Block.BlockId, Seq: seq, Offset: off, Data: b,
				Crc32C: crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)), Sync: sync, Version: ab.Block.Version}))
			ack, err := st.Recv()
			require.NoError(t, err)
			require.Equal(t, bfspb.StatusCode_OK, ack.Status, ack.Message)
		}
		send(1, 0, data[:200<<10], true)
		if i > 0 {
			send(2, 200<<10, data[200<<10:], false)
		}
		st.CloseSend()
		conn.Close()
	}
	sy, err := raw.SyncBlock(ctx, &bfspb.SyncBlockRequest{Path: "/abandoned", SessionId: sid, BlockId: ab.Block.BlockId, Size: 200 << 10})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, sy.Status)

	// The writer dies: no more keep-alives; the session expires 500ms
	// after the last one and recovery runs.
	close(alive)
	keeper.Wait()
	fi := waitFileClosed(t, c, "/abandoned")
	require.EqualValues(t, 200<<10, fi.Size, "the agreed length is the shortest replica, which holds every synced byte")
	require.True(t, bytes.Equal(data[:200<<10], get(t, c, "/abandoned")))
	infos := replicaInfo(t, cl, ab.Block.BlockId)
	require.Eventually(t, func() bool {
		infos = replicaInfo(t, cl, ab.Block.BlockId)
		for _, in := range infos {
			if !in.Sealed || in.Size != 200<<10 {
				return false
			}
		}
		return len(infos) == 3
	}, 10*time.Second, 20*time.Millisecond, "longer replicas are truncated to the agreed length")
}
