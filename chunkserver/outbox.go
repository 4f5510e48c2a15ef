package chunkserver

import (
	"context"
	"sync"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/retry"
)

// maxReportBatch bounds the blocks of one report call.
const maxReportBatch = 1000

// Backoff (jittered, see retry.New) between attempts of a report call.
const (
	reportRetryMin = 20 * time.Millisecond
	reportRetryMax = 2 * time.Second
)

// outbox holds reports to the nameserver, one per block, and sends them
// from its run loop: a report goes out as soon as it is added, reports
// added while a call is in flight go together in the next one (at most
// maxBatch a call), and a failed call is retried with backoff until the
// nameserver answers. Adding never blocks. The BlockReceived reporter and
// the bad-replica reporter are each one.
type outbox[V any] struct {
	// rpc names the call, for logs.
	rpc      string
	member   *membership
	clock    clock.Clock
	maxBatch int
	// send makes one call; only an error it returns is retried.
	send func(ctx context.Context, batch []report[V]) error
	// retrying, if set, hears of every batch put back for a retry.
	retrying func(n int)
	// kick wakes run; a buffered slot of one, so adds never block.
	kick chan struct{}

	mu struct {
		sync.Mutex
		// pending holds the reports not yet taken by the nameserver.
		pending map[blockstore.BlockID]V
	}
}

// report is one block's entry in a batch.
type report[V any] struct {
	id blockstore.BlockID
	v  V
}

func newOutbox[V any](rpc string, member *membership, c clock.Clock, maxBatch int, send func(context.Context, []report[V]) error) *outbox[V] {
	o := &outbox[V]{rpc: rpc, member: member, clock: c, maxBatch: maxBatch, send: send, kick: make(chan struct{}, 1)}
	o.mu.pending = make(map[blockstore.BlockID]V)
	return o
}

// add queues v as block id's report (replacing one not sent yet) and
// wakes the sender.
func (o *outbox[V]) add(id blockstore.BlockID, v V) {
	o.mu.Lock()
	o.mu.pending[id] = v
	o.mu.Unlock()
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// run sends reports until ctx ends; it waits for the first registration
// (the calls carry the chunkserver id).
func (o *outbox[V]) run(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-o.member.registered:
	}
	bo := retry.New(reportRetryMin, reportRetryMax)
	for {
		select {
		case <-ctx.Done():
			return
		case <-o.kick:
		}
		for !o.flush(ctx) {
			if !retry.Sleep(ctx, o.clock, bo) {
				return
			}
		}
		bo.Reset()
	}
}

// flush sends batches until nothing is pending; false if a call failed
// (its batch is pending again).
func (o *outbox[V]) flush(ctx context.Context) bool {
	for {
		batch := o.take()
		if len(batch) == 0 {
			return true
		}
		if err := o.send(ctx, batch); err != nil {
			o.putBack(batch)
			if o.retrying != nil {
				o.retrying(len(batch))
			}
			if ctx.Err() == nil {
				glog.Warningf("%s for %d blocks: %v; will retry", o.rpc, len(batch), err)
			}
			return false
		}
	}
}

func (o *outbox[V]) take() []report[V] {
	o.mu.Lock()
	defer o.mu.Unlock()
	batch := make([]report[V], 0, min(len(o.mu.pending), o.maxBatch))
	for id, v := range o.mu.pending {
		if len(batch) == o.maxBatch {
			break
		}
		batch = append(batch, report[V]{id, v})
		delete(o.mu.pending, id)
	}
	return batch
}

// putBack requeues a batch, unless a newer report of a block came since.
func (o *outbox[V]) putBack(batch []report[V]) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range batch {
		if _, ok := o.mu.pending[r.id]; !ok {
			o.mu.pending[r.id] = r.v
		}
	}
}
