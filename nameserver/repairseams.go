package nameserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/bfs-go/bfs/nameserver/blockmap"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/nameserver/repair"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// The nameserver's side of the interfaces repair.Scheduler takes.

var (
	_ repair.Namespace    = repairNamespace{}
	_ repair.Replicas     = repairReplicas{}
	_ repair.Chunkservers = repairChunkservers{}
)

// repairNamespace is the namespace's blocks as the repair sees them.
type repairNamespace struct{ ns *namespace.Store }

func blockOf(fb namespace.FileBlock) repair.Block {
	return repair.Block{ID: fb.ID, Size: fb.Size, Version: fb.Version, Replication: fb.Replication, Open: fb.Open}
}

func (n repairNamespace) Blocks(fn func(repair.Block) error) error {
	return n.ns.FileBlocks(func(fb namespace.FileBlock) error { return fn(blockOf(fb)) })
}

func (n repairNamespace) Block(id int64) (repair.Block, error) {
	fb, err := n.ns.Block(id)
	if errors.Is(err, namespace.ErrNotFound) {
		return repair.Block{}, fmt.Errorf("%w: %w", repair.ErrGone, err)
	}
	if err != nil {
		return repair.Block{}, err
	}
	return blockOf(fb), nil
}

// repairReplicas is the block map under the server's placement policy.
type repairReplicas struct{ s *term }

func (r repairReplicas) States(b blockmap.BlockID) []blockmap.ReplicaState {
	return r.s.blocks.States(b)
}

func (r repairReplicas) Target(b blockmap.BlockID, exclude []string) (string, error) {
	return r.s.blocks.PickFor(b, r.s.placement(), exclude)
}

func (r repairReplicas) DropReplica(b blockmap.BlockID, addr string) { r.s.blocks.DropReplica(b, addr) }

// repairChunkservers sends the copies over gRPC; deletes go through the
// server's deleteReplicas, which holds them back while creates of the
// block are in flight.
type repairChunkservers struct{ s *term }

// replicateErrors maps the answers of ReplicateBlock to the repair's
// errors.
var replicateErrors = map[bfspb.StatusCode]error{
	bfspb.StatusCode_EXISTS:             repair.ErrExists,
	bfspb.StatusCode_CORRUPT:            repair.ErrSourceCorrupt,
	bfspb.StatusCode_NOT_FOUND:          repair.ErrSourceNotFound,
	bfspb.StatusCode_UNAVAILABLE:        repair.ErrSourceUnavailable,
	bfspb.StatusCode_RESOURCE_EXHAUSTED: repair.ErrBusy,
	bfspb.StatusCode_WRONG_CLUSTER:      repair.ErrWrongCluster,
}

func (c repairChunkservers) Replicate(ctx context.Context, target, source string, block, size int64, version uint64) error {
	cl, err := c.s.chunkserver(target)
	if err != nil {
		return err
	}
	// The target reads the source with a token issued to the target's
	// certificate, and only from the certificate that registered the
	// source.
	targetID, _ := c.s.regs.of(target)
	sourceID, _ := c.s.regs.of(source)
	token := c.s.issue(&bfspb.BlockMeta{Id: block, Version: version}, bfspb.BlockAccess_BLOCK_ACCESS_READ, targetID)
	resp, err := cl.ReplicateBlock(ctx, &bfspb.ReplicateBlockRequest{
		BlockId: block, Source: source, Size: size, Version: version, ClusterId: c.s.ns.ClusterID(), Term: c.s.num,
		SourceToken: token, SourceIdentity: sourceID,
	})
	switch {
	case err != nil:
		return err
	case resp.Status == bfspb.StatusCode_OK:
		return nil
	case replicateErrors[resp.Status] != nil:
		return fmt.Errorf("%w (%v: %s)", replicateErrors[resp.Status], resp.Status, resp.Message)
	}
	return fmt.Errorf("%v: %s", resp.Status, resp.Message)
}

func (c repairChunkservers) Delete(addr string, blocks []int64) { c.s.deleteReplicas(addr, blocks) }

// startRepair starts the scheduler of re-replication; it acts only once
// safe mode is over.
func (s *term) startRepair() error {
	var err error
	s.repair, err = repair.New(repair.Config{
		Namespace:          repairNamespace{s.ns},
		Replicas:           repairReplicas{s},
		Chunkservers:       repairChunkservers{s},
		Clock:              s.cfg.Clock,
		Hold:               s.safe.On,
		Interval:           s.cfg.RepairInterval,
		MaxCopies:          s.cfg.RepairMaxCopies,
		MaxCopiesPerServer: s.cfg.RepairMaxCopiesPerServer,
		OnCopy:             s.metrics.repairs.copied,
		OnTrim:             s.metrics.repairs.trimmed.Inc,
		OnDropCorrupt:      s.metrics.repairs.corruptDeleted.Inc,
	})
	return err
}
