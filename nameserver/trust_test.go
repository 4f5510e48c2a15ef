package nameserver_test

// The nameserver takes a chunkserver's word only from the chunkserver
// (SPEC §10): each test below is one attack that worked before, over real
// gRPC against a secure test cluster.

import (
	"bytes"
	"context"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

var permissionDenied = bfspb.StatusCode_PERMISSION_DENIED

func trustCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// closedFile starts cl's cluster (three chunkservers), writes and closes
// /f and returns its bytes and block.
func closedFile(t *testing.T, opts ...testcluster.Option) (*testcluster.Cluster, *sdk.Client, []byte, sdk.BlockLocation) {
	t.Helper()
	cl := testcluster.Start(t, append([]testcluster.Option{testcluster.WithChunkservers(3)}, opts...)...)
	ctx := trustCtx(t)
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	data := bytes.Repeat([]byte("genuine "), 4096)
	w, err := c.Create(ctx, "/f")
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	loc, err := c.Locate(ctx, "/f")
	require.NoError(t, err)
	require.Len(t, loc.Blocks, 1)
	require.Len(t, loc.Blocks[0].Replicas, 3)
	return cl, c, data, loc.Blocks[0]
}

// requireIntact: /f reads back whole, its block has three good replicas
// and fsck finds nothing wrong.
func requireIntact(t *testing.T, cl *testcluster.Cluster, c *sdk.Client, data []byte) {
	t.Helper()
	ctx := trustCtx(t)
	r, err := c.Open(ctx, "/f")
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the file does not read back")
	info, err := c.Stat(ctx, "/f")
	require.NoError(t, err)
	require.Equal(t, 3, info.LiveReplicas, "good replicas of /f")
	resp, err := bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr)).Fsck(ctx, &bfspb.FsckRequest{Path: "/"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
	require.Zero(t, resp.Totals.CorruptBlocks, "corrupt blocks")
	require.Zero(t, resp.Totals.MissingBlocks, "missing blocks")
	require.Zero(t, resp.Totals.UnderReplicatedBlocks, "under-replicated blocks")
}

// TestRegisterOnlyFromAChunkserver: a client's certificate, an admin's
// or a nameserver's cannot register a chunkserver (PERMISSION_DENIED),
// nor can a chunkserver's certificate register an address it does not
// name (PERMISSION_DENIED) or a malformed one (INVALID_ARGUMENT).
func TestRegisterOnlyFromAChunkserver(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(1))
	ctx := trustCtx(t)
	admin, err := certs.LoadClient(cl.CertsDir(), certs.AdminUser)
	require.NoError(t, err)
	req := func(addr string) *bfspb.RegisterRequest {
		return &bfspb.RegisterRequest{Address: addr, CapacityBytes: 100 << 30, FreeBytes: 1 << 62}
	}
	for who, conn := range map[string]bfspb.NameServerClient{
		"a client":     bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr)),
		"an admin":     bfspb.NewNameServerClient(cl.DialCreds(cl.NameServerAddr, admin)),
		"a nameserver": bfspb.NewNameServerClient(cl.DialCreds(cl.NameServerAddr, cl.NameServerCreds())),
	} {
		resp, err := conn.Register(ctx, req("127.0.0.1:1"))
		require.NoError(t, err)
		require.Equal(t, permissionDenied, resp.Status, "register from %s: %s", who, resp.Message)
	}
	cs := bfspb.NewNameServerClient(cl.DialCreds(cl.NameServerAddr, cl.ChunkserverCreds(0)))
	for addr, want := range map[string]bfspb.StatusCode{
		"10.9.9.9:8830": permissionDenied, // not in its certificate
		"example.com:1": permissionDenied,
		"127.0.0.1":     bfspb.StatusCode_INVALID_ARGUMENT,
		"127.0.0.1:0":   bfspb.StatusCode_INVALID_ARGUMENT,
		"0.0.0.0:8830":  bfspb.StatusCode_INVALID_ARGUMENT,
	} {
		resp, err := cs.Register(ctx, req(addr))
		require.NoError(t, err)
		require.Equal(t, want, resp.Status, "register %s: %s", addr, resp.Message)
	}
	require.Equal(t, 1, cl.NameServer().LiveChunkservers())
}

