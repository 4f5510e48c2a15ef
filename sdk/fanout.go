package sdk

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/internal/limit"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// fanout writes the packets of one block to every replica of its write set
// at once: one Write stream per replica, with a sender and a receiver
// goroutine each. A packet is acknowledged when every replica still in the
// set has acknowledged it. A replica that fails (transport error, or a
// refusal other than SEALED) is dropped and the write goes on while one
// replica remains. SEALED from any replica is fatal: the nameserver has
// fenced this writer.
//
// A chunkserver ends a Write stream that sent no packet for its idle
// timeout (limit.WriteIdle: the writer's application paused). Such a
// replica stays in the write set: its stream is opened again at the next
// packet, or when the writer waits for acknowledgements, and the packets
// it had not acknowledged are sent again first (a packet sent as the
// stream ended is dropped by the chunkserver, never half applied; one
// that was applied is acknowledged again). So a pause of the writer, however
// long, costs it nothing but a new stream. The block's write token may
// have expired by then (it is good for minutes): the streams opened again
// carry a fresh one, which renew asks the nameserver for (and which it
// refuses a writer fenced meanwhile).
type fanout struct {
	c      *Client
	window int64
	ctx    context.Context
	cancel context.CancelFunc
	// renew asks the nameserver for a new write token of the block.
	renew func(context.Context) (*bfspb.SignedBlockToken, error)
	wg    sync.WaitGroup
	ended sync.Once

	mu struct {
		sync.Mutex
		replicas []*replicaStream
		// unacked are the packets put that some replica in the set has
		// not acknowledged, in order: those an idle replica's new stream
		// sends again. At most window+1.
		unacked []*wirePacket
		// finishing is set by finish: a stream's end is expected.
		finishing bool
		// fatal stops the whole write; set once.
		fatal error
		// streamCtx is ctx carrying the block's write token: every Write
		// stream is opened with it.
		streamCtx context.Context
	}
	cond *sync.Cond
}

type replicaStream struct {
	addr string
	// Guarded by fanout.mu:
	inc   *incarnation // its stream now
	acked int64        // highest sequence number acknowledged
	err   error        // why the replica was dropped; nil while it is in the set
	idle  bool         // its stream ended idle; opened again when needed
}

// incarnation is one Write stream of a replica, with its goroutines.
type incarnation struct {
	stream bfspb.ChunkServer_WriteClient
	sendc  chan *wirePacket
	// stop is closed when the stream ended idle: its sender stops.
	stop chan struct{}
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
// dropped; if none can, it fails. renew gets a new token for the streams
// opened again after a pause.
func newFanout(c *Client, addrs []string, token *bfspb.SignedBlockToken, renew func(context.Context) (*bfspb.SignedBlockToken, error), window int64) (*fanout, error) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fanout{c: c, window: window, ctx: ctx, cancel: cancel, renew: renew}
	f.cond = sync.NewCond(&f.mu)
	if err := f.setToken(token); err != nil {
		cancel()
		return nil, err
	}
	var lastErr error
	for _, addr := range addrs {
		r := &replicaStream{addr: addr}
		f.mu.replicas = append(f.mu.replicas, r)
		inc, err := f.open(addr)
		if err != nil {
			r.err, lastErr = err, err
			continue
		}
		f.startLocked(r, inc)
	}
	if f.liveLocked() == 0 {
		f.abort()
		return nil, fmt.Errorf("%w: no replica of the block could be reached: %v", ErrUnavailable, lastErr)
	}
	return f, nil
}

// setToken makes token the one the streams opened from now on carry.
func (f *fanout) setToken(token *bfspb.SignedBlockToken) error {
	ctx, err := blocktoken.Attach(f.ctx, token)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInternal, err)
	}
	f.mu.Lock()
	f.mu.streamCtx = ctx
	f.mu.Unlock()
	return nil
}

// open opens a Write stream to the replica at addr.
func (f *fanout) open(addr string) (*incarnation, error) {
	cl, err := f.c.chunkserver(addr)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	ctx := f.mu.streamCtx
	f.mu.Unlock()
	stream, err := cl.Write(ctx, grpc.ForceCodecV2(wireCodec))
	if err != nil {
		return nil, err
	}
	return &incarnation{stream: stream, sendc: make(chan *wirePacket, f.window+1), stop: make(chan struct{})}, nil
}

// startLocked makes inc r's stream and starts its goroutines.
func (f *fanout) startLocked(r *replicaStream, inc *incarnation) {
	r.inc, r.idle = inc, false
	f.wg.Add(2)
	go f.send(r, inc)
	go f.receive(r, inc)
}

func (f *fanout) send(r *replicaStream, inc *incarnation) {
	defer f.wg.Done()
	broken := false
	for {
		select {
		case p, ok := <-inc.sendc:
			if !ok {
				inc.stream.CloseSend()
				return
			}
			if broken {
				continue // dropped: drain
			}
			if err := inc.stream.SendMsg(p); err != nil {
				broken = true
				if err != io.EOF {
					f.drop(r, err) // failed here; io.EOF: the receiver learns why it ended
				}
			}
		case <-inc.stop:
			return
		case <-f.ctx.Done():
			return
		}
	}
}

