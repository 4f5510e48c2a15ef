package fileclose

import (
	"errors"
	"slices"
	"sync"

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
func (c *Closer) settle(entry uint64, f *closing) (truncated int64, open bool, err error) {
	var info *bfspb.FileInfo
	b := storeBackoff()
	for {
		_, info, err = c.files.PathOf(entry)
		if errors.Is(err, namespace.ErrNotFound) {
			return 0, false, nil // deleted: its blocks go with it
		}
		if err == nil {
			break
		}
		glog.Warningf("checking the replicas of file %d: %v; retrying", entry, err)
		if !c.sleep(b.NextBackOff()) {
			return 0, false, c.ctx().Err()
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
	for _, r := range c.replicas.Replicas(blockmap.BlockID(blk.Id)) {
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
	return truncated, false, c.ctx().Err()
}

// settleReplica brings the replica of block at addr to size, asking the
// chunkserver what it holds after each step: it seals the replica if it
// is not sealed, truncates it if longer, and, if shorter (it lacks bytes
// the file has), forgets it and has it deleted, as a block report would.
// It gives up on a dead chunkserver, whose next registration reports the
// replica (I7), and on a live one that fails for a dead timeout. It
// returns the bytes it cut.
func (c *Closer) settleReplica(addr string, block, size int64) (truncated int64) {
	start := c.clock.Now()
	b := rpcBackoff()
	for {
		if c.ctx().Err() != nil {
			return truncated
		}
		if c.dead(addr) {
			glog.V(1).Infof("block %d on %s: chunkserver is dead; its replica is checked when it reports again", block, addr)
			return truncated
		}
		if c.clock.Now().Sub(start) >= c.deadTimeout {
			glog.Warningf("block %d on %s: could not bring the replica to %d bytes for over %v; it is checked when it reports again", block, addr, size, c.deadTimeout)
			return truncated
		}
		info, err := c.replicaInfo(addr, block)
		switch {
		case err != nil:
		case !info.Found:
			return truncated
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
			if err = c.chunkservers.Truncate(c.ctx(), addr, block, size); err == nil {
				truncated += info.Size - size
				continue
			}
		default:
			glog.Warningf("block %d on %s has %d bytes, fewer than the file's %d: deleting the stale replica", block, addr, info.Size, size)
			c.replicas.DropReplica(blockmap.BlockID(block), addr)
			c.chunkservers.Delete(addr, []int64{block})
			return truncated
		}
		glog.V(1).Infof("block %d on %s: %v; retrying", block, addr, err)
		if !c.sleep(b.NextBackOff()) {
			return truncated
		}
	}
}

// replicaInfo asks the chunkserver at addr about its replica of block.
func (c *Closer) replicaInfo(addr string, block int64) (ReplicaInfo, error) {
	select {
	case c.sem <- struct{}{}:
	case <-c.ctx().Done():
		return ReplicaInfo{}, c.ctx().Err()
	}
	defer func() { <-c.sem }()
	return c.chunkservers.Replica(c.ctx(), addr, block)
}