// TestForgedBlockReceivedRefused: BlockReceived naming a chunkserver id
// (guessed) from a client's certificate, or from another chunkserver's,
// is refused (PERMISSION_DENIED): the closed file keeps its three
// replicas and reads back.
func TestForgedBlockReceivedRefused(t *testing.T) {
	cl, c, data, blk := closedFile(t)
	ctx := trustCtx(t)
	victim := cl.ChunkserverAddrs()[0]
	for who, ns := range map[string]bfspb.NameServerClient{
		"a client":            bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr)),
		"another chunkserver": bfspb.NewNameServerClient(cl.DialCreds(cl.NameServerAddr, cl.ChunkserverCreds(1))),
	} {
		for id := int64(1); id <= 8; id++ {
			for _, addr := range blk.Replicas {
				if who == "another chunkserver" && addr == cl.ChunkserverAddrs()[1] {
					continue // its own
				}
				resp, err := ns.BlockReceived(ctx, &bfspb.BlockReceivedRequest{ChunkserverId: id, Address: addr,
					Blocks: []*bfspb.ReportedBlock{{BlockId: blk.ID, Size: 1, Version: blk.Version, Sealed: true}}})
				require.NoError(t, err)
				require.Equal(t, permissionDenied, resp.Status, "BlockReceived from %s as %d at %s: %s", who, id, addr, resp.Message)
			}
		}
		resp, err := ns.BlockReport(ctx, &bfspb.BlockReportRequest{ChunkserverId: 1, Address: victim})
		require.NoError(t, err)
		require.Equal(t, permissionDenied, resp.Status, "BlockReport from %s: %s", who, resp.Message)
		hb, err := ns.HeartBeat(ctx, &bfspb.HeartBeatRequest{ChunkserverId: 1, Address: victim,
			Volumes: []*bfspb.VolumeInfo{{State: bfspb.VolumeState_VOLUME_STATE_FAILED}}})
		require.NoError(t, err)
		require.Equal(t, permissionDenied, hb.Status, "HeartBeat from %s: %s", who, hb.Message)
	}
	requireIntact(t, cl, c, data)
}

// TestFalseBadReplicaReportDeletesNothing: a client (or a chunkserver
// about another's replica) that reports every replica of a block corrupt
// is only heard as a hint: the nameserver has each chunkserver verify its
// replica, which is sound, so nothing is marked, copied or deleted.
func TestFalseBadReplicaReportDeletesNothing(t *testing.T) {
	cl, c, data, blk := closedFile(t)
	ctx := trustCtx(t)
	req := &bfspb.ReportBadReplicasRequest{}
	for _, a := range blk.Replicas {
		req.Replicas = append(req.Replicas, &bfspb.BadReplica{BlockId: blk.ID, Address: a, Reason: "lies"})
	}
	resp, err := bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr)).ReportBadReplicas(ctx, req)
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
	requireIntact(t, cl, c, data)

	other := cl.ChunkserverAddrs()[1]
	req = &bfspb.ReportBadReplicasRequest{ChunkserverId: 2, Address: other}
	for _, a := range blk.Replicas {
		if a != other {
			req.Replicas = append(req.Replicas, &bfspb.BadReplica{BlockId: blk.ID, Address: a, Reason: "lies"})
		}
	}
	resp, err = bfspb.NewNameServerClient(cl.DialCreds(cl.NameServerAddr, cl.ChunkserverCreds(1))).ReportBadReplicas(ctx, req)
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
	requireIntact(t, cl, c, data)
}

