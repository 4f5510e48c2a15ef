package sdk

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// fanout writes the packets of one block to every replica of its write set
// at once: one Write stream per replica, with a sender and a receiver
// goroutine each. A packet is acknowledged when every replica still in the
// set has acknowledged it. A replica that fails (transport error, or a
// refusal other than SEALED) is dropped and the write goes on while one
// replica remains. SEALED from any replica is fatal: the nameserver has
// fenced this writer.
type fanout struct {
	window int64
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ended  sync.Once

	mu struct {
		sync.Mutex
		replicas []*replicaStream
		// fatal stops the whole write; set once.
		fatal error
	}
	cond *sync.Cond
}

type replicaStream struct {
	addr   string
	stream bfspb.ChunkServer_WriteClient
	sendc  chan *wirePacket
	// Guarded by fanout.mu:
	acked int64 // highest sequence number acknowledged
	err   error // why the replica was dropped; nil while it is in the set
}

// wirePacket is a WritePacket in its wire format (see encodePacket),
// encoded once and sent as is to every replica. Its bytes are never
// changed once encoded: the streams read them concurrently.
type wirePacket struct {
	seq int64
	b   []byte
}

// wireCodec is the codec of the Write streams: it sends a *wirePacket as
// its bytes and handles everything else (the acks) with the proto codec,
// whose name it has: the wire format is the same.
var wireCodec = packetCodec{encoding.GetCodecV2(proto.Name)}

type packetCodec struct{ proto encoding.CodecV2 }

func (c packetCodec) Marshal(v any) (mem.BufferSlice, error) {
	if p, ok := v.(*wirePacket); ok {
		return mem.BufferSlice{mem.SliceBuffer(p.b)}, nil
	}
	return c.proto.Marshal(v)
}

func (c packetCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

func (c packetCodec) Name() string { return proto.Name }

// newFanout opens a Write stream to every address, each carrying the
// block's write token. Addresses that cannot be reached start out
// dropped; if none can, it fails.
func newFanout(c *Client, addrs []string, token *bfspb.SignedBlockToken, window int64) (*fanout, error) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fanout{window: window, ctx: ctx, cancel: cancel}
	streamCtx, err := blocktoken.Attach(ctx, token)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%w: %v", ErrInternal, err)
	}
	f.cond = sync.NewCond(&f.mu)
	var lastErr error
	for _, addr := range addrs {
		r := &replicaStream{addr: addr, sendc: make(chan *wirePacket, window+1)}
		f.mu.replicas = append(f.mu.replicas, r)
		cl, err := c.chunkserver(addr)
		if err == nil {
			r.stream, err = cl.Write(streamCtx, grpc.ForceCodecV2(wireCodec))
		}
		if err != nil {
			r.err, lastErr = err, err
			continue
		}
		f.wg.Add(2)
		go f.send(r)
		go f.receive(r)
	}
	if f.liveLocked() == 0 {
		f.abort()
		return nil, fmt.Errorf("%w: no replica of the block could be reached: %v", ErrUnavailable, lastErr)
	}
	return f, nil
}

func (f *fanout) send(r *replicaStream) {
	defer f.wg.Done()
	broken := false
	for {
		select {
		case p, ok := <-r.sendc:
			if !ok {
				r.stream.CloseSend()
				return
			}
			if broken {
				continue // dropped: drain
			}
			if err := r.stream.SendMsg(p); err != nil {
				f.drop(r, err)
				broken = true
			}
		case <-f.ctx.Done():
			return
		}
	}
}

func (f *fanout) receive(r *replicaStream) {
	defer f.wg.Done()
	for {
		ack, err := r.stream.Recv()
		if err == io.EOF {
			return
		}
		if err != nil {
			f.drop(r, err)
			return
		}
		switch ack.Status {
		case bfspb.StatusCode_OK:
			f.mu.Lock()
			r.acked = max(r.acked, ack.Seq)
			f.mu.Unlock()
			f.cond.Broadcast()
		case bfspb.StatusCode_SEALED:
			f.fail(fmt.Errorf("%w: replica %s: %s", ErrSealed, r.addr, ack.Message))
			return
		default:
			f.drop(r, statusError(ack.Status, ack.Message, nil))
			return
		}
	}
}

// drop removes r from the write set; with no replica left the write fails.
func (f *fanout) drop(r *replicaStream, err error) {
	f.mu.Lock()
	if r.err == nil {
		r.err = fmt.Errorf("replica %s: %w", r.addr, err)
	}
	if f.liveLocked() == 0 && f.mu.fatal == nil {
		// The last failure is wrapped too, so a disk that is full on
		// every replica is still ErrResourceExhausted.
		f.mu.fatal = fmt.Errorf("%w: every replica failed, last: %w", ErrUnavailable, r.err)
	}
	f.mu.Unlock()
	f.cond.Broadcast()
}

func (f *fanout) fail(err error) {
	f.mu.Lock()
	if f.mu.fatal == nil {
		f.mu.fatal = err
	}
	f.mu.Unlock()
	f.cond.Broadcast()
}

func (f *fanout) liveLocked() int {
	n := 0
	for _, r := range f.mu.replicas {
		if r.err == nil {
			n++
		}
	}
	return n
}

// minAckedLocked is the highest sequence number every live replica has.
func (f *fanout) minAckedLocked() int64 {
	m := int64(-1)
	for _, r := range f.mu.replicas {
		if r.err == nil && (m < 0 || r.acked < m) {
			m = r.acked
		}
	}
	return m
}

// put sends p to every live replica once fewer than window packets are
// unacknowledged.
func (f *fanout) put(ctx context.Context, p *wirePacket) error {
	var live []*replicaStream
	err := f.wait(ctx, func() bool { return p.seq-f.minAckedLocked() <= f.window }, func() {
		for _, r := range f.mu.replicas {
			if r.err == nil {
				live = append(live, r)
			}
		}
	})
	if err != nil {
		return err
	}
	for _, r := range live {
		r.sendc <- p // never blocks: at most window+1 packets are unacknowledged
	}
	return nil
}

// acked waits until every live replica has acknowledged seq.
func (f *fanout) acked(ctx context.Context, seq int64) error {
	return f.wait(ctx, func() bool { return f.minAckedLocked() >= seq }, nil)
}

// wait blocks until ready (called with the mutex held) holds, the write
// failed, or ctx ends; then runs then (also with the mutex held).
func (f *fanout) wait(ctx context.Context, ready func() bool, then func()) error {
	stop := context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.cond.Broadcast()
	})
	defer stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.mu.fatal == nil && ctx.Err() == nil && !ready() {
		f.cond.Wait()
	}
	if f.mu.fatal != nil {
		return f.mu.fatal
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if then != nil {
		then()
	}
	return nil
}

// dropped lists the replicas removed from the write set.
func (f *fanout) dropped() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.mu.replicas {
		if r.err != nil {
			out = append(out, r.addr)
		}
	}
	return slices.Clip(out)
}

// finish ends the streams after the last packet and waits for the
// goroutines. Only the writer's goroutine calls it.
func (f *fanout) finish() {
	f.ended.Do(func() {
		for _, r := range f.mu.replicas {
			close(r.sendc)
		}
		f.wg.Wait()
		f.cancel()
	})
}

// abort cancels the streams and waits for the goroutines. It is safe to
// call from any goroutine, more than once, and after finish.
func (f *fanout) abort() {
	f.cancel()
	f.fail(fmt.Errorf("%w: write aborted", ErrClosed))
	f.ended.Do(func() {})
	f.wg.Wait()
}
