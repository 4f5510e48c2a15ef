package dirlock_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// fleet is the transcripts' chunkservers: replicas in memory, answering
// the nameserver's calls (through TestingKnobs.DialChunkserver) the way a
// chunkserver does, and reporting to it as one does.
type fleet struct {
	mu      sync.Mutex
	servers map[string]*fakeChunkserver
	ns      *nameserver.Server // the nameserver they report to
}

// fakeChunkserver is one chunkserver of the fleet. Its methods are the
// calls the nameserver makes; any other panics (nil embedded interface).
type fakeChunkserver struct {
	bfspb.ChunkServerClient
	f    *fleet
	addr string
	// Guarded by f.mu.
	id   int64 // of its registration with the nameserver
	down bool  // refuses every call, sends no heartbeat
	// failTruncate makes it refuse truncations (a failing disk) while it
	// heartbeats and answers everything else.
	failTruncate bool
	replicas     map[int64]*replica
}

type replica struct {
	size   int64
	sealed bool
}

func newFleet() *fleet { return &fleet{servers: map[string]*fakeChunkserver{}} }

func (f *fleet) add(addr string) *fakeChunkserver {
	f.mu.Lock()
	defer f.mu.Unlock()
	cs := &fakeChunkserver{f: f, addr: addr, replicas: map[int64]*replica{}}
	f.servers[addr] = cs
	return cs
}

func (f *fleet) dial(addr string) (bfspb.ChunkServerClient, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cs, ok := f.servers[addr]
	if !ok {
		return nil, fmt.Errorf("no chunkserver at %s", addr)
	}
	return cs, nil
}

func (f *fleet) get(addr string) *fakeChunkserver {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.servers[addr]
}

// addrs lists the chunkservers, up or down, in order.
func (f *fleet) addrs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for a := range f.servers {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

func (f *fleet) nameserver() *nameserver.Server {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ns
}

// register has cs register with the nameserver and send its first, full
// block report, as a chunkserver does when it starts.
func (cs *fakeChunkserver) register(ctx context.Context) error {
	ns := cs.f.nameserver()
	r, err := ns.Register(ctx, &bfspb.RegisterRequest{Address: cs.addr})
	if err != nil || r.Status != bfspb.StatusCode_OK {
		return fmt.Errorf("register %s: %v %v", cs.addr, r.GetStatus(), err)
	}
	cs.f.mu.Lock()
	cs.id = r.ChunkserverId
	req := &bfspb.BlockReportRequest{ChunkserverId: cs.id, Address: cs.addr, Blocks: cs.reportLocked()}
	cs.f.mu.Unlock()
	rr, err := ns.BlockReport(ctx, req)
	if err != nil || rr.Status != bfspb.StatusCode_OK {
		return fmt.Errorf("block report of %s: %v %v", cs.addr, rr.GetStatus(), err)
	}
	cs.f.mu.Lock()
	defer cs.f.mu.Unlock()
	for _, id := range rr.Obsolete {
		delete(cs.replicas, id)
	}
	return nil
}

func (cs *fakeChunkserver) reportLocked() []*bfspb.ReportedBlock {
	var out []*bfspb.ReportedBlock
	for id, r := range cs.replicas {
		out = append(out, &bfspb.ReportedBlock{BlockId: id, Size: r.size, Version: 1, Sealed: r.sealed})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BlockId < out[j].BlockId })
	return out
}

// heartbeat keeps cs alive unless it is down; a nameserver that no longer
// knows it (declared dead, restarted) has it register again.
func (cs *fakeChunkserver) heartbeat(ctx context.Context) error {
	cs.f.mu.Lock()
	down, id := cs.down, cs.id
	cs.f.mu.Unlock()
	if down {
		return nil
	}
	r, err := cs.f.nameserver().HeartBeat(ctx, &bfspb.HeartBeatRequest{ChunkserverId: id, Address: cs.addr})
	if err != nil {
		return err
	}
	if r.Reregister {
		return cs.register(ctx)
	}
	return nil
}

// received reports replica block sealed at size (BlockReceived).
func (cs *fakeChunkserver) received(block, size int64) {
	cs.f.mu.Lock()
	id := cs.id
	cs.f.mu.Unlock()
	cs.f.nameserver().BlockReceived(context.Background(), &bfspb.BlockReceivedRequest{
		ChunkserverId: id, Address: cs.addr,
		Blocks: []*bfspb.ReportedBlock{{BlockId: block, Size: size, Version: 1, Sealed: true}},
	})
}

func (cs *fakeChunkserver) unavailable() error {
	return status.Errorf(codes.Unavailable, "%s is down", cs.addr)
}

func (cs *fakeChunkserver) CreateBlock(_ context.Context, in *bfspb.CreateBlockRequest, _ ...grpc.CallOption) (*bfspb.CreateBlockResponse, error) {
	cs.f.mu.Lock()
	defer cs.f.mu.Unlock()
	if cs.down {
		return nil, cs.unavailable()
	}
	if cs.replicas[in.BlockId] == nil {
		cs.replicas[in.BlockId] = &replica{}
	}
	return &bfspb.CreateBlockResponse{}, nil
}

