package fileclose

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/taskgroup"
	"github.com/bfs-go/bfs/nameserver/blockmap"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Files is the namespace as the Closer sees it. The nameserver's is the
// namespace.Store, whose errors (namespace.ErrNotFound,
// namespace.ErrBlockChanged) it returns.
type Files interface {
	// PathOf returns the path and the entry of file id.
	PathOf(id uint64) (string, *bfspb.FileInfo, error)
	// BlockOwner returns the entry id of the file block belongs to.
	BlockOwner(block int64) (uint64, error)
	// OpenFiles lists the files open for write by session, or by any
	// session if session is "".
	OpenFiles(session string) ([]namespace.OpenFile, error)
	// CloseFile persists the close of a file: durable when it returns nil.
	CloseFile(cmd *bfspb.CloseFileCmd) error
}

// Replicas is the block map: which chunkserver holds which replica, and
// which chunkservers are dead. The nameserver's is a *blockmap.Map.
type Replicas interface {
	Replicas(block blockmap.BlockID) []blockmap.Replica
	Dead(addr string, now time.Time, timeout time.Duration) bool
	DropReplica(block blockmap.BlockID, addr string)
}

// Chunkservers sends the chunkservers the commands a close needs. Each
// call is one attempt: the Closer retries. ctx ends when the Closer
// closes; an implementation bounds each call's time itself.
type Chunkservers interface {
	// Seal stops writes to the replica of block at addr; the chunkserver
	// then reports it sealed (BlockReceived).
	Seal(ctx context.Context, addr string, block int64) error
	// Truncate cuts the sealed replica of block at addr to size.
	Truncate(ctx context.Context, addr string, block, size int64) error
	// Replica asks the chunkserver at addr about its replica of block.
	Replica(ctx context.Context, addr string, block int64) (ReplicaInfo, error)
	// Delete has the chunkserver at addr delete replicas: best effort, in
	// the background (block reports catch what it misses).
	Delete(addr string, blocks []int64)
}

// ReplicaInfo is what a chunkserver says of its replica of a block.
type ReplicaInfo struct {
	// Found is false if the chunkserver has no replica of the block.
	Found  bool
	Sealed bool
	Size   int64
}

// Config configures a Closer.
type Config struct {
	Files        Files        // required
	Replicas     Replicas     // required
	Chunkservers Chunkservers // required
	Clock        clock.Clock  // required
	// DeadTimeout is how long a silent chunkserver counts as alive; a live
	// one whose calls keep failing is given up on after it too.
	DeadTimeout time.Duration
	// SealConcurrency bounds the Seal and replica-info calls in flight.
	SealConcurrency int
	// OnClaimMismatch, if set, is called for every close in which a
	// replica held fewer bytes than the writer claimed synced.
	OnClaimMismatch func()
	// BeforeClose, if set, is called when a file being closed has been
	// found ready (every awaited replica reported or given up on), before
	// its close is decided and persisted. A seam for tests.
	BeforeClose func(entry uint64)
}

// Closer closes files open for write. See the package documentation.
type Closer struct {
	files        Files
	replicas     Replicas
	chunkservers Chunkservers
	clock        clock.Clock
	deadTimeout  time.Duration
	onMismatch   func()
	beforeClose  func(entry uint64)
	// sem bounds the Seal and replica-info calls in flight.
	sem   chan struct{}
	tasks *taskgroup.Group

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

// New returns a Closer with no file being closed; Load picks up the files
// open for write.
func New(cfg Config) (*Closer, error) {
	switch {
	case cfg.Files == nil || cfg.Replicas == nil || cfg.Chunkservers == nil || cfg.Clock == nil:
		return nil, errors.New("fileclose: Config.Files, Replicas, Chunkservers and Clock are required")
	case cfg.DeadTimeout <= 0:
		return nil, errors.New("fileclose: Config.DeadTimeout must be positive")
	case cfg.SealConcurrency <= 0:
		return nil, errors.New("fileclose: Config.SealConcurrency must be positive")
	}
	c := &Closer{
		files: cfg.Files, replicas: cfg.Replicas, chunkservers: cfg.Chunkservers, clock: cfg.Clock,
		deadTimeout: cfg.DeadTimeout, onMismatch: cfg.OnClaimMismatch, beforeClose: cfg.BeforeClose,
		sem: make(chan struct{}, cfg.SealConcurrency), tasks: taskgroup.New(),
	}
	c.mu.files = make(map[uint64]*closing)
	c.mu.openBlocks = make(map[int64]uint64)
	c.mu.registered = make(chan struct{})
	return c, nil
}

// Close stops the Closer's work and waits for its goroutines. A close cut
// short is picked up again after the restart (Load, the cleanings'
// resume, the replicas' reports). Nothing is started from then on.
func (c *Closer) Close() { c.tasks.Stop() }

// goRun runs fn on a goroutine of the Closer; false (fn not run) once the
// Closer is closed.
func (c *Closer) goRun(fn func()) bool {
	return c.tasks.Go(func(context.Context) { fn() })
}

// ctx ends when the Closer closes.
func (c *Closer) ctx() context.Context { return c.tasks.Context() }

// Registered wakes the seals waiting for a chunkserver to come back: one
// has (re)registered.
func (c *Closer) Registered() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.mu.registered)
	c.mu.registered = make(chan struct{})
}

