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

// closer closes files open for write. A file closes when every replica of
// its block in the write set has reported the block sealed (BlockReceived,
// or a block report that says sealed), leaving out replicas the writer
// dropped and replicas on chunkservers declared dead. Its length is then
// the shortest reported length that still holds every synced byte, and
// longer replicas are truncated to it; the writer's claim of what it
// synced never makes it drop or cut bytes the replicas hold (agree).
//
// A file's writer normally seals the replicas itself (its last packet).
// When the writer finishes, and when it is gone (its session ended), the
// closer seals them: it sends Seal to every replica still awaited, with
// bounded concurrency, retrying with backoff until the replica reports or
// its chunkserver is declared dead. This is the mechanism FinishFile and
// lease recovery use, and directory unlock uses to fence a holder.
type closer struct {
	s   *Server
	sem chan struct{}
	ctx context.Context
	// cancel stops every goroutine the closer started; wg waits for them.
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		// files are the files being closed, by entry id.
		files map[uint64]*closing
		// openBlocks maps the block of every file known to be open for
		// write to the file's entry id, so reports of sealed replicas find
		// their file without reading the namespace.
		openBlocks map[int64]uint64
		// registered is closed (and replaced) whenever a chunkserver
		// registers, waking seals that wait for a dead one to return.
		registered chan struct{}
	}
}

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

func newCloser(s *Server) *closer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &closer{s: s, sem: make(chan struct{}, s.cfg.SealConcurrency), ctx: ctx, cancel: cancel}
	c.mu.files = make(map[uint64]*closing)
	c.mu.openBlocks = make(map[int64]uint64)
	c.mu.registered = make(chan struct{})
	return c
}

// registered wakes the seals waiting for a chunkserver to come back: one
// has (re)registered.
func (c *closer) registered() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.mu.registered)
	c.mu.registered = make(chan struct{})
}

// stop cancels the closer's work and waits for its goroutines.
func (c *closer) stop() {
	c.cancel()
	c.wg.Wait()
}

func (c *closer) goRun(fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
}

// load indexes the blocks of every open file, and starts recovery of the
// open files whose session did not survive the restart.
func (c *closer) load(live func(session string) bool) error {
	open, err := c.s.ns.OpenFiles("")
	if err != nil {
		return err
	}
	for _, f := range open {
		_, info, err := c.s.ns.PathOf(f.EntryID)
		if err != nil {
			return err
		}
		c.noteOpenBlocks(f.EntryID, info)
		if !live(f.Session) {
			glog.Infof("recovering file %d of ended session %s", f.EntryID, f.Session)
			entry := f.EntryID
			c.goRun(func() { c.track(entry, true) })
		}
	}
	return nil
}

// noteOpenBlocks records the blocks of an open file.
func (c *closer) noteOpenBlocks(entry uint64, info *bfspb.FileInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range info.Blocks {
		c.mu.openBlocks[b.Id] = entry
	}
}

// isOpen reports whether block belongs to a file the closer knows is open
// for write.
func (c *closer) isOpen(block int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.mu.openBlocks[block]
	return ok
}

// closedFile stands for a file that is closed or gone already.
var closedFile = func() *closing {
	f := &closing{done: make(chan struct{})}
	close(f.done)
	return f
}()

