package fileclose

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/golang/glog"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/retry"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// closing is one file on its way to closed.
type closing struct {
	entry    uint64
	block    int64 // 0 for a file without a block
	synced   int64 // bytes the writer synced: the agreed length keeps them
	writeSet []string
	// reports holds the sealed length each write-set replica reported.
	// Once finishing is set, reports and writeSet no longer change, so
	// finalize reads them without the lock.
	reports map[string]int64
	// failed holds the replicas whose chunkserver, alive, kept refusing
	// or failing their Seal for a dead timeout: awaited no more, like a
	// dead one's.
	failed    map[string]bool
	sealing   bool
	finishing bool
	// truncated is how many bytes longer replicas were cut; size is the
	// agreed length and settled the replicas the close left at it (or gave
	// up on: dead, or failing for a dead timeout). All three are set
	// before done is closed.
	truncated int64
	size      int64
	settled   map[string]bool
	done      chan struct{}
}

// closedFile stands for a file that is closed or gone already.
var closedFile = func() *closing {
	f := &closing{done: make(chan struct{})}
	close(f.done)
	return f
}()

// agree picks the closed length from the lengths the replicas of the
// write set reported sealed, and the replicas to drop from the block. The
// bytes the writer claimed synced (f.synced) only choose the rule; no
// claim ever sets the length, so none makes the nameserver drop or cut
// bytes that replicas hold (SPEC §4):
//
//   - every reporting replica holds the claim: the shortest length, which
//     keeps every synced byte; longer replicas are truncated to it;
//   - some replicas are shorter than the claim (a replica lost bytes, or
//     the writer claimed more than it wrote): the shortest length of
//     those that hold it; the shorter ones are dropped, not truncated;
//   - none holds the claim: the longest length a majority of the
//     reporting replicas hold, so every byte a quorum of the write set
//     synced is kept; shorter replicas are dropped, longer ones truncated.
//
// Replicas that did not report are dropped too. mismatch says a replica
// was shorter than the claim.
func (f *closing) agree() (size int64, dropped []string, mismatch bool) {
	var lens []int64
	for _, addr := range f.writeSet {
		if n, ok := f.reports[addr]; ok {
			lens = append(lens, n)
		}
	}
	size = agreedLength(lens, f.synced)
	mismatch = len(lens) > 0 && slices.Min(lens) < f.synced
	for _, addr := range f.writeSet {
		if n, ok := f.reports[addr]; !ok || n < size {
			dropped = append(dropped, addr)
		}
	}
	return size, dropped, mismatch
}

// agreedLength is agree's rule for the lengths lens the replicas reported
// and the length claimed synced.
func agreedLength(lens []int64, claim int64) int64 {
	if len(lens) == 0 {
		return 0
	}
	holding := slices.DeleteFunc(slices.Clone(lens), func(n int64) bool { return n < claim })
	if len(holding) > 0 {
		return slices.Min(holding)
	}
	desc := slices.Sorted(slices.Values(lens))
	slices.Reverse(desc)
	return desc[len(desc)/2] // held by len/2+1 replicas: a majority
}

// finalize persists the close of f, truncates longer replicas and then
// wakes the waiters, so a cleaning that waits for f ends only once every
// live replica has the agreed length (I5).
func (c *Closer) finalize(f *closing) {
	if c.beforeClose != nil {
		c.beforeClose(f.entry)
	}
	c.refreshSynced(f)
	size, dropped, mismatch := f.agree()
	if mismatch {
		if c.onMismatch != nil {
			c.onMismatch()
		}
		glog.Errorf("file %d, block %d: replicas hold fewer bytes than the %d its writer claimed synced (lengths by replica: %v); closing at %d from the replicas' lengths, dropping %v",
			f.entry, f.block, f.synced, f.reports, size, dropped)
	}
	err := c.persistClose(f, size, dropped)
	if errors.Is(err, namespace.ErrBlockChanged) {
		c.restart(f)
		return
	}
	if err != nil {
		glog.Errorf("closing file %d: %v", f.entry, err)
		return // shutting down; recovery resumes after restart
	}
	var wg sync.WaitGroup
	f.size, f.settled = size, make(map[string]bool)
	for addr, n := range f.reports {
		if n < size || slices.Contains(dropped, addr) {
			continue
		}
		f.settled[addr] = true
		if n > size {
			f.truncated += n - size
			wg.Go(func() { c.truncate(addr, f.block, size) })
		}
	}
	for addr := range f.failed {
		f.settled[addr] = true
	}
	wg.Wait()
	if c.ctx().Err() != nil {
		return // shutting down: the waiters give up with their contexts
	}
	c.mu.Lock()
	delete(c.mu.files, f.entry)
	if c.mu.openBlocks[f.block] == f.entry {
		delete(c.mu.openBlocks, f.block)
	}
	c.mu.Unlock()
	c.reconcileLate(f, dropped)
	close(f.done)
}