// Load indexes the blocks of every file open for write, and starts
// closing those whose session is not live (it did not survive the
// restart).
func (c *Closer) Load(live func(session string) bool) error {
	open, err := c.files.OpenFiles("")
	if err != nil {
		return err
	}
	for _, f := range open {
		_, info, err := c.files.PathOf(f.EntryID)
		if err != nil {
			return err
		}
		c.NoteOpen(f.EntryID, info)
		if !live(f.Session) {
			glog.Infof("recovering file %d of ended session %s", f.EntryID, f.Session)
			entry := f.EntryID
			c.goRun(func() { c.track(entry, true) })
		}
	}
	return nil
}

// NoteOpen records the blocks of a file open for write (its AddBlock
// committed), so that the reports of its replicas find it.
func (c *Closer) NoteOpen(entry uint64, info *bfspb.FileInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range info.Blocks {
		c.mu.openBlocks[b.Id] = entry
	}
}

// isOpen reports whether block belongs to a file the Closer knows is open
// for write.
func (c *Closer) isOpen(block int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.mu.openBlocks[block]
	return ok
}

// CloseFile seals and closes file entry, and returns once every live
// replica of its block has the agreed length (dirlock.FileCloser), so
// that the cleaning that called it persists UNLOCKED only then (I5). A
// file closed already, also by a close committed before a restart whose
// truncations never went out, has its replicas checked too.
func (c *Closer) CloseFile(ctx context.Context, entry uint64) (int64, error) {
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

// Finish closes file entry, open for write, for good: the Closer seals
// the replicas that have not reported, rather than waiting for the
// writer's last packet. It is how a writer's FinishFile and lease
// recovery close a file. The channel is closed once the file is closed
// (or gone).
func (c *Closer) Finish(entry uint64) <-chan struct{} { return c.track(entry, true).done }

// Await is Finish without the seals: the file closes when its replicas
// report it sealed.
func (c *Closer) Await(entry uint64) <-chan struct{} { return c.track(entry, false).done }

// Closing returns the channel of the close of entry in progress, closed
// once it is over (the file closed, its longer replicas truncated), or
// nil if none is.
func (c *Closer) Closing(entry uint64) <-chan struct{} {
	if f := c.join(entry, false); f != nil {
		return f.done
	}
	return nil
}

// track starts closing file entry, or joins a close in progress; with seal
// the Closer seals the replicas itself. The returned closing's done
// channel is closed when the file is closed (or gone).
func (c *Closer) track(entry uint64, seal bool) *closing {
	if f := c.join(entry, seal); f != nil {
		return f
	}
	_, info, err := c.files.PathOf(entry)
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
		for _, r := range c.replicas.Replicas(blockmap.BlockID(f.block)) {
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
func (c *Closer) join(entry uint64, seal bool) *closing {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.mu.files[entry]
	if f != nil && seal {
		c.startSealsLocked(f)
	}
	return f
}

// Received notes that the replica of block at addr is sealed at size (a
// BlockReceived, or a block report that says sealed).
func (c *Closer) Received(addr string, block int64, size int64) {
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

// DropReplicas removes replicas the writer gave up on from the write set
// of a file being closed: they will never report the block sealed.
func (c *Closer) DropReplicas(entry uint64, dropped []string) {
	if len(dropped) == 0 {
		return
	}
	c.mu.Lock()
	f := c.mu.files[entry]
	if f == nil || f.finishing {
		c.mu.Unlock()
		return
	}
	f.writeSet = namespace.Without(f.writeSet, dropped)
	ready := c.readyLocked(f)
	c.mu.Unlock()
	if ready {
		c.goRun(func() { c.finalize(f) })
	}
}

// Recheck finishes the files whose last awaited replica was declared
// dead; the nameserver calls it after each round of liveness checks.
func (c *Closer) Recheck() {
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
func (c *Closer) readyLocked(f *closing) bool {
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

func (c *Closer) dead(addr string) bool {
	return c.replicas.Dead(addr, c.clock.Now(), c.deadTimeout)
}

// Pending lists the replicas each of files that is being closed still
// waits for; a file not being closed is not in the answer. It costs
// O(len(files)), whatever else is closing.
func (c *Closer) Pending(files ...uint64) map[uint64][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[uint64][]string, len(files))
	for _, e := range files {
		f := c.mu.files[e]
		if f == nil {
			continue
		}
		for _, addr := range f.writeSet {
			if _, ok := f.reports[addr]; !ok && !f.failed[addr] {
				out[e] = append(out[e], addr)
			}
		}
	}
	return out
}
