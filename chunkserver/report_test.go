package chunkserver

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/chunkserver/volume"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// sizing passes block reports on, keeping each page's size on the wire
// and its answer's.
type sizing struct {
	registry
	mu            sync.Mutex
	pages, answer []int
}

func (s *sizing) BlockReport(ctx context.Context, in *bfspb.BlockReportRequest, opts ...grpc.CallOption) (*bfspb.BlockReportResponse, error) {
	resp, err := s.registry.BlockReport(ctx, in, opts...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages = append(s.pages, proto.Size(in))
	s.answer = append(s.answer, proto.Size(resp))
	return resp, err
}

// testMember is the membership of a chunkserver at 127.0.0.1:1 with an
// empty store, registered with the nameserver at nsAddr, that sends
// block reports in pages of page replicas. Its loop is not running: the
// test sends the reports.
func testMember(t *testing.T, nsAddr string, page int) (*membership, *sizing) {
	t.Helper()
	conn, err := grpc.NewClient(nsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	vols, err := volume.Open(volume.Config{Dirs: []string{t.TempDir()}, DiskSpace: func(string) (int64, int64) { return 0, 0 }})
	require.NoError(t, err)
	t.Cleanup(func() { vols.Close() })
	cl, err := loadCluster(vols)
	require.NoError(t, err)
	zero := func() float64 { return 0 }
	ns := &sizing{registry: bfspb.NewNameServerClient(conn)}
	m := &membership{ns: ns, vols: vols, cluster: cl, clock: clock.Real{},
		metrics: newMetrics(gauges{blocks: zero, bytes: zero, writeStreams: zero}, vols),
		addr:    "127.0.0.1:1", page: page, registered: make(chan struct{}),
		writers: func() int64 { return 0 }}
	resp, err := m.tryRegister(context.Background())
	require.NoError(t, err)
	require.NoError(t, m.cluster.Join(resp.ClusterId))
	m.adopt(resp)
	return m, ns
}

func infos(from, n int) []volume.Replica {
	out := make([]volume.Replica, n)
	for i := range out {
		out[i] = volume.Replica{BlockInfo: blockstore.BlockInfo{ID: blockstore.BlockID(from + i), Size: 64 << 20, Version: 1, Sealed: true}}
	}
	return out
}

func TestReportPages(t *testing.T) {
	for _, tc := range []struct {
		name      string
		blocks    int
		page      int
		wantSizes []int
	}{
		{"pages of one", 3, 1, []int{1, 1, 1}},
		{"exact multiple", 4, 2, []int{2, 2}},
		{"short last page", 5, 2, []int{2, 2, 1}},
		{"default page", 5, 0, []int{5}},
		{"empty report", 0, 2, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, nsAddr := startRecorder(t)
			m, _ := testMember(t, nsAddr, tc.page)
			// The first page's answer calls block 2 obsolete.
			require.NoError(t, m.vols.Create(context.Background(), 2))
			ns.mu.Lock()
			ns.obsolete = []int64{2}
			ns.mu.Unlock()

			require.True(t, m.sendReport(context.Background(), infos(1, tc.blocks)))
			require.True(t, m.sendReport(context.Background(), nil))
			ns.mu.Lock()
			defer ns.mu.Unlock()
			last := ns.reports[len(ns.reports)-1]
			require.NotEqual(t, ns.reports[0].ReportId, last.ReportId, "the next report has another id")
			require.True(t, last.Page == 0 && !last.More && len(last.Blocks) == 0)
			ns.reports = ns.reports[:len(ns.reports)-1]
			var sizes []int
			var ids []int64
			for i, r := range ns.reports {
				sizes = append(sizes, len(r.Blocks))
				ids = append(ids, reportedIDs(r.Blocks)...)
				require.Equal(t, ns.reports[0].ReportId, r.ReportId, "one report id")
				require.EqualValues(t, i, r.Page)
				require.Equal(t, i < len(ns.reports)-1, r.More, "more on every page but the last")
			}
			require.Equal(t, tc.wantSizes, sizes)
			require.Equal(t, reportedIDs(reportOf(infos(1, tc.blocks))), ids)
			require.Empty(t, m.vols.List(), "block 2, obsolete, deleted")
		})
	}
}

func reportOf(infos []volume.Replica) []*bfspb.ReportedBlock {
	out := make([]*bfspb.ReportedBlock, len(infos))
	for i, info := range infos {
		out[i] = reported(info)
	}
	return out
}

// TestMillionBlockReport sends a report of a million blocks to a real
// nameserver over gRPC on loopback, with the default message limits and
// page size.
func TestMillionBlockReport(t *testing.T) {
	if testing.Short() || raceBuild {
		t.Skip("a million blocks: not with -short or -race")
	}
	cfg := nameserver.DefaultConfig()
	cfg.DataDir, cfg.MetricsAddr, cfg.RaftListen, cfg.Insecure = t.TempDir(), "", "127.0.0.1:0", true
	ns, err := nameserver.New(cfg)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ns.Serve(ctx, lis) }()
	t.Cleanup(func() { cancel(); require.NoError(t, ns.Close()); <-served })
	require.Eventually(t, ns.Leading, 10*time.Second, 5*time.Millisecond, "the nameserver leads its group of one")

	m, sizes := testMember(t, lis.Addr().String(), 0)
	const n = 1 << 20
	// Ids the namespace never handed out: kept, so no answer is empty of
	// work, and large, so their varints are long.
	require.True(t, m.sendReport(ctx, infos(1<<40, n)))
	sizes.mu.Lock()
	defer sizes.mu.Unlock()
	require.Len(t, sizes.pages, n/DefaultReportPage)
	t.Logf("report of %d blocks: %d pages, the biggest %d bytes (limit %d)", n, len(sizes.pages), slices.Max(sizes.pages), 4<<20)
}