// TestFreeSpaceClaimIsCapped: a chunkserver (a real chunkserver
// certificate) that claims 2^62 free bytes on volumes of 2^62 bytes is
// believed no further than a volume can hold: free at most its capacity,
// capacity at most nameserver.MaxVolumeBytes, and the cluster's totals
// (as bfs admin report adds them) do not overflow.
func TestFreeSpaceClaimIsCapped(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(2))
	ctx := trustCtx(t)
	require.NoError(t, cl.Authority().CreateNodeFiles(cl.CertsDir(), "liar.crt", "liar.key", certs.RoleChunkserver, "liar", []string{"127.0.0.1"}, certs.Options{}))
	liar, err := certs.LoadNodeFiles(cl.CertsDir(), "liar.crt", "liar.key")
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0") // an address of its own, served by nobody
	require.NoError(t, err)
	addr := lis.Addr().String()
	lis.Close()
	var vols []*bfspb.VolumeInfo
	for i := range 4 {
		vols = append(vols, &bfspb.VolumeInfo{Index: uint32(i), State: bfspb.VolumeState_VOLUME_STATE_HEALTHY,
			CapacityBytes: 100 << 30, FreeBytes: 1 << 62})
	}
	vols[3].CapacityBytes = 1 << 62
	resp, err := bfspb.NewNameServerClient(cl.DialCreds(cl.NameServerAddr, liar)).Register(ctx, &bfspb.RegisterRequest{
		Address: addr, CapacityBytes: math.MaxInt64, FreeBytes: math.MaxInt64, UsedBytes: -5, Volumes: vols})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)

	list, err := bfspb.NewNameServerClient(cl.DialAs(cl.NameServerAddr, certs.AdminUser)).ListChunkservers(ctx, &bfspb.ListChunkserversRequest{})
	require.NoError(t, err)
	require.Len(t, list.Chunkservers, 3)
	var capacity, free int64
	for _, s := range list.Chunkservers {
		require.LessOrEqual(t, s.FreeBytes, s.CapacityBytes, s.Address)
		require.GreaterOrEqual(t, s.UsedBytes, int64(0), s.Address)
		for _, v := range s.Volumes {
			require.LessOrEqual(t, v.FreeBytes, v.CapacityBytes, "%s volume %d", s.Address, v.Index)
			require.LessOrEqual(t, v.CapacityBytes, nameserver.MaxVolumeBytes, "%s volume %d", s.Address, v.Index)
		}
		capacity, free = capacity+s.CapacityBytes, free+s.FreeBytes
	}
	require.Positive(t, capacity, "total capacity overflowed")
	require.Positive(t, free, "total free space overflowed")
}

// TestUnallocatedReplicaDeletedAfterGrace: a replica of a block id the
// namespace never allocated (written straight to a chunkserver) is
// deleted once the grace period has passed since a block report first
// named it.
func TestUnallocatedReplicaDeletedAfterGrace(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(1),
		testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
			cfg.UnallocatedGrace = time.Nanosecond
			cfg.ReportInterval = 50 * time.Millisecond
		}))
	ctx := trustCtx(t)
	st, err := bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr)).ClusterStatus(ctx, &bfspb.ClusterStatusRequest{})
	require.NoError(t, err)
	cs := bfspb.NewChunkServerClient(cl.DialCreds(cl.ChunkserverAddrs()[0], cl.NameServerCreds()))
	const planted = 1 << 40
	cr, err := cs.CreateBlock(ctx, &bfspb.CreateBlockRequest{BlockId: planted})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, cr.Status, cr.Message)
	sr, err := cs.Seal(ctx, &bfspb.SealRequest{BlockId: planted, Term: st.Term})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, sr.Status, sr.Message)
	require.Eventually(t, func() bool {
		info, err := cs.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: planted})
		return err == nil && info.Status == bfspb.StatusCode_NOT_FOUND
	}, 20*time.Second, 20*time.Millisecond, "the replica of a block never allocated is still there")
}

// reportOwnCorrupt has the chunkserver at addr report its own replica of
// block corrupt, with its own certificate: its verdict, which the
// nameserver takes as it is.
func reportOwnCorrupt(ctx context.Context, t *testing.T, cl *testcluster.Cluster, block int64, addr string) {
	t.Helper()
	i := slices.Index(cl.ChunkserverAddrs(), addr)
	require.GreaterOrEqual(t, i, 0, "no chunkserver at %s", addr)
	ns := bfspb.NewNameServerClient(cl.DialCreds(cl.NameServerAddr, cl.ChunkserverCreds(i)))
	resp, err := ns.ReportBadReplicas(ctx, &bfspb.ReportBadReplicasRequest{ChunkserverId: int64(i + 1), Address: addr,
		Replicas: []*bfspb.BadReplica{{BlockId: block, Address: addr, Reason: "checksum mismatch"}}})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
}

// fakeChunkserver is a client of the nameserver with a chunkserver's
// certificate of the cluster's CA (its own, for 127.0.0.1), for a test
// that registers and reports as a chunkserver nobody runs.
func fakeChunkserver(t *testing.T, cl *testcluster.Cluster) bfspb.NameServerClient {
	t.Helper()
	dir := cl.CertsDir()
	if _, err := os.Stat(filepath.Join(dir, "fake-cs.crt")); err != nil {
		require.NoError(t, cl.Authority().CreateNodeFiles(dir, "fake-cs.crt", "fake-cs.key", certs.RoleChunkserver, "fake-cs", []string{"127.0.0.1"}, certs.Options{}))
	}
	creds, err := certs.LoadNodeFiles(dir, "fake-cs.crt", "fake-cs.key")
	require.NoError(t, err)
	return bfspb.NewNameServerClient(cl.DialCreds(cl.NameServerAddr, creds))
}
