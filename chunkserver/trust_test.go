package chunkserver_test

// Chunkservers act only on the nameserver's word (SPEC §10): each test
// below is one attack that worked before, over real gRPC against a
// secure test cluster, and asserts the refusal and the status it names.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

var denied = bfspb.StatusCode_PERMISSION_DENIED

// written starts a cluster of three chunkservers with opts, writes and
// closes a file, and returns the cluster, the file's located block (with
// the read token the nameserver gave the client) and its bytes.
func written(t *testing.T, opts ...testcluster.Option) (*testcluster.Cluster, *bfspb.LocatedBlock, []byte) {
	t.Helper()
	cl := testcluster.Start(t, append([]testcluster.Option{testcluster.WithChunkservers(3)}, opts...)...)
	return cl, writeFile(t, cl, "/f", bytes.Repeat([]byte("genuine "), 4096)), bytes.Repeat([]byte("genuine "), 4096)
}

// writeFile writes and closes path with the SDK and returns its block as
// GetFileLocation gives it to the client.
func writeFile(t *testing.T, cl *testcluster.Cluster, path string, data []byte) *bfspb.LocatedBlock {
	t.Helper()
	ctx := ctxFor(t)
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	defer c.Close()
	w, err := c.Create(ctx, path)
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return locate(t, cl, path)
}

func locate(t *testing.T, cl *testcluster.Cluster, path string) *bfspb.LocatedBlock {
	t.Helper()
	resp, err := bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr)).GetFileLocation(ctxFor(t), &bfspb.GetFileLocationRequest{Path: path})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
	require.Len(t, resp.Blocks, 1)
	return resp.Blocks[0]
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// read reads block whole from the chunkserver cs with token (none if
// nil) and returns its bytes and the status that ended the stream.
func read(t *testing.T, cs bfspb.ChunkServerClient, block int64, token *bfspb.SignedBlockToken) ([]byte, bfspb.StatusCode, string) {
	t.Helper()
	ctx, err := blocktoken.Attach(ctxFor(t), token)
	require.NoError(t, err)
	st, err := cs.Read(ctx, &bfspb.ReadRequest{BlockId: block})
	require.NoError(t, err)
	var data []byte
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return data, bfspb.StatusCode_OK, ""
		}
		require.NoError(t, err)
		if chunk.Status != bfspb.StatusCode_OK {
			return data, chunk.Status, chunk.Message
		}
		data = append(data, chunk.Data...)
	}
}

// write sends one packet of block to cs with token and returns its ack.
func write(t *testing.T, cs bfspb.ChunkServerClient, block int64, token *bfspb.SignedBlockToken) *bfspb.WriteAck {
	t.Helper()
	ctx, err := blocktoken.Attach(ctxFor(t), token)
	require.NoError(t, err)
	st, err := cs.Write(ctx)
	require.NoError(t, err)
	data := []byte("forged")
	require.NoError(t, st.Send(&bfspb.WritePacket{BlockId: block, Seq: 1, Offset: 0, Data: data, Crc32C: blockstore.Checksum(data), Last: true}))
	ack, err := st.Recv()
	require.NoError(t, err)
	require.NoError(t, st.CloseSend())
	return ack
}

// TestReadWriteNeedAToken: a client's raw Read or Write without a token is
// refused (PERMISSION_DENIED), and with the token the nameserver gave it
// a Read works.
func TestReadWriteNeedAToken(t *testing.T) {
	cl, blk, data := written(t)
	cs := bfspb.NewChunkServerClient(cl.Dial(blk.Replicas[0].Address))

	got, code, msg := read(t, cs, blk.BlockId, nil)
	require.Equal(t, denied, code, "read without a token: %s (%d bytes)", msg, len(got))
	require.Empty(t, got)
	ack := write(t, cs, blk.BlockId, nil)
	require.Equal(t, denied, ack.Status, ack.Message)

	require.NotNil(t, blk.Token, "GetFileLocation gives a read token")
	got, code, msg = read(t, cs, blk.BlockId, blk.Token)
	require.Equal(t, bfspb.StatusCode_OK, code, msg)
	require.Equal(t, data, got)
	ack = write(t, cs, blk.BlockId, blk.Token)
	require.Equal(t, denied, ack.Status, "a read token does not write: %s", ack.Message)
}

