package nameserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/nameserver"
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
func rawPacket(t *testing.T, c *testcluster.Cluster, addr string, b *bfspb.LocatedBlock, p *bfspb.WritePacket) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx, err := blocktoken.Attach(ctx, b.Token)
	require.NoError(t, err)
	stream, err := bfspb.NewChunkServerClient(dialHolder(t, c, addr, b)).Write(ctx)
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

// dialHolder dials addr as the identity b's token was issued to (the
// client's or the admin's certificate): a chunkserver serves no other.
func dialHolder(t *testing.T, c *testcluster.Cluster, addr string, b *bfspb.LocatedBlock) *grpc.ClientConn {
	t.Helper()
	var tok bfspb.BlockToken
	require.NoError(t, proto.Unmarshal(b.GetToken().GetToken(), &tok))
	if tok.Holder == (certs.Identity{Kind: certs.KindAdmin, Name: certs.AdminUser}).String() {
		return c.DialAs(addr, certs.AdminUser)
	}
	return c.Dial(addr)
}

func blockInfo(t *testing.T, c *testcluster.Cluster, addr string, block int64) *bfspb.GetBlockInfoResponse {
	t.Helper()
	r, err := bfspb.NewChunkServerClient(c.Dial(addr)).GetBlockInfo(context.Background(), &bfspb.GetBlockInfoRequest{BlockId: block})
	require.NoError(t, err)
	return r
}

// rawWrite writes data to the replica at addr, synced, as its first
// packet.
func rawWrite(t *testing.T, c *testcluster.Cluster, addr string, b *bfspb.LocatedBlock, data []byte) {
	t.Helper()
	rawPacket(t, c, addr, b, &bfspb.WritePacket{Seq: 1, Offset: 0, Data: data, Sync: true})
}

func syncBlock(t *testing.T, ns bfspb.NameServerClient, path, session string, block, size int64) {
	t.Helper()
	r, err := ns.SyncBlock(context.Background(), &bfspb.SyncBlockRequest{Path: path, SessionId: session, BlockId: block, Size: size})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, r.Status, r.Message)
}

// readReplica returns every byte the replica of b at addr holds (b's
// token reads: a write token reads too).
func readReplica(t *testing.T, c *testcluster.Cluster, addr string, b *bfspb.LocatedBlock) []byte {
	t.Helper()
	ctx, err := blocktoken.Attach(context.Background(), b.Token)
	require.NoError(t, err)
	stream, err := bfspb.NewChunkServerClient(dialHolder(t, c, addr, b)).Read(ctx, &bfspb.ReadRequest{BlockId: b.BlockId})
	require.NoError(t, err)
	var buf bytes.Buffer
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return buf.Bytes()
		}
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_OK, chunk.Status, chunk.Message)
		buf.Write(chunk.Data)
	}
}

func stat(t *testing.T, ns bfspb.NameServerClient, path string) *bfspb.FileInfo {
	t.Helper()
	r, err := ns.Stat(context.Background(), &bfspb.StatRequest{Path: path})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, r.Status, r.Message)
	return r.Info
}

// TestFinishWithoutPacketsCloses: a writer that was given its block but
// sent no packet, so that nothing sealed the replicas, finishes the file.
// The nameserver seals them itself, and the file closes at length 0 at
// once, not when the writer's session ends; whether or not the
// chunkservers hold an empty replica of the block already.
func TestFinishWithoutPacketsCloses(t *testing.T) {
	c := testcluster.Start(t, testcluster.WithChunkservers(3))
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	for _, empty := range []bool{false, true} {
		t.Run(fmt.Sprintf("empty replicas=%v", empty), func(t *testing.T) {
			sess := openSession(t, ns, "writer")
			path := fmt.Sprintf("/f-%v", empty)
			b := rawCreate(t, ns, path, sess)
			if empty {
				for _, addr := range replicaAddrs(b) {
					rawPacket(t, c, addr, b, &bfspb.WritePacket{Seq: 1})
					require.False(t, blockInfo(t, c, addr, b.BlockId).Sealed)
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
				info := blockInfo(t, c, addr, b.BlockId)
				require.Equal(t, bfspb.StatusCode_OK, info.Status, "replica on %s: %s", addr, info.Message)
				require.True(t, info.Sealed, "replica on %s is not sealed: a late packet could still land", addr)
				require.Zero(t, info.Size)
			}
		})
	}
}

// TestSyncClaimNeverCutsReplicas: a writer claims (SyncBlock) more bytes
// synced than any replica holds. The claim must not make the nameserver
// drop or truncate what the replicas hold: whether the writer closes the
// file (its last packets seal the replicas) or a forced unlock fences it,
// the file keeps every byte a majority of the replicas hold, and the
// replicas that hold them keep them.
func TestSyncClaimNeverCutsReplicas(t *testing.T) {
	c := testcluster.Start(t, testcluster.WithChunkservers(3))
	ns := bfspb.NewNameServerClient(c.DialAs(c.NameServerAddr, certs.AdminUser)) // forces unlocks
	ctx := context.Background()
	data := bytes.Repeat([]byte("synced bytes. "), 200)
	for i, tc := range []struct {
		name  string
		lens  [3]int // of each replica
		claim int64
		want  int64 // the closed length
	}{
		{"claim 2^40 over 1000 bytes", [3]int{1000, 1000, 1000}, 1 << 40, 1000},
		{"claim 4096 over 100 bytes", [3]int{100, 100, 100}, 4096, 100},
		{"no replica reaches the claim", [3]int{1500, 1000, 500}, 1 << 40, 1000},
	} {
		for _, fence := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, fence=%v", tc.name, fence), func(t *testing.T) {
				dir := fmt.Sprintf("/d%d-%v", i, fence)
				mkdirAll(t, ns, dir)
				sess := openSession(t, ns, "writer")
				lock := lockAs(t, ns, dir, sess)
				path := dir + "/f"
				b := rawCreate(t, ns, path, sess)
				addrs := replicaAddrs(b)
				for j, addr := range addrs {
					rawWrite(t, c, addr, b, data[:tc.lens[j]])
				}
				syncBlock(t, ns, path, sess, b.BlockId, int64(slices.Min(tc.lens[:])))
				syncBlock(t, ns, path, sess, b.BlockId, tc.claim)

				if fence {
					r, err := ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: dir, Force: true, Epoch: lock.Epoch, Wait: true})
					require.NoError(t, err)
					require.Equal(t, bfspb.StatusCode_UNLOCKED, r.Status, r.Message)
				} else {
					for j, addr := range addrs {
						rawPacket(t, c, addr, b, &bfspb.WritePacket{Seq: 2, Offset: int64(tc.lens[j]), Last: true})
					}
					r := finish(t, ns, path, sess)
					require.Equal(t, bfspb.StatusCode_OK, r.Status, r.Message)
				}
				fi := stat(t, ns, path)
				require.Empty(t, fi.WriterSession)
				require.Equal(t, tc.want, fi.Size, "the claim of %d bytes decided the length", tc.claim)
				loc, err := ns.GetFileLocation(ctx, &bfspb.GetFileLocationRequest{Path: path})
				require.NoError(t, err)
				served := replicaAddrs(loc.Blocks[0])
				for j, addr := range addrs {
					if int64(tc.lens[j]) < tc.want {
						require.NotContains(t, served, addr, "readers are sent to the replica of %d bytes", tc.lens[j])
						continue
					}
					info := blockInfo(t, c, addr, b.BlockId)
					require.True(t, info.Sealed, "replica on %s", addr)
					require.Equal(t, tc.want, info.Size, "replica on %s (%d bytes written)", addr, tc.lens[j])
					require.Equal(t, data[:tc.want], readReplica(t, c, addr, b), "replica on %s", addr)
				}
			})
		}
	}
}

