package nameserver

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// deleteSink is a chunkserver that records the DeleteBlocks it is sent.
type deleteSink struct {
	bfspb.UnimplementedChunkServerServer

	mu      sync.Mutex
	pages   [][]int64
	bytes   []int
	changed chan struct{}
}

func newDeleteSink() *deleteSink { return &deleteSink{changed: make(chan struct{})} }

func (d *deleteSink) record(req *bfspb.DeleteBlocksRequest) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pages = append(d.pages, req.BlockIds)
	d.bytes = append(d.bytes, proto.Size(req))
	close(d.changed)
	d.changed = make(chan struct{})
}

// DeleteBlocks serves the gRPC method.
func (d *deleteSink) DeleteBlocks(_ context.Context, req *bfspb.DeleteBlocksRequest) (*bfspb.DeleteBlocksResponse, error) {
	d.record(req)
	return &bfspb.DeleteBlocksResponse{}, nil
}

// waitFor waits until the pages recorded name n blocks in all.
func (d *deleteSink) waitFor(t *testing.T, n int) [][]int64 {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		d.mu.Lock()
		got, changed := 0, d.changed
		for _, p := range d.pages {
			got += len(p)
		}
		pages := slices.Clone(d.pages)
		d.mu.Unlock()
		if got >= n {
			return pages
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%d of %d blocks deleted", got, n)
		}
	}
}

// sinkClient is the sink as the nameserver's in-process chunkserver client.
type sinkClient struct {
	bfspb.ChunkServerClient // nil: only DeleteBlocks and ReplicateBlock are called
	sink                    *deleteSink
}

// ReplicateBlock refuses the repair's copies: the sink holds no bytes.
func (sinkClient) ReplicateBlock(context.Context, *bfspb.ReplicateBlockRequest, ...grpc.CallOption) (*bfspb.ReplicateBlockResponse, error) {
	return &bfspb.ReplicateBlockResponse{Status: bfspb.StatusCode_RESOURCE_EXHAUSTED, Message: "a sink makes no copies"}, nil
}

func (c sinkClient) DeleteBlocks(_ context.Context, req *bfspb.DeleteBlocksRequest, _ ...grpc.CallOption) (*bfspb.DeleteBlocksResponse, error) {
	c.sink.record(req)
	return &bfspb.DeleteBlocksResponse{}, nil
}

