package chunkserver

import (
	"context"
	"fmt"

	"github.com/golang/glog"
	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/chunkserver/volume"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// receiver is the part of the nameserver the reporter calls.
type receiver interface {
	BlockReceived(ctx context.Context, in *bfspb.BlockReceivedRequest, opts ...grpc.CallOption) (*bfspb.BlockReceivedResponse, error)
}

// reporter tells the nameserver about sealed replicas (BlockReceived),
// through an outbox.
type reporter struct {
	*outbox[volume.Replica]
	ns      receiver
	member  *membership
	metrics *metrics
}

func newReporter(ns receiver, member *membership, c clock.Clock, m *metrics) *reporter {
	r := &reporter{ns: ns, member: member, metrics: m}
	r.outbox = newOutbox("BlockReceived", member, c, maxReportBatch, r.send)
	r.retrying = func(n int) { m.received.WithLabelValues("retry").Add(float64(n)) }
	return r
}

// add queues a report of a replica and wakes the sender.
func (r *reporter) add(rep volume.Replica) { r.outbox.add(rep.ID, rep) }

// send makes one BlockReceived call. Only transport errors and the
// nameserver's "not now" answers (UNAVAILABLE, NOT_LEADER, INTERNAL) are
// retried; any other answer is final.
func (r *reporter) send(ctx context.Context, batch []report[volume.Replica]) error {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	req := &bfspb.BlockReceivedRequest{ChunkserverId: r.member.id.Load(), Address: r.member.addr}
	for _, e := range batch {
		req.Blocks = append(req.Blocks, reported(e.v))
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