// TestResumedCleaningTruncatesBeforeUnlocked: a forced unlock closes a
// file whose replicas disagree (one holds 500 bytes more), and the
// nameserver stops after the close committed but before the longer
// replica was truncated. The cleaning resumes after the restart with the
// file closed already; UNLOCKED must not be persisted until that replica
// has the file's length (I5).
func TestResumedCleaningTruncatesBeforeUnlocked(t *testing.T) {
	var gate struct {
		sync.Mutex
		open chan struct{}
	}
	gate.open = make(chan struct{})
	truncating := make(chan string, 16)
	c := testcluster.Start(t, testcluster.WithChunkservers(3), testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
		cfg.TestingKnobs.BeforeTruncate = func(ctx context.Context, addr string, _, _ int64) {
			select {
			case truncating <- addr:
			default:
			}
			gate.Lock()
			open := gate.open
			gate.Unlock()
			select {
			case <-open:
			case <-ctx.Done():
			}
		}
	}))
	ns := bfspb.NewNameServerClient(c.DialAs(c.NameServerAddr, certs.AdminUser)) // forces unlocks
	ctx := context.Background()
	mkdirAll(t, ns, "/d")
	sess := openSession(t, ns, "holder")
	lock := lockAs(t, ns, "/d", sess)
	b := rawCreate(t, ns, "/d/f", sess)
	addrs := replicaAddrs(b)
	data := bytes.Repeat([]byte("x"), 1500)
	for _, addr := range addrs {
		rawWrite(t, c, addr, b, data[:1000])
	}
	long := addrs[2]
	rawPacket(t, c, long, b, &bfspb.WritePacket{Seq: 2, Offset: 1000, Data: data[1000:]})
	syncBlock(t, ns, "/d/f", sess, b.BlockId, 1000)

	r, err := ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: "/d", Force: true, Epoch: lock.Epoch})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_CLEANING, r.Status, r.Message)
	waitTruncate := func(when string) {
		t.Helper()
		select {
		case addr := <-truncating:
			require.Equal(t, long, addr)
		case <-time.After(20 * time.Second):
			t.Fatalf("no truncation of the longer replica %s", when)
		}
	}
	waitTruncate("after the close")
	require.Empty(t, stat(t, ns, "/d/f").WriterSession, "the truncation came before the close committed")

	// The nameserver stops here: its truncation never reaches the replica.
	c.RestartNameServer()
	ns = bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	require.EqualValues(t, 1500, blockInfo(t, c, long, b.BlockId).Size)
	watchCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	watch, err := ns.WatchDirLocks(watchCtx, &bfspb.WatchDirLocksRequest{Prefix: "/d"})
	require.NoError(t, err)
	_, err = watch.Header() // the watch is registered: no transition is missed
	require.NoError(t, err)
	waitTruncate("after the restart")
	l, err := ns.GetDirLock(ctx, &bfspb.GetDirLockRequest{Path: "/d"})
	require.NoError(t, err)
	require.Equal(t, bfspb.LockStatus_LOCK_STATUS_CLEANING, l.Lock.Status,
		"UNLOCKED while the replica on %s still holds 1500 bytes, the file 1000", long)

	gate.Lock()
	close(gate.open)
	gate.Unlock()
	for {
		ev := recv(t, watch)
		if ev.Lock.Path == "/d" && ev.Lock.Status == bfspb.LockStatus_LOCK_STATUS_UNLOCKED {
			break
		}
	}
	for _, addr := range addrs {
		info := blockInfo(t, c, addr, b.BlockId)
		require.True(t, info.Sealed, "replica on %s", addr)
		require.EqualValues(t, 1000, info.Size, "replica on %s when UNLOCKED was observed", addr)
	}
}
