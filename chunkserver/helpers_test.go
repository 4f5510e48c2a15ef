package chunkserver

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// recorder is a test-only nameserver: it answers the four
// chunkserver-facing calls over real gRPC and records them.
type recorder struct {
	bfspb.UnimplementedNameServerServer

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every call
	registers  []*bfspb.RegisterRequest
	heartbeats []*bfspb.HeartBeatRequest
	reports    []*bfspb.BlockReportRequest
	received   []*bfspb.BlockReceivedRequest
	bad        []*bfspb.ReportBadReplicasRequest
	lastByID   map[int64]*bfspb.ReportedBlock // latest BlockReceived report per block
	// Knobs, set by tests under mu.
	reregister   bool    // answer the next heartbeat with reregister
	obsolete     []int64 // returned by the next block report
	failReceived int     // answer this many BlockReceived calls UNAVAILABLE
	refused      int     // BlockReceived calls answered UNAVAILABLE so far
	clusterID    string  // sent in every answer that carries one
}

func startRecorder(t testing.TB) (*recorder, string) {
	t.Helper()
	r := &recorder{changed: make(chan struct{}), lastByID: make(map[int64]*bfspb.ReportedBlock), clusterID: "test-cluster"}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	bfspb.RegisterNameServerServer(srv, r)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return r, lis.Addr().String()
}

// record runs fn under mu and wakes waiters.
func (r *recorder) record(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn()
	close(r.changed)
	r.changed = make(chan struct{})
}

// wait waits until cond (called with mu held) holds.
func (r *recorder) wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok, changed := cond(), r.changed
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (r *recorder) Register(_ context.Context, req *bfspb.RegisterRequest) (*bfspb.RegisterResponse, error) {
	var id int64
	var cid string
	r.record(func() { r.registers = append(r.registers, req); id, cid = int64(len(r.registers)), r.clusterID })
	return &bfspb.RegisterResponse{ChunkserverId: id, ClusterId: cid}, nil
}

func (r *recorder) HeartBeat(_ context.Context, req *bfspb.HeartBeatRequest) (*bfspb.HeartBeatResponse, error) {
	resp := &bfspb.HeartBeatResponse{}
	r.record(func() {
		r.heartbeats = append(r.heartbeats, req)
		if r.reregister {
			r.reregister = false
			resp.Status, resp.Reregister = bfspb.StatusCode_UNAVAILABLE, true
		}
	})
	return resp, nil
}

func (r *recorder) BlockReport(_ context.Context, req *bfspb.BlockReportRequest) (*bfspb.BlockReportResponse, error) {
	resp := &bfspb.BlockReportResponse{}
	r.record(func() {
		r.reports = append(r.reports, req)
		resp.Obsolete, r.obsolete = r.obsolete, nil
		resp.ClusterId = r.clusterID
	})
	return resp, nil
}

func (r *recorder) BlockReceived(_ context.Context, req *bfspb.BlockReceivedRequest) (*bfspb.BlockReceivedResponse, error) {
	resp := &bfspb.BlockReceivedResponse{}
	r.record(func() {
		if r.refused < r.failReceived {
			r.refused++
			resp.Status = bfspb.StatusCode_UNAVAILABLE
			return
		}
		r.received = append(r.received, req)
		for _, b := range req.Blocks {
			r.lastByID[b.BlockId] = b
		}
	})
	return resp, nil
}

func (r *recorder) ReportBadReplicas(_ context.Context, req *bfspb.ReportBadReplicasRequest) (*bfspb.ReportBadReplicasResponse, error) {
	r.record(func() { r.bad = append(r.bad, req) })
	return &bfspb.ReportBadReplicasResponse{}, nil
}

// receivedLocked returns the last BlockReceived report of id.
func (r *recorder) receivedLocked(id int64) *bfspb.ReportedBlock { return r.lastByID[id] }

// chunkserver is a running Server with a client.
type chunkserver struct {
	*Server
	addr   string
	client bfspb.ChunkServerClient
}

// startChunkServer runs a chunkserver on 127.0.0.1:0 with its data in a
// fresh temporary directory (unless cfg names one) until the test ends.
// The package's tests run it in plaintext (beside a plaintext fake
// nameserver); the clusters of the other packages' tests use TLS.
func startChunkServer(t testing.TB, cfg Config) *chunkserver {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.Insecure = true
	if _, fake := cfg.Clock.(*clock.Fake); fake && cfg.VolumeCheckTimeout == 0 {
		// The test moves its clock by hand, faster than the disk works:
		// a check of a healthy disk under way must not time out.
		cfg.VolumeCheckTimeout = 1000 * time.Hour
	}
	srv, err := New(cfg)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		conn.Close()
		require.NoError(t, srv.Close())
		require.NoError(t, <-served)
	})
	return &chunkserver{Server: srv, addr: lis.Addr().String(), client: bfspb.NewChunkServerClient(conn)}
}

func packet(id, seq, off int64, data string) *bfspb.WritePacket {
	return &bfspb.WritePacket{BlockId: id, Seq: seq, Offset: off, Data: []byte(data), Crc32C: blockstore.Checksum([]byte(data))}
}

// writeStream opens a Write stream that the test ends.
func writeStream(t testing.TB, c bfspb.ChunkServerClient) grpc.BidiStreamingClient[bfspb.WritePacket, bfspb.WriteAck] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := c.Write(ctx)
	require.NoError(t, err)
	return st
}

// roundTrip sends one packet and returns its ack.
func roundTrip(t *testing.T, st grpc.BidiStreamingClient[bfspb.WritePacket, bfspb.WriteAck], p *bfspb.WritePacket) *bfspb.WriteAck {
	t.Helper()
	require.NoError(t, st.Send(p))
	ack, err := st.Recv()
	require.NoError(t, err)
	require.Equal(t, p.Seq, ack.Seq)
	require.Equal(t, p.BlockId, ack.BlockId)
	return ack
}

// readAll reads a range of a block, checking the offsets of the chunks;
// it returns the bytes and the status that ended the stream.
func readAll(t *testing.T, c bfspb.ChunkServerClient, id, off, length int64) ([]byte, bfspb.StatusCode) {
	t.Helper()
	st, err := c.Read(context.Background(), &bfspb.ReadRequest{BlockId: id, Offset: off, Length: length})
	require.NoError(t, err)
	var data []byte
	for {
		chunk, err := st.Recv()
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			return data, bfspb.StatusCode_OK
		}
		if chunk.Status != bfspb.StatusCode_OK {
			require.NotEmpty(t, chunk.Message)
			return data, chunk.Status
		}
		require.Equal(t, off+int64(len(data)), chunk.Offset)
		data = append(data, chunk.Data...)
	}
}

// createBlock makes an empty replica of block id, as the nameserver's
// AddBlock does.
func createBlock(t testing.TB, c bfspb.ChunkServerClient, id int64) {
	t.Helper()
	r, err := c.CreateBlock(context.Background(), &bfspb.CreateBlockRequest{BlockId: id})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, r.Status, r.Message)
}