func (f *fanout) receive(r *replicaStream, inc *incarnation) {
	defer f.wg.Done()
	for {
		ack, err := inc.stream.Recv()
		if err == io.EOF {
			if !f.isFinishing() {
				f.drop(r, fmt.Errorf("%w: write stream ended early", ErrUnavailable))
			}
			return
		}
		if err != nil {
			if endedIdle(inc.stream, err) {
				f.idle(r, inc)
				return
			}
			f.drop(r, err)
			return
		}
		switch ack.Status {
		case bfspb.StatusCode_OK:
			f.mu.Lock()
			r.acked = max(r.acked, ack.Seq)
			f.trimLocked()
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

// endedIdle reports whether stream, which failed with err, was ended by
// its chunkserver's write-idle limit.
func endedIdle(stream grpc.ClientStream, err error) bool {
	return status.Code(err) == codes.ResourceExhausted && slices.Contains(stream.Trailer().Get(limit.Trailer), string(limit.WriteIdle))
}

// idle notes that r's stream inc ended idle: r stays in the write set,
// and is opened again when needed (reopenIdle).
func (f *fanout) idle(r *replicaStream, inc *incarnation) {
	f.mu.Lock()
	if r.err == nil && r.inc == inc {
		r.idle = true
	}
	f.mu.Unlock()
	close(inc.stop)
	f.cond.Broadcast()
}

func (f *fanout) isFinishing() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.finishing
}

// trimLocked forgets the packets every replica in the set acknowledged.
func (f *fanout) trimLocked() {
	m := f.minAckedLocked()
	i := 0
	for i < len(f.mu.unacked) && f.mu.unacked[i].seq <= m {
		f.mu.unacked[i] = nil
		i++
	}
	f.mu.unacked = f.mu.unacked[i:]
}

// reopenIdle opens a new stream to every replica whose stream ended
// idle, with a new write token, and sends it first the packets it has not
// acknowledged. A replica that cannot be reached is dropped; a token the
// nameserver refuses fails the write.
func (f *fanout) reopenIdle(ctx context.Context) {
	f.mu.Lock()
	var idle []*replicaStream
	for _, r := range f.mu.replicas {
		if r.err == nil && r.idle {
			idle = append(idle, r)
		}
	}
	f.mu.Unlock()
	if len(idle) == 0 {
		return
	}
	token, err := f.renew(ctx)
	if err == nil {
		err = f.setToken(token)
	}
	if err != nil {
		f.fail(fmt.Errorf("renewing the block's write token after a pause: %w", err))
		return
	}
	for _, r := range idle {
		inc, err := f.open(r.addr)
		if err != nil {
			f.drop(r, fmt.Errorf("opening its write stream again after a pause: %w", err))
			continue
		}
		f.mu.Lock()
		if f.mu.fatal != nil || r.err != nil {
			f.mu.Unlock()
			continue // aborted meanwhile: its context ends the stream
		}
		for _, p := range f.mu.unacked {
			if p.seq > r.acked {
				inc.sendc <- p // room for window+1: all unacknowledged
			}
		}
		f.startLocked(r, inc)
		f.mu.Unlock()
	}
}

// idleLocked reports whether a replica in the set waits to be opened
// again.
func (f *fanout) idleLocked() bool {
	for _, r := range f.mu.replicas {
		if r.err == nil && r.idle {
			return true
		}
	}
	return false
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
// unacknowledged, opening again the streams that ended idle first.
func (f *fanout) put(ctx context.Context, p *wirePacket) error {
	for {
		f.reopenIdle(ctx)
		var sendcs []chan *wirePacket
		idle := false
		err := f.wait(ctx, func() bool { return f.idleLocked() || p.seq-f.minAckedLocked() <= f.window }, func() {
			if idle = f.idleLocked(); idle {
				return
			}
			f.mu.unacked = append(f.mu.unacked, p)
			for _, r := range f.mu.replicas {
				if r.err == nil {
					sendcs = append(sendcs, r.inc.sendc)
				}
			}
		})
		if err != nil {
			return err
		}
		if idle {
			continue // a stream ended idle while put waited
		}
		for _, c := range sendcs {
			// Never blocks: at most window+1 packets are unacknowledged. A
			// stream that ends idle meanwhile leaves p to its next one.
			c <- p
		}
		return nil
	}
}

// acked waits until every live replica has acknowledged seq.
func (f *fanout) acked(ctx context.Context, seq int64) error {
	for {
		f.reopenIdle(ctx)
		done := false
		err := f.wait(ctx, func() bool { return f.minAckedLocked() >= seq || f.idleLocked() }, func() {
			done = f.minAckedLocked() >= seq
		})
		if err != nil || done {
			return err
		}
	}
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
		f.mu.Lock()
		f.mu.finishing = true
		var sendcs []chan *wirePacket
		for _, r := range f.mu.replicas {
			if r.inc != nil {
				sendcs = append(sendcs, r.inc.sendc)
			}
		}
		f.mu.Unlock()
		for _, c := range sendcs {
			close(c)
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