// Seal stops writes to the replica (one never seen is recorded sealed at
// 0) and reports it sealed, after answering, as a chunkserver does.
func (cs *fakeChunkserver) Seal(_ context.Context, in *bfspb.SealRequest, _ ...grpc.CallOption) (*bfspb.SealResponse, error) {
	cs.f.mu.Lock()
	defer cs.f.mu.Unlock()
	if cs.down {
		return nil, cs.unavailable()
	}
	r := cs.replicas[in.BlockId]
	if r == nil {
		r = &replica{}
		cs.replicas[in.BlockId] = r
	}
	r.sealed = true
	size := r.size
	go cs.received(in.BlockId, size)
	return &bfspb.SealResponse{}, nil
}

func (cs *fakeChunkserver) Truncate(_ context.Context, in *bfspb.TruncateRequest, _ ...grpc.CallOption) (*bfspb.TruncateResponse, error) {
	cs.f.mu.Lock()
	defer cs.f.mu.Unlock()
	if cs.down {
		return nil, cs.unavailable()
	}
	r := cs.replicas[in.BlockId]
	switch {
	case cs.failTruncate:
		return &bfspb.TruncateResponse{Status: bfspb.StatusCode_INTERNAL, Message: "disk failing"}, nil
	case r == nil:
		return &bfspb.TruncateResponse{Status: bfspb.StatusCode_NOT_FOUND}, nil
	case !r.sealed:
		return &bfspb.TruncateResponse{Status: bfspb.StatusCode_INVALID_ARGUMENT, Message: "not sealed"}, nil
	}
	r.size = min(r.size, in.Size)
	return &bfspb.TruncateResponse{}, nil
}

func (cs *fakeChunkserver) GetBlockInfo(_ context.Context, in *bfspb.GetBlockInfoRequest, _ ...grpc.CallOption) (*bfspb.GetBlockInfoResponse, error) {
	cs.f.mu.Lock()
	defer cs.f.mu.Unlock()
	if cs.down {
		return nil, cs.unavailable()
	}
	r := cs.replicas[in.BlockId]
	if r == nil {
		return &bfspb.GetBlockInfoResponse{Status: bfspb.StatusCode_NOT_FOUND}, nil
	}
	return &bfspb.GetBlockInfoResponse{Size: r.size, Sealed: r.sealed}, nil
}

func (cs *fakeChunkserver) DeleteBlocks(_ context.Context, in *bfspb.DeleteBlocksRequest, _ ...grpc.CallOption) (*bfspb.DeleteBlocksResponse, error) {
	cs.f.mu.Lock()
	defer cs.f.mu.Unlock()
	if cs.down {
		return nil, cs.unavailable()
	}
	for _, id := range in.BlockIds {
		delete(cs.replicas, id)
	}
	return &bfspb.DeleteBlocksResponse{}, nil
}

// ReplicateBlock refuses: the fleet makes no repair copies (the
// nameserver's repair retries them later, which these tests do not wait
// for).
func (cs *fakeChunkserver) ReplicateBlock(context.Context, *bfspb.ReplicateBlockRequest, ...grpc.CallOption) (*bfspb.ReplicateBlockResponse, error) {
	return &bfspb.ReplicateBlockResponse{Status: bfspb.StatusCode_RESOURCE_EXHAUSTED, Message: "the fake fleet makes no copies"}, nil
}

// write lands a client's bytes on the replica of block: it grows to size
// unless it is sealed (I4). It says what happened.
func (cs *fakeChunkserver) write(block, size int64) string {
	cs.f.mu.Lock()
	defer cs.f.mu.Unlock()
	r := cs.replicas[block]
	switch {
	case cs.down:
		return "down"
	case r == nil:
		return "refused: no replica"
	case r.sealed:
		return "refused: sealed"
	}
	r.size = max(r.size, size)
	return fmt.Sprintf("%d bytes", r.size)
}

// sealBy seals the replica as the writer's last packet does, and reports
// it.
func (cs *fakeChunkserver) sealBy(block int64) string {
	cs.f.mu.Lock()
	r := cs.replicas[block]
	if cs.down || r == nil {
		cs.f.mu.Unlock()
		return "no replica"
	}
	r.sealed = true
	size := r.size
	cs.f.mu.Unlock()
	cs.received(block, size)
	return fmt.Sprintf("sealed at %d", size)
}

// describe says what cs holds of block.
func (cs *fakeChunkserver) describe(block int64) string {
	cs.f.mu.Lock()
	defer cs.f.mu.Unlock()
	var b strings.Builder
	r := cs.replicas[block]
	switch {
	case r == nil:
		b.WriteString("none")
	case r.sealed:
		fmt.Fprintf(&b, "sealed %d", r.size)
	default:
		fmt.Fprintf(&b, "open %d", r.size)
	}
	if cs.down {
		b.WriteString(" (down)")
	}
	return b.String()
}
