package fileclose

import (
	"slices"
	"sync"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/nameserver/blockmap"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Reconcile brings replicas of closed files in line with the length the
// close agreed on, as a chunkserver at addr reports them (BlockReceived,
// or a block report). A replica that missed the close (its chunkserver
// was away, or the writer dropped it) is sealed; a sealed one longer than
// the agreed length is truncated to it; one shorter lacks bytes the file
// has and is deleted. Blocks of files still open are the close's business.
// It returns at once; wait returns when the truncations it started are
// over.
func (c *Closer) Reconcile(addr string, blocks []*bfspb.ReportedBlock) (wait func()) {
	var wg sync.WaitGroup
	for _, rb := range blocks {
		if c.isOpen(rb.BlockId) {
			continue
		}
		entry, err := c.files.BlockOwner(rb.BlockId)
		if err != nil {
			continue // gone: the block report marks it obsolete
		}
		_, info, err := c.files.PathOf(entry)
		if err != nil || info.WriterSession != "" {
			continue
		}
		i := slices.IndexFunc(info.Blocks, func(b *bfspb.BlockMeta) bool { return b.Id == rb.BlockId })
		if i < 0 {
			continue
		}
		id, size := rb.BlockId, info.Blocks[i].Size
		switch {
		case !rb.Sealed:
			glog.Infof("block %d on %s missed the close of its file: sealing it", id, addr)
			c.goRun(func() { c.sealLate(addr, id) }) // BlockReceived follows
		case rb.Size > size:
			glog.Infof("block %d on %s has %d bytes, the file %d: truncating it", id, addr, rb.Size, size)
			wg.Add(1)
			if !c.goRun(func() {
				defer wg.Done()
				c.truncate(addr, id, size)
			}) {
				wg.Done() // closing: the next report tries again
			}
		case rb.Size < size:
			glog.Warningf("block %d on %s has %d bytes, fewer than the file's %d: deleting the stale replica", id, addr, rb.Size, size)
			c.replicas.DropReplica(blockmap.BlockID(id), addr)
			c.chunkservers.Delete(addr, []int64{id})
		}
	}
	return wg.Wait
}

// reconcileLate brings in line the replicas of f's block that the close
// did not count: a chunkserver that came back (registered, reported the
// replica sealed or not) after f was found ready, whose report then found
// the file still open and was set aside. Now that the file is closed they
// are reconciled as any later report would be, and the close waits for
// their truncation, so a cleaning ends with every live replica at the
// agreed length (I5).
func (c *Closer) reconcileLate(f *closing, dropped []string) {
	if f.block == 0 {
		return
	}
	var waits []func()
	for _, r := range c.replicas.Replicas(blockmap.BlockID(f.block)) {
		if _, counted := f.reports[r.Addr]; counted && !slices.Contains(dropped, r.Addr) {
			continue // finalize brought it to the agreed length
		}
		rb := &bfspb.ReportedBlock{BlockId: f.block, Size: r.Size, Version: r.Version, Sealed: r.Sealed}
		waits = append(waits, c.Reconcile(r.Addr, []*bfspb.ReportedBlock{rb}))
	}
	for _, wait := range waits {
		wait()
	}
}
