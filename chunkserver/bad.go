package chunkserver

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/golang/glog"
	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/retry"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// badReceiver is the part of the nameserver the bad-replica reporter calls.
type badReceiver interface {
	ReportBadReplicas(ctx context.Context, in *bfspb.ReportBadReplicasRequest, opts ...grpc.CallOption) (*bfspb.ReportBadReplicasResponse, error)
}

// badReporter tells the nameserver of the replicas found corrupt here
// (ReportBadReplicas), like reporter does of sealed ones: queued without
// blocking, sent together, retried with backoff until the nameserver
// answers.
type badReporter struct {
	ns     badReceiver
	member *membership
	clock  clock.Clock
	kick   chan struct{}

	mu struct {
		sync.Mutex
		// pending maps a block to why its replica is bad.
		pending map[blockstore.BlockID]string
	}
}

func newBadReporter(ns badReceiver, member *membership, c clock.Clock) *badReporter {
	r := &badReporter{ns: ns, member: member, clock: c, kick: make(chan struct{}, 1)}
	r.mu.pending = make(map[blockstore.BlockID]string)
	return r
}

// add queues a report and wakes the sender.
func (r *badReporter) add(id blockstore.BlockID, reason string) {
	r.mu.Lock()
	r.mu.pending[id] = reason
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run sends reports until ctx ends, from the first registration on.
func (r *badReporter) run(ctx context.Context) {
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

// flush sends what is pending; false if the call failed (the reports are
// pending again).
func (r *badReporter) flush(ctx context.Context) bool {
	r.mu.Lock()
	batch := r.mu.pending
	r.mu.pending = make(map[blockstore.BlockID]string)
	r.mu.Unlock()
	if len(batch) == 0 {
		return true
	}
	err := r.send(ctx, batch)
	if err == nil {
		return true
	}
	r.mu.Lock()
	for id, reason := range batch {
		if _, ok := r.mu.pending[id]; !ok {
			r.mu.pending[id] = reason
		}
	}
	r.mu.Unlock()
	if ctx.Err() == nil {
		glog.Warningf("ReportBadReplicas for %d replicas: %v; will retry", len(batch), err)
	}
	return false
}

// errRetry marks the nameserver's "not now" answers.
var errRetry = errors.New("nameserver busy")

func (r *badReporter) send(ctx context.Context, batch map[blockstore.BlockID]string) error {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	req := &bfspb.ReportBadReplicasRequest{ChunkserverId: r.member.id.Load(), Address: r.member.addr}
	for id, reason := range batch {
		req.Replicas = append(req.Replicas, &bfspb.BadReplica{BlockId: int64(id), Address: r.member.addr, Reason: reason})
	}
	resp, err := r.ns.ReportBadReplicas(ctx, req)
	r.member.metrics.nsCall("ReportBadReplicas", resp.GetStatus(), err)
	if err != nil {
		return err
	}
	switch resp.Status {
	case bfspb.StatusCode_OK:
	case bfspb.StatusCode_UNAVAILABLE, bfspb.StatusCode_NOT_LEADER, bfspb.StatusCode_INTERNAL:
		return fmt.Errorf("%w: %v: %s", errRetry, resp.Status, resp.Message)
	default:
		glog.Errorf("nameserver refused ReportBadReplicas for %d replicas: %v %s", len(batch), resp.Status, resp.Message)
	}
	return nil
}