// TestExpiredTokenRefused: a token past its deadline is refused.
func TestExpiredTokenRefused(t *testing.T) {
	cl, blk, _ := written(t, testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
		cfg.TestingKnobs.TokenLifetime = func(a bfspb.BlockAccess) time.Duration {
			if a == bfspb.BlockAccess_BLOCK_ACCESS_READ {
				return -time.Minute // issued expired
			}
			return 0
		}
	}))
	cs := bfspb.NewChunkServerClient(cl.Dial(blk.Replicas[0].Address))
	_, code, msg := read(t, cs, blk.BlockId, blk.Token)
	require.Equal(t, denied, code, msg)
	require.Contains(t, msg, "expired")
}

// TestTokenOfAnotherBlockRefused: a genuine token names its block only.
func TestTokenOfAnotherBlockRefused(t *testing.T) {
	cl, blk, _ := written(t)
	other := writeFile(t, cl, "/g", []byte("other"))
	cs := bfspb.NewChunkServerClient(cl.Dial(blk.Replicas[0].Address))
	_, code, msg := read(t, cs, blk.BlockId, other.Token)
	require.Equal(t, denied, code, msg)
	ack := write(t, cs, blk.BlockId, other.Token)
	require.Equal(t, denied, ack.Status, ack.Message)
}

// TestForgedTokenRefused: a token whose MAC does not match, or that
// another identity than its holder presents, is refused.
func TestForgedTokenRefused(t *testing.T) {
	cl, blk, _ := written(t)
	cs := bfspb.NewChunkServerClient(cl.Dial(blk.Replicas[0].Address))
	require.NotNil(t, blk.Token, "no token from GetFileLocation")
	forged := &bfspb.SignedBlockToken{Token: blk.Token.Token, KeyId: blk.Token.KeyId, Mac: bytes.Clone(blk.Token.Mac)}
	forged.Mac[3] ^= 0x40
	_, code, msg := read(t, cs, blk.BlockId, forged)
	require.Equal(t, denied, code, msg)

	// The client's token in a chunkserver's hands.
	asCS := bfspb.NewChunkServerClient(cl.DialCreds(blk.Replicas[0].Address, cl.ChunkserverCreds(1)))
	_, code, msg = read(t, asCS, blk.BlockId, blk.Token)
	require.Equal(t, denied, code, msg)
}

// TestCommandsOnlyFromTheNameServer: CreateBlock, Seal, Truncate,
// DeleteBlocks and ReplicateBlock from a client's identity or from a
// chunkserver's are refused (PERMISSION_DENIED) and change nothing.
func TestCommandsOnlyFromTheNameServer(t *testing.T) {
	cl, blk, data := written(t)
	addr := blk.Replicas[0].Address
	term := leaderTerm(t, cl)
	for who, creds := range map[string]*certs.Creds{"a client": nil, "a chunkserver": cl.ChunkserverCreds(1)} {
		conn := cl.Dial(addr)
		if creds != nil {
			conn = cl.DialCreds(addr, creds)
		}
		cs := bfspb.NewChunkServerClient(conn)
		ctx := ctxFor(t)
		cr, err := cs.CreateBlock(ctx, &bfspb.CreateBlockRequest{BlockId: 1 << 40})
		require.NoError(t, err)
		require.Equal(t, denied, cr.Status, "CreateBlock from %s: %s", who, cr.Message)
		sr, err := cs.Seal(ctx, &bfspb.SealRequest{BlockId: 1 << 41, Term: term})
		require.NoError(t, err)
		require.Equal(t, denied, sr.Status, "Seal from %s: %s", who, sr.Message)
		tr, err := cs.Truncate(ctx, &bfspb.TruncateRequest{BlockId: blk.BlockId, Size: 1, Term: term})
		require.NoError(t, err)
		require.Equal(t, denied, tr.Status, "Truncate from %s: %s", who, tr.Message)
		dr, err := cs.DeleteBlocks(ctx, &bfspb.DeleteBlocksRequest{BlockIds: []int64{blk.BlockId}, Term: term})
		require.NoError(t, err)
		require.Equal(t, denied, dr.Status, "DeleteBlocks from %s: %s", who, dr.Message)
		rr, err := cs.ReplicateBlock(ctx, &bfspb.ReplicateBlockRequest{BlockId: 1 << 42, Source: blk.Replicas[1].Address, Size: 1, Version: 1, Term: term})
		require.NoError(t, err)
		require.Equal(t, denied, rr.Status, "ReplicateBlock from %s: %s", who, rr.Message)
		vr, err := cs.VerifyBlock(ctx, &bfspb.VerifyBlockRequest{BlockId: blk.BlockId, Term: term})
		require.NoError(t, err)
		require.Equal(t, denied, vr.Status, "VerifyBlock from %s: %s", who, vr.Message)
		for _, id := range []int64{1 << 40, 1 << 41} {
			info, err := cs.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: id})
			require.NoError(t, err)
			require.Equal(t, bfspb.StatusCode_NOT_FOUND, info.Status, "block %d from %s", id, who)
		}
	}
	got, code, msg := read(t, bfspb.NewChunkServerClient(cl.Dial(addr)), blk.BlockId, locate(t, cl, "/f").Token)
	require.Equal(t, bfspb.StatusCode_OK, code, msg)
	require.Equal(t, data, got, "the replica is whole")
}