// refreshSynced brings f's synced length up to date: a SyncBlock may have
// committed after f was set up. It is read once f is finishing, when
// its reports no longer change.
func (c *Closer) refreshSynced(f *closing) {
	if f.block == 0 {
		return
	}
	_, info, err := c.files.PathOf(f.entry)
	if err != nil {
		return // persistClose finds out
	}
	if n := len(info.Blocks); n > 0 && info.Blocks[n-1].Id == f.block {
		f.synced = max(f.synced, info.Blocks[n-1].Size)
	}
}

// restart closes f anew: a block was added to the file after the Closer
// looked at it (its writer's AddBlock raced the end of its session), and
// that block, not the one f agreed on, must be sealed and agreed on. f's
// waiters are woken when the new close ends.
func (c *Closer) restart(f *closing) {
	glog.Infof("closing file %d: its last block changed; closing it anew", f.entry)
	c.mu.Lock()
	delete(c.mu.files, f.entry)
	if f.block != 0 && c.mu.openBlocks[f.block] == f.entry {
		delete(c.mu.openBlocks, f.block)
	}
	seal := f.sealing
	c.mu.Unlock()
	next := c.track(f.entry, seal)
	select {
	case <-next.done:
		f.truncated, f.size, f.settled = next.truncated, next.size, next.settled
		close(f.done)
	case <-c.ctx().Done():
	}
}

// persistClose persists the close of f, retrying while the file is being
// renamed and while the store is busy, until the Closer closes.
func (c *Closer) persistClose(f *closing, size int64, dropped []string) error {
	b := storeBackoff()
	for {
		path, info, err := c.files.PathOf(f.entry)
		if errors.Is(err, namespace.ErrNotFound) || (err == nil && info.WriterSession == "") {
			return nil // deleted, or closed by someone else
		}
		if err == nil {
			err = c.files.CloseFile(&bfspb.CloseFileCmd{
				Path: path, EntryId: f.entry, BlockId: f.block, BlockSize: size, Dropped: dropped,
			})
			if err == nil {
				glog.V(1).Infof("closed %s at %d bytes", path, size)
				return nil
			}
			if errors.Is(err, namespace.ErrBlockChanged) {
				return err
			}
		}
		if !errors.Is(err, namespace.ErrNotFound) {
			glog.Warningf("closing file %d: %v; retrying", f.entry, err)
		}
		if !c.sleep(b.NextBackOff()) {
			return c.ctx().Err()
		}
	}
}

// storeBackoff paces the retries of a namespace read or commit: it fails
// only while busy (a rename in progress, the store stopping), and the
// many files of one fence must not retry in step.
func storeBackoff() *backoff.ExponentialBackOff { return retry.New(10*time.Millisecond, time.Second) }

// rpcBackoff paces the retries of a call to a chunkserver: one that is
// restarting or overloaded gets room, and the thousand seals of a big
// fence that failed together do not all come back at the same instant.
func rpcBackoff() *backoff.ExponentialBackOff { return retry.New(50*time.Millisecond, 2*time.Second) }

// sleep waits for d on the Closer's clock; false if the Closer closed.
func (c *Closer) sleep(d time.Duration) bool { return clock.Sleep(c.ctx(), c.clock, d) }

// sleepUntil is sleep that also ends when wake is closed.
func (c *Closer) sleepUntil(d time.Duration, wake <-chan struct{}) bool {
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-wake:
		return true
	case <-c.ctx().Done():
		return false
	}
}
