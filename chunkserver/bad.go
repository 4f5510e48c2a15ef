package chunkserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/golang/glog"
	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// badReceiver is the part of the nameserver the bad-replica reporter calls.
type badReceiver interface {
	ReportBadReplicas(ctx context.Context, in *bfspb.ReportBadReplicasRequest, opts ...grpc.CallOption) (*bfspb.ReportBadReplicasResponse, error)
}

// badReporter tells the nameserver of the replicas found corrupt here
// (ReportBadReplicas), through an outbox like the BlockReceived reports:
// queued without blocking, sent together, retried with backoff until the
// nameserver answers. A report is why the replica is bad.
type badReporter struct {
	*outbox[string]
	ns     badReceiver
	member *membership
}

func newBadReporter(ns badReceiver, member *membership, c clock.Clock) *badReporter {
	r := &badReporter{ns: ns, member: member}
	r.outbox = newOutbox("ReportBadReplicas", member, c, maxReportBatch, r.send)
	return r
}

// errRetry marks the nameserver's "not now" answers.
var errRetry = errors.New("nameserver busy")

func (r *badReporter) send(ctx context.Context, batch []report[string]) error {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	req := &bfspb.ReportBadReplicasRequest{ChunkserverId: r.member.id.Load(), Address: r.member.addr}
	for _, e := range batch {
		req.Replicas = append(req.Replicas, &bfspb.BadReplica{BlockId: int64(e.id), Address: r.member.addr, Reason: e.v})
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