func leaderTerm(t *testing.T, cl *testcluster.Cluster) uint64 {
	t.Helper()
	st, err := bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr)).ClusterStatus(ctxFor(t), &bfspb.ClusterStatusRequest{})
	require.NoError(t, err)
	return st.Term
}

// rogue is a chunkserver nobody registered: a gRPC server with a
// chunkserver's certificate of the cluster's CA (its own name) that
// answers every block as sealed at size and serves forged bytes.
type rogue struct {
	bfspb.UnimplementedChunkServerServer
	size int64
}

func (r rogue) GetBlockInfo(context.Context, *bfspb.GetBlockInfoRequest) (*bfspb.GetBlockInfoResponse, error) {
	return &bfspb.GetBlockInfoResponse{Size: r.size, Version: 1, Sealed: true}, nil
}

func (r rogue) Read(req *bfspb.ReadRequest, st grpc.ServerStreamingServer[bfspb.ReadChunk]) error {
	data := bytes.Repeat([]byte("F"), int(r.size))
	return st.Send(&bfspb.ReadChunk{Data: data, Crc32C: blockstore.Checksum(data)})
}

func startRogue(t *testing.T, cl *testcluster.Cluster, size int64) string {
	t.Helper()
	dir := cl.CertsDir()
	require.NoError(t, cl.Authority().CreateNodeFiles(dir, "rogue.crt", "rogue.key", certs.RoleChunkserver, "rogue", []string{"127.0.0.1"}, certs.Options{}))
	creds, err := certs.LoadNodeFiles(dir, "rogue.crt", "rogue.key")
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.Creds(certs.TransportCredentials(creds)))
	bfspb.RegisterChunkServerServer(srv, rogue{size: size})
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return lis.Addr().String()
}

// TestCopyOnlyFromTheNamedChunkserver: a ReplicateBlock naming a source
// that is not the registered chunkserver the nameserver named is refused
// (PERMISSION_DENIED), even from the nameserver's identity, and leaves no
// replica: the target copies only from a peer whose certificate is the
// one that registered the source.
func TestCopyOnlyFromTheNamedChunkserver(t *testing.T) {
	cl, blk, _ := written(t, testcluster.WithChunkservers(4))
	var target string
	for _, a := range cl.ChunkserverAddrs() {
		if !hasReplica(blk, a) {
			target = a
		}
	}
	require.NotEmpty(t, target)
	src := startRogue(t, cl, blk.Size)
	cs := bfspb.NewChunkServerClient(cl.DialCreds(target, cl.NameServerCreds()))
	term := leaderTerm(t, cl)
	for _, named := range []string{"", "chunkserver/chunkserver-0"} {
		rr, err := cs.ReplicateBlock(ctxFor(t), &bfspb.ReplicateBlockRequest{BlockId: blk.BlockId, Source: src, Size: blk.Size, Version: blk.Version,
			Term: term, SourceIdentity: named, SourceToken: blk.Token})
		require.NoError(t, err)
		require.Equal(t, denied, rr.Status, "source named %q: %s", named, rr.Message)
		info, err := cs.GetBlockInfo(ctxFor(t), &bfspb.GetBlockInfoRequest{BlockId: blk.BlockId})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_NOT_FOUND, info.Status, "a replica was copied from the rogue")
	}
}

func hasReplica(blk *bfspb.LocatedBlock, addr string) bool {
	for _, r := range blk.Replicas {
		if r.Address == addr {
			return true
		}
	}
	return false
}