func seq(from, n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

func TestDeletePages(t *testing.T) {
	for _, tc := range []struct {
		name      string
		blocks    int64
		page      int
		wantSizes []int
	}{
		{"pages of one", 3, 1, []int{1, 1, 1}},
		{"exact multiple", 4, 2, []int{2, 2}},
		{"short last page", 5, 2, []int{2, 2, 1}},
		{"one page", 5, 0, []int{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := newDeleteSink()
			cfg := DefaultConfig()
			cfg.DataDir, cfg.MetricsAddr, cfg.Insecure = t.TempDir(), "", true
			cfg.TestingKnobs.DeletePage = tc.page
			cfg.TestingKnobs.DialChunkserver = func(string) (bfspb.ChunkServerClient, error) { return sinkClient{sink: sink}, nil }
			_, tm := startLone(t, cfg)
			tm.deleteReplicas("127.0.0.1:1", seq(1, tc.blocks))
			pages := sink.waitFor(t, int(tc.blocks))
			var sizes []int
			for _, p := range pages {
				sizes = append(sizes, len(p))
			}
			require.Equal(t, tc.wantSizes, sizes)
			require.Equal(t, seq(1, tc.blocks), slices.Concat(pages...), "in order, each once")
		})
	}
}

// TestMillionBlocksOverGRPC sends a full report of a million blocks (ids
// this namespace never handed out: each is kept within its grace period,
// none answered obsolete) to a nameserver over gRPC on loopback in pages of the
// chunkserver's default size, then has the nameserver delete a million
// blocks on a chunkserver: every message within the default 4 MiB limit.
func TestMillionBlocksOverGRPC(t *testing.T) {
	if testing.Short() || raceBuild {
		t.Skip("a million blocks: not with -short or -race")
	}
	const n, page = 1 << 20, 1 << 16 // chunkserver.DefaultReportPage
	cfg := DefaultConfig()
	cfg.DataDir, cfg.MetricsAddr, cfg.Insecure = t.TempDir(), "", true
	s, tm := startLone(t, cfg)
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(1000 + i) // above every id the namespace handed out
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, lis) }()
	defer func() { cancel(); s.Close(); <-served }()

	sink := newDeleteSink()
	csLis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	csSrv := grpc.NewServer()
	bfspb.RegisterChunkServerServer(csSrv, sink)
	csDone := make(chan struct{})
	go func() { defer close(csDone); csSrv.Serve(csLis) }()
	defer func() { csSrv.Stop(); <-csDone }()
	csAddr := csLis.Addr().String()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ns := bfspb.NewNameServerClient(conn)
	reg, err := ns.Register(ctx, &bfspb.RegisterRequest{Address: csAddr, ClusterId: s.ns.ClusterID()})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, reg.Status, reg.Message)

	var obsolete, biggest, biggestAnswer int
	pages := 0
	for chunk := range slices.Chunk(ids, page) {
		req := &bfspb.BlockReportRequest{ChunkserverId: reg.ChunkserverId, Address: csAddr,
			ReportId: 42, Page: uint32(pages), More: pages < n/page-1}
		for _, id := range chunk {
			req.Blocks = append(req.Blocks, &bfspb.ReportedBlock{BlockId: int64(id), Size: 64 << 20, Version: 1 << 20, Sealed: true})
		}
		biggest = max(biggest, proto.Size(req))
		resp, err := ns.BlockReport(ctx, req)
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
		biggestAnswer = max(biggestAnswer, proto.Size(resp))
		obsolete += len(resp.Obsolete)
		pages++
	}
	require.Zero(t, obsolete, "blocks the namespace never handed out are kept for their grace period")

	// The limit is gRPC's default: the same report in one message is
	// refused.
	whole := &bfspb.BlockReportRequest{ChunkserverId: reg.ChunkserverId, Address: csAddr}
	for _, id := range ids {
		whole.Blocks = append(whole.Blocks, &bfspb.ReportedBlock{BlockId: int64(id), Size: 64 << 20, Version: 1 << 20, Sealed: true})
	}
	_, err = ns.BlockReport(ctx, whole)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "a report of %d bytes in one message: %v", proto.Size(whole), err)
	t.Logf("the same report in one message, %d bytes, is refused: %v", proto.Size(whole), status.Code(err))

	srv := tm.blocks.Servers()
	require.Len(t, srv, 1)
	require.True(t, srv[0].Reported, "the last page completes the first report")
	t.Logf("report of %d blocks: %d pages, the biggest %d bytes, the biggest answer %d bytes", n, pages, biggest, biggestAnswer)

	all := make([]int64, n)
	for i, id := range ids {
		all[i] = int64(id)
	}
	tm.deleteReplicas(csAddr, all)
	deleted := sink.waitFor(t, n)
	require.Len(t, deleted, n/DefaultDeletePage)
	require.Equal(t, all, slices.Concat(deleted...))
	sink.mu.Lock()
	t.Logf("delete of %d blocks: %d pages, the biggest %d bytes", n, len(deleted), slices.Max(sink.bytes))
	sink.mu.Unlock()
}

// TestReportPageErrors: a page out of order, or from a registration the
// nameserver does not know, is refused with the codes the chunkserver
// acts on.
func TestReportPageErrors(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir, cfg.MetricsAddr, cfg.Insecure = t.TempDir(), "", true
	s, tm := startLone(t, cfg)
	ctx := context.Background()
	reg, err := s.Register(ctx, &bfspb.RegisterRequest{Address: "127.0.0.1:1", ClusterId: s.ns.ClusterID()})
	require.NoError(t, err)
	page := func(id int64, report uint64, seq uint32, more bool) *bfspb.BlockReportResponse {
		resp, err := s.BlockReport(ctx, &bfspb.BlockReportRequest{ChunkserverId: id, Address: "127.0.0.1:1",
			ReportId: report, Page: seq, More: more})
		require.NoError(t, err)
		return resp
	}
	require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, page(reg.ChunkserverId, 1, 1, false).Status, "no page 0")
	require.Equal(t, bfspb.StatusCode_OK, page(reg.ChunkserverId, 1, 0, true).Status)
	require.False(t, tm.blocks.Servers()[0].Reported)
	require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, page(reg.ChunkserverId, 2, 1, false).Status, "another report's page")
	require.Equal(t, bfspb.StatusCode_OK, page(reg.ChunkserverId, 1, 1, false).Status)
	require.True(t, tm.blocks.Servers()[0].Reported)
	require.Equal(t, bfspb.StatusCode_UNAVAILABLE, page(reg.ChunkserverId+1, 3, 0, false).Status, "unknown registration")
}
