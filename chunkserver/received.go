package chunkserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/golang/glog"
	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/retry"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// maxReceivedBatch bounds the blocks of one BlockReceived call.
const maxReceivedBatch = 1000

// Backoff (jittered, see retry.New) between BlockReceived attempts.
const (
	receivedRetryMin = 20 * time.Millisecond
	receivedRetryMax = 2 * time.Second
)

// receiver is the part of the nameserver the reporter calls.
type receiver interface {
	BlockReceived(ctx context.Context, in *bfspb.BlockReceivedRequest, opts ...grpc.CallOption) (*bfspb.BlockReceivedResponse, error)
}

// reporter tells the nameserver about sealed replicas (BlockReceived). A
// report goes out as soon as it is added; reports added while a call is
// in flight go together in the next one. A failed call is retried, with
// backoff, until the nameserver answers.
type reporter struct {
	ns      receiver
	member  *membership
	clock   clock.Clock
	metrics *metrics
	// kick wakes run; a buffered slot of one, so adds never block.
	kick chan struct{}

	mu struct {
		sync.Mutex
		// pending holds the reports not yet taken by the nameserver.
		pending map[blockstore.BlockID]blockstore.BlockInfo
	}
}

func newReporter(ns receiver, member *membership, c clock.Clock, m *metrics) *reporter {
	r := &reporter{ns: ns, member: member, clock: c, metrics: m, kick: make(chan struct{}, 1)}
	r.mu.pending = make(map[blockstore.BlockID]blockstore.BlockInfo)
	return r
}

// add queues a report of info and wakes the sender.
func (r *reporter) add(info blockstore.BlockInfo) {
	r.mu.Lock()
	r.mu.pending[info.ID] = info
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run sends reports until ctx ends; it waits for the first registration
// (the calls carry the chunkserver id).
func (r *reporter) run(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-r.member.registered:
	}
	bo := retry.New(receivedRetryMin, receivedRetryMax)
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		}
		for !r.flush(ctx) {
			if !retry.Sleep(ctx, r.clock, bo) {
				return
			}
		}
		bo.Reset()
	}
}

// flush sends batches until nothing is pending; false if a call failed
// (its batch is pending again).
func (r *reporter) flush(ctx context.Context) bool {
	for {
		batch := r.take()
		if len(batch) == 0 {
			return true
		}
		if err := r.send(ctx, batch); err != nil {
			r.putBack(batch)
			r.metrics.received.WithLabelValues("retry").Add(float64(len(batch)))
			if ctx.Err() == nil {
				glog.Warningf("BlockReceived for %d blocks: %v; will retry", len(batch), err)
			}
			return false
		}
	}
}

func (r *reporter) take() []blockstore.BlockInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	batch := make([]blockstore.BlockInfo, 0, min(len(r.mu.pending), maxReceivedBatch))
	for id, info := range r.mu.pending {
		if len(batch) == maxReceivedBatch {
			break
		}
		batch = append(batch, info)
		delete(r.mu.pending, id)
	}
	return batch
}

// putBack requeues a batch, unless a newer report of a block came since.
func (r *reporter) putBack(batch []blockstore.BlockInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, info := range batch {
		if _, ok := r.mu.pending[info.ID]; !ok {
			r.mu.pending[info.ID] = info
		}
	}
}

// send makes one BlockReceived call. Only transport errors and the
// nameserver's "not now" answers (UNAVAILABLE, NOT_LEADER, INTERNAL) are
// retried; any other answer is final.
func (r *reporter) send(ctx context.Context, batch []blockstore.BlockInfo) error {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	req := &bfspb.BlockReceivedRequest{ChunkserverId: r.member.id.Load(), Address: r.member.addr}
	for _, info := range batch {
		req.Blocks = append(req.Blocks, reported(info))
	}
	resp, err := r.ns.BlockReceived(ctx, req)
	r.metrics.nsCall("BlockReceived", resp.GetStatus(), err)
	if err != nil {
		return err
	}
	switch resp.Status {
	case bfspb.StatusCode_OK:
		r.metrics.received.WithLabelValues("ok").Add(float64(len(batch)))
	case bfspb.StatusCode_UNAVAILABLE, bfspb.StatusCode_NOT_LEADER, bfspb.StatusCode_INTERNAL:
		return fmt.Errorf("%v: %s", resp.Status, resp.Message)
	default:
		r.metrics.received.WithLabelValues("dropped").Add(float64(len(batch)))
		glog.Errorf("nameserver refused BlockReceived for %d blocks: %v %s", len(batch), resp.Status, resp.Message)
	}
	return nil
}
