package nameserver

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/nameserver/blockmap"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Settling is the closer's last step for the files a cleaning drains:
// once a file is closed, every live replica of its block is brought to
// the agreed length before the cleaning may persist UNLOCKED (I5).

// settle brings every live replica of the block of entry, a file the
// close f has closed, to the file's length: the replicas f did not settle
// (a chunkserver away during the close, a replica reported late) or, when
// f knew nothing (the file was closed already, maybe by a close committed
// before a restart whose truncations never went out), all of them: those
// of the write set and those the block map knows. It returns the bytes it
// cut, and open if the file is open for write again, to be closed anew.
func (c *closer) settle(entry uint64, f *closing) (truncated int64, open bool, err error) {
	var info *bfspb.FileInfo
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		_, info, err = c.s.ns.PathOf(entry)
		if errors.Is(err, namespace.ErrNotFound) {
			return 0, false, nil // deleted: its blocks go with it
		}
		if err == nil {
			break
		}
		glog.Warningf("checking the replicas of file %d: %v; retrying", entry, err)
		if !c.sleep(backoff) {
			return 0, false, c.ctx.Err()
		}
	}
	if info.WriterSession != "" {
		return 0, true, nil
	}
	n := len(info.Blocks)
	if n == 0 {
		return 0, false, nil
	}
	blk := info.Blocks[n-1]
	var skip map[string]bool
	if f.settled != nil && f.block == blk.Id && f.size == blk.Size {
		skip = f.settled
	}
	addrs := slices.Clone(blk.WriteSet)
	for _, r := range c.s.blocks.Replicas(blockmap.BlockID(blk.Id)) {
		addrs = append(addrs, r.Addr)
	}
	slices.Sort(addrs)
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for _, addr := range slices.Compact(addrs) {
		if skip[addr] {
			continue
		}
		wg.Go(func() {
			cut := c.settleReplica(addr, blk.Id, blk.Size)
			mu.Lock()
			truncated += cut
			mu.Unlock()
		})
	}
	wg.Wait()
	return truncated, false, c.ctx.Err()
}

// settleReplica brings the replica of block at addr to size, asking the
// chunkserver what it holds after each step: it seals the replica if it
// is not sealed, truncates it if longer, and, if shorter (it lacks bytes
// the file has), forgets it and has it deleted, as a block report would.
// It gives up on a dead chunkserver, whose next registration reports the
// replica (I7), and on a live one that fails for a dead timeout. It
// returns the bytes it cut.
func (c *closer) settleReplica(addr string, block, size int64) (truncated int64) {
	start := c.s.cfg.Clock.Now()
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		if c.ctx.Err() != nil {
			return truncated
		}
		if c.dead(addr) {
			glog.V(1).Infof("block %d on %s: chunkserver is dead; its replica is checked when it reports again", block, addr)
			return truncated
		}
		if c.s.cfg.Clock.Now().Sub(start) >= c.s.cfg.DeadTimeout {
			glog.Warningf("block %d on %s: could not bring the replica to %d bytes for over %v; it is checked when it reports again", block, addr, size, c.s.cfg.DeadTimeout)
			return truncated
		}
		info, err := c.blockInfo(addr, block)
		switch {
		case err != nil:
		case info.Status == bfspb.StatusCode_NOT_FOUND:
			return truncated
		case info.Status != bfspb.StatusCode_OK:
			err = errors.New(info.Status.String() + ": " + info.Message)
		case !info.Sealed:
			glog.Infof("block %d on %s missed the close of its file: sealing it", block, addr)
			if c.sealOnce(addr, block) {
				continue
			}
			err = errors.New("seal failed")
		case info.Size == size:
			return truncated
		case info.Size > size:
			glog.Infof("block %d on %s has %d bytes, the file %d: truncating it", block, addr, info.Size, size)
			if err = c.truncateOnce(addr, block, size); err == nil {
				truncated += info.Size - size
				continue
			}
		default:
			glog.Warningf("block %d on %s has %d bytes, fewer than the file's %d: deleting the stale replica", block, addr, info.Size, size)
			c.s.blocks.DropReplica(blockmap.BlockID(block), addr)
			c.s.deleteReplicas(addr, []int64{block})
			return truncated
		}
		glog.V(1).Infof("block %d on %s: %v; retrying", block, addr, err)
		if !c.sleep(backoff) {
			return truncated
		}
	}
}

// blockInfo asks the chunkserver at addr about its replica of block.
func (c *closer) blockInfo(addr string, block int64) (*bfspb.GetBlockInfoResponse, error) {
	select {
	case c.sem <- struct{}{}:
	case <-c.ctx.Done():
		return nil, c.ctx.Err()
	}
	defer func() { <-c.sem }()
	cl, err := c.s.chunkserver(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	return cl.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: block})
}