// CloseFile seals and closes file entry, and returns once every live
// replica of its block has the agreed length (dirlock.FileCloser), so
// that the cleaning that called it persists UNLOCKED only then (I5). A
// file closed already, also by a close committed before a restart whose
// truncations never went out, has its replicas checked too.
func (c *closer) CloseFile(ctx context.Context, entry uint64) (int64, error) {
	for {
		f := c.track(entry, true)
		select {
		case <-f.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		n, open, err := c.settle(entry, f)
		if err == nil {
			err = ctx.Err()
		}
		if err != nil || !open {
			return f.truncated + n, err
		}
	}
}

// track starts closing file entry, or joins a close in progress; with seal
// the closer seals the replicas itself. The returned closing's done
// channel is closed when the file is closed (or gone).
func (c *closer) track(entry uint64, seal bool) *closing {
	if f := c.join(entry, seal); f != nil {
		return f
	}
	_, info, err := c.s.ns.PathOf(entry)
	if err != nil || info.WriterSession == "" {
		if err != nil && !errors.Is(err, namespace.ErrNotFound) {
			glog.Errorf("closing file %d: %v", entry, err)
		}
		return closedFile
	}
	f := &closing{entry: entry, reports: make(map[string]int64), failed: make(map[string]bool), done: make(chan struct{})}
	if n := len(info.Blocks); n > 0 {
		last := info.Blocks[n-1]
		f.block, f.synced, f.writeSet = last.Id, last.Size, slices.Clone(last.WriteSet)
		for _, r := range c.s.blocks.Replicas(blockmap.BlockID(f.block)) {
			if r.Sealed && slices.Contains(f.writeSet, r.Addr) {
				f.reports[r.Addr] = r.Size
			}
		}
	}
	c.mu.Lock()
	if old := c.mu.files[entry]; old != nil {
		c.mu.Unlock()
		if f := c.join(entry, seal); f != nil {
			return f
		}
		return closedFile // it finished in between
	}
	c.mu.files[entry] = f
	if f.block != 0 {
		c.mu.openBlocks[f.block] = entry
	}
	if seal {
		c.startSealsLocked(f)
	}
	ready := c.readyLocked(f)
	c.mu.Unlock()
	if ready {
		c.goRun(func() { c.finalize(f) })
	}
	return f
}

// join returns the close in progress for entry, if any, asking it to seal.
func (c *closer) join(entry uint64, seal bool) *closing {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.mu.files[entry]
	if f != nil && seal {
		c.startSealsLocked(f)
	}
	return f
}

// received notes that the replica of block at addr is sealed at size.
func (c *closer) received(addr string, block int64, size int64) {
	c.mu.Lock()
	entry, ok := c.mu.openBlocks[block]
	f := c.mu.files[entry]
	if !ok || f == nil || f.block != block {
		c.mu.Unlock()
		if ok {
			c.track(entry, false) // picks the report up from the block map
		}
		return
	}
	if !f.finishing && slices.Contains(f.writeSet, addr) {
		f.reports[addr] = size
	}
	ready := c.readyLocked(f)
	c.mu.Unlock()
	if ready {
		c.goRun(func() { c.finalize(f) })
	}
}

// dropReplicas removes replicas the writer gave up on from the write set
// of a file being closed: they will never report the block sealed.
func (c *closer) dropReplicas(entry uint64, dropped []string) {
	if len(dropped) == 0 {
		return
	}
	c.mu.Lock()
	f := c.mu.files[entry]
	if f == nil || f.finishing {
		c.mu.Unlock()
		return
	}
	f.writeSet = dropAddrs(f.writeSet, dropped)
	ready := c.readyLocked(f)
	c.mu.Unlock()
	if ready {
		c.goRun(func() { c.finalize(f) })
	}
}

func dropAddrs(set, dropped []string) []string {
	return slices.DeleteFunc(slices.Clone(set), func(a string) bool { return slices.Contains(dropped, a) })
}

// recheck finishes files whose last awaited replica was declared dead.
func (c *closer) recheck() {
	c.mu.Lock()
	var ready []*closing
	for _, f := range c.mu.files {
		if c.readyLocked(f) {
			ready = append(ready, f)
		}
	}
	c.mu.Unlock()
	for _, f := range ready {
		c.goRun(func() { c.finalize(f) })
	}
}

// readyLocked reports whether f can be closed now, and if so marks it
// finishing so exactly one caller finalizes it.
func (c *closer) readyLocked(f *closing) bool {
	if f.finishing {
		return false
	}
	if f.block != 0 {
		if len(f.reports) == 0 {
			return false
		}
		for _, addr := range f.writeSet {
			if _, ok := f.reports[addr]; !ok && !f.failed[addr] && !c.dead(addr) {
				return false
			}
		}
	}
	f.finishing = true
	return true
}

func (c *closer) dead(addr string) bool {
	return c.s.blocks.Dead(addr, c.s.cfg.Clock.Now(), c.s.cfg.DeadTimeout)
}

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
func (c *closer) finalize(f *closing) {
	if hook := c.s.cfg.TestingKnobs.BeforeClose; hook != nil {
		hook(f.entry)
	}
	c.refreshSynced(f)
	size, dropped, mismatch := f.agree()
	if mismatch {
		c.s.metrics.claimMismatch.Inc()
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
	if c.ctx.Err() != nil {
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
func (c *closer) refreshSynced(f *closing) {
	if f.block == 0 {
		return
	}
	_, info, err := c.s.ns.PathOf(f.entry)
	if err != nil {
		return // persistClose finds out
	}
	if n := len(info.Blocks); n > 0 && info.Blocks[n-1].Id == f.block {
		f.synced = max(f.synced, info.Blocks[n-1].Size)
	}
}

// restart closes f anew: a block was added to the file after the closer
// looked at it (its writer's AddBlock raced the end of its session), and
// that block, not the one f agreed on, must be sealed and agreed on. f's
// waiters are woken when the new close ends.
func (c *closer) restart(f *closing) {
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
	case <-c.ctx.Done():
	}
}

// reconcileLate brings in line the replicas of f's block that the close
// did not count: a chunkserver that came back (registered, reported the
// replica sealed or not) after f was found ready, whose report then found
// the file still open and was set aside. Now that the file is closed they
// are reconciled as any later report would be, and the close waits for
// their truncation, so a cleaning ends with every live replica at the
// agreed length (I5).
func (c *closer) reconcileLate(f *closing, dropped []string) {
	if f.block == 0 {
		return
	}
	var waits []func()
	for _, r := range c.s.blocks.Replicas(blockmap.BlockID(f.block)) {
		if _, counted := f.reports[r.Addr]; counted && !slices.Contains(dropped, r.Addr) {
			continue // finalize brought it to the agreed length
		}
		rb := &bfspb.ReportedBlock{BlockId: f.block, Size: r.Size, Version: r.Version, Sealed: r.Sealed}
		waits = append(waits, c.s.reconcile(r.Addr, []*bfspb.ReportedBlock{rb}))
	}
	for _, wait := range waits {
		wait()
	}
}

// persistClose applies the CloseFile command, retrying while the file is
// being renamed and while the store is busy, until the closer stops.
func (c *closer) persistClose(f *closing, size int64, dropped []string) error {
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		path, info, err := c.s.ns.PathOf(f.entry)
		if errors.Is(err, namespace.ErrNotFound) || (err == nil && info.WriterSession == "") {
			return nil // deleted, or closed by someone else
		}
		if err == nil {
			_, err = c.s.ns.Apply(&bfspb.Command{
				TimeNs: c.s.cfg.Clock.Now().UnixNano(),
				Op: &bfspb.Command_CloseFile{CloseFile: &bfspb.CloseFileCmd{
					Path: path, EntryId: f.entry, BlockId: f.block, BlockSize: size, Dropped: dropped,
				}},
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
		if !c.sleep(backoff) {
			return c.ctx.Err()
		}
	}
}

// sleep waits for d on the server's clock; false if the closer stopped.
func (c *closer) sleep(d time.Duration) bool { return c.sleepUntil(d, nil) }

// sleepUntil is sleep that also ends when wake is closed.
func (c *closer) sleepUntil(d time.Duration, wake <-chan struct{}) bool {
	t := c.s.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-wake:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// startSealsLocked sends Seal to every replica of f not yet reported.
func (c *closer) startSealsLocked(f *closing) {
	if f.sealing || f.block == 0 {
		f.sealing = true
		return
	}
	f.sealing = true
	for _, addr := range f.writeSet {
		if _, ok := f.reports[addr]; !ok {
			c.goRun(func() { c.sealReplica(f, addr) })
		}
	}
}

// sealReplica seals f's block at addr, retrying with backoff until the
// chunkserver accepts or the file no longer waits for it. While the
// chunkserver is declared dead it waits for it to register again: the
// file may close without it (another replica reported), or it may be the
// only way the file ever closes (every replica was away).
//
// A live chunkserver that keeps failing the Seal (a replica or a disk in
// error, or a network that lets its heartbeats through but not our calls)
// is given up on after a dead timeout, as if it were dead: cleaning ends
// whenever one replica can be sealed (I7).
func (c *closer) sealReplica(f *closing, addr string) {
	var failingSince time.Time
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		c.mu.Lock()
		_, reported := f.reports[addr]
		over := reported || f.finishing
		registered := c.mu.registered
		c.mu.Unlock()
		if over {
			return
		}
		if c.dead(addr) {
			failingSince = time.Time{}
			if !c.sleepUntil(backoff, registered) {
				return
			}
			continue
		}
		if c.sealOnce(addr, f.block) {
			return // its BlockReceived follows
		}
		now := c.s.cfg.Clock.Now()
		if failingSince.IsZero() {
			failingSince = now
		} else if now.Sub(failingSince) >= c.s.cfg.DeadTimeout {
			c.giveUp(f, addr)
			return
		}
		if !c.sleep(backoff) {
			return
		}
	}
}

// giveUp stops waiting for the replica of f at addr, whose seal kept
// failing.
func (c *closer) giveUp(f *closing, addr string) {
	glog.Warningf("block %d on %s: seal failing for over %v on a live chunkserver; closing the file without it", f.block, addr, c.s.cfg.DeadTimeout)
	c.mu.Lock()
	f.failed[addr] = true
	ready := c.readyLocked(f)
	c.mu.Unlock()
	if ready {
		c.goRun(func() { c.finalize(f) })
	}
}

func (c *closer) sealOnce(addr string, block int64) bool {
	select {
	case c.sem <- struct{}{}:
	case <-c.ctx.Done():
		return false
	}
	defer func() { <-c.sem }()
	cl, err := c.s.chunkserver(addr)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	resp, err := cl.Seal(ctx, &bfspb.SealRequest{BlockId: block})
	if err != nil || resp.Status != bfspb.StatusCode_OK {
		glog.V(1).Infof("seal block %d on %s: %v %v", block, addr, resp.GetStatus(), err)
		return false
	}
	return true
}

// sealLate seals a replica that missed the close of its file, retrying
// with backoff until the chunkserver accepts (its BlockReceived then
// reconciles the length), it is declared dead (its next registration's
// block report brings the replica up again), or the closer stops. A
// chunkserver that just came back may not be reachable at once.
func (c *closer) sealLate(addr string, block int64) {
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		if c.sealOnce(addr, block) || c.dead(addr) || !c.sleep(backoff) {
			return
		}
	}
}

// truncate cuts a longer replica down to the agreed length, retrying with
// backoff until it is done, the chunkserver is declared dead, or the
// closer stops. A replica left long (its chunkserver died) is still
// consistent up to the agreed length, which is all a reader is given.
//
// A live chunkserver that keeps failing is given up on after a dead
// timeout too: its replica stays longer than the file (still correct up
// to the file's length, which is all a reader is given) until its next
// block report tries again.
func (c *closer) truncate(addr string, block, size int64) {
	start := c.s.cfg.Clock.Now()
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		err := c.truncateOnce(addr, block, size)
		if err == nil {
			return
		}
		if c.dead(addr) {
			glog.Warningf("truncate block %d on %s to %d: %v; chunkserver is dead, leaving the replica long", block, addr, size, err)
			return
		}
		if c.s.cfg.Clock.Now().Sub(start) >= c.s.cfg.DeadTimeout {
			glog.Warningf("truncate block %d on %s to %d: %v; failing for over %v, leaving the replica long until its next report", block, addr, size, err, c.s.cfg.DeadTimeout)
			return
		}
		if !c.sleep(backoff) {
			return
		}
	}
}

// truncateOnce asks the chunkserver at addr to cut block to size.
func (c *closer) truncateOnce(addr string, block, size int64) error {
	if hook := c.s.cfg.TestingKnobs.BeforeTruncate; hook != nil {
		hook(c.ctx, addr, block, size)
	}
	cl, err := c.s.chunkserver(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	resp, err := cl.Truncate(ctx, &bfspb.TruncateRequest{BlockId: block, Size: size})
	if err == nil && resp.Status != bfspb.StatusCode_OK {
		err = errors.New(resp.Status.String() + ": " + resp.Message)
	}
	return err
}

// pending lists the replicas each file being closed still waits for.
func (c *closer) pending() map[uint64][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[uint64][]string, len(c.mu.files))
	for e, f := range c.mu.files {
		for _, addr := range f.writeSet {
			if _, ok := f.reports[addr]; !ok && !f.failed[addr] {
				out[e] = append(out[e], addr)
			}
		}
	}
	return out
}
