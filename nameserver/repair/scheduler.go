package repair

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/taskgroup"
	"github.com/bfs-go/bfs/nameserver/blockmap"
)

// Block is a block of a file as the repair needs it: its length agreed at
// close and version (what a copy must match), its file's replication, and
// whether the file is still open for write (its blocks wait).
type Block struct {
	ID          int64
	Size        int64
	Version     uint64
	Replication int
	Open        bool
}

// ErrGone is what Namespace.Block answers (wrapped) for a block no file
// has.
var ErrGone = errors.New("block belongs to no file")

// Namespace is the namespace as the Scheduler sees it.
type Namespace interface {
	// Blocks calls fn with every block of every file, stopping at the
	// first error fn returns, which it returns.
	Blocks(fn func(Block) error) error
	// Block looks one block up; an error wrapping ErrGone if no file has
	// it.
	Block(id int64) (Block, error)
}

// Replicas is the block map as the Scheduler sees it (blockmap.Map with
// the nameserver's placement policy).
type Replicas interface {
	// States returns every replica of b on a live chunkserver.
	States(b blockmap.BlockID) []blockmap.ReplicaState
	// Target picks a chunkserver to copy b to, never one that holds a
	// replica of b or one in exclude.
	Target(b blockmap.BlockID, exclude []string) (string, error)
	// DropReplica forgets the replica of b at addr, on its way to deletion.
	DropReplica(b blockmap.BlockID, addr string)
}

// Chunkservers carries out copies and deletes.
type Chunkservers interface {
	// Replicate tells target to copy block, sealed at size with version,
	// from source; nil once the copy is sealed and durable. The failures
	// the target can name are reported as the errors below.
	Replicate(ctx context.Context, target, source string, block, size int64, version uint64) error
	// Delete tells the chunkserver at addr to delete replicas; best effort.
	Delete(addr string, blocks []int64)
}

// The failures of a copy that Chunkservers.Replicate names.
var (
	// ErrExists: the target has a replica of the block already.
	ErrExists = errors.New("target has a replica of the block")
	// ErrSourceCorrupt: the source's bytes failed a checksum.
	ErrSourceCorrupt = errors.New("source replica is corrupt")
	// ErrSourceNotFound: the source has no sealed replica of that size.
	ErrSourceNotFound = errors.New("source has no such sealed replica")
	// ErrSourceUnavailable: the target could not reach the source.
	ErrSourceUnavailable = errors.New("source unavailable")
	// ErrBusy: the target has as many copies in flight as it allows, or no
	// room.
	ErrBusy = errors.New("target busy")
	// ErrWrongCluster: the target belongs to another cluster.
	ErrWrongCluster = errors.New("target belongs to another cluster")
)

// Defaults for the zero fields of Config.
const (
	DefaultInterval           = 30 * time.Second
	DefaultMaxCopies          = 32
	DefaultMaxCopiesPerServer = 4
	DefaultBusyFor            = 5 * time.Second
)

// Config configures a Scheduler.
type Config struct {
	Namespace    Namespace    // required
	Replicas     Replicas     // required
	Chunkservers Chunkservers // required
	Clock        clock.Clock  // required
	// Hold, if set, holds every action (copy, trim, delete of a corrupt
	// replica) while it returns true: the nameserver's safe mode.
	Hold func() bool
	// Interval is how often every block is checked; 0 means
	// DefaultInterval.
	Interval time.Duration
	// MaxCopies bounds the copies in flight; MaxCopiesPerServer those of
	// one chunkserver, as source and as target together. 0 means the
	// defaults.
	MaxCopies, MaxCopiesPerServer int
	// BusyFor is how long a target that answered busy is left alone; 0
	// means DefaultBusyFor.
	BusyFor time.Duration
	// OnCopy, if set, is told the result of every copy ("ok" or the
	// failure) and the bytes copied.
	OnCopy func(result string, bytes int64)
	// OnTrim, if set, is told of every excess replica deleted; OnDropCorrupt
	// of every corrupt one.
	OnTrim, OnDropCorrupt func()
}

func (c *Config) validate() error {
	switch {
	case c.Namespace == nil || c.Replicas == nil || c.Chunkservers == nil || c.Clock == nil:
		return errors.New("repair: Config.Namespace, Replicas, Chunkservers and Clock are required")
	case c.Interval < 0 || c.MaxCopies < 0 || c.MaxCopiesPerServer < 0 || c.BusyFor < 0:
		return fmt.Errorf("repair: negative interval (%v), copy bounds (%d, %d per server) or busy time (%v)",
			c.Interval, c.MaxCopies, c.MaxCopiesPerServer, c.BusyFor)
	}
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	set(&c.MaxCopies, DefaultMaxCopies)
	set(&c.MaxCopiesPerServer, DefaultMaxCopiesPerServer)
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.BusyFor == 0 {
		c.BusyFor = DefaultBusyFor
	}
	if c.Hold == nil {
		c.Hold = func() bool { return false }
	}
	for _, f := range []*func(){&c.OnTrim, &c.OnDropCorrupt} {
		if *f == nil {
			*f = func() {}
		}
	}
	if c.OnCopy == nil {
		c.OnCopy = func(string, int64) {}
	}
	return nil
}

// Stats is what the Scheduler tracks, for gauges.
type Stats struct {
	// UnderReplicated counts the blocks with fewer counting replicas than
	// their replication, those of files open for write included.
	UnderReplicated int
	// Missing counts the blocks of closed files with no good replica.
	Missing int
	// Queued counts the blocks waiting for a copy; InFlight the copies.
	Queued, InFlight int
}

// Scheduler keeps the blocks' replica counts up. See the package
// documentation.
type Scheduler struct {
	cfg      Config
	wake     chan struct{}
	stopc    chan struct{}
	donec    chan struct{}
	stopOnce sync.Once
	// copies runs the copies; Close stops them.
	copies *taskgroup.Group

	mu struct {
		sync.Mutex
		// dirty holds the blocks to check; rescan asks for a check of all.
		dirty  map[int64]struct{}
		rescan bool
		// entries are the under-replicated blocks, queue those of them
		// waiting for a copy.
		entries map[int64]*entry
		queue   queue
		seq     uint64
		missing map[int64]struct{}
		// perServer counts the copies in flight of each chunkserver, as
		// source or target; inFlight all of them.
		perServer map[string]int
		inFlight  int
		// busy holds the targets that answered busy, until when.
		busy map[string]time.Time
	}
}

// New starts a Scheduler. Close stops it.
func New(cfg Config) (*Scheduler, error) {
	s, err := newScheduler(cfg)
	if err != nil {
		return nil, err
	}
	go s.run()
	return s, nil
}

// newScheduler returns a Scheduler whose loop is not running: tests drive
// checkDirty and dispatch themselves.
func newScheduler(cfg Config) (*Scheduler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{cfg: cfg, wake: make(chan struct{}, 1), stopc: make(chan struct{}), donec: make(chan struct{}),
		copies: taskgroup.New()}
	s.mu.dirty = map[int64]struct{}{}
	s.mu.entries = map[int64]*entry{}
	s.mu.missing = map[int64]struct{}{}
	s.mu.perServer = map[string]int{}
	s.mu.busy = map[string]time.Time{}
	return s, nil
}

// Close stops the Scheduler and waits for its goroutines; copies in
// flight are cancelled.
func (s *Scheduler) Close() {
	s.stopOnce.Do(func() { close(s.stopc) })
	<-s.donec
	s.copies.Stop()
}

// Check asks for blocks to be checked soon: a replica of theirs was
// marked corrupt, their file was closed.
func (s *Scheduler) Check(blocks ...int64) {
	s.mu.Lock()
	for _, b := range blocks {
		s.mu.dirty[b] = struct{}{}
	}
	s.mu.Unlock()
	s.poke()
}

// Received notes that chunkservers reported new sealed replicas of
// blocks: those the Scheduler copies are checked again.
func (s *Scheduler) Received(blocks ...int64) {
	s.mu.Lock()
	n := 0
	for _, b := range blocks {
		if _, ok := s.mu.entries[b]; ok {
			s.mu.dirty[b] = struct{}{}
			n++
		}
	}
	s.mu.Unlock()
	if n > 0 {
		s.poke()
	}
}

// Rescan asks for every block to be checked soon: a chunkserver died, or
// one finished its first full report (it may be back with replicas now
// in excess). Requests made before a pass starts are served by it.
func (s *Scheduler) Rescan() {
	s.mu.Lock()
	s.mu.rescan = true
	s.mu.Unlock()
	s.poke()
}

// Forget drops blocks whose files are gone.
func (s *Scheduler) Forget(blocks ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range blocks {
		delete(s.mu.dirty, b)
		delete(s.mu.missing, b)
		if e := s.mu.entries[b]; e != nil {
			s.mu.queue.remove(e)
			delete(s.mu.entries, b)
		}
	}
}

// Stats returns the current counts.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{UnderReplicated: len(s.mu.entries), Missing: len(s.mu.missing),
		Queued: s.mu.queue.Len(), InFlight: s.mu.inFlight}
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// tick is how often the loop looks at the queue without being poked:
// copies held back by a failure or a busy server become due.
func (s *Scheduler) tick() time.Duration { return min(s.cfg.Interval, 250*time.Millisecond) }

// run is the Scheduler's loop: it checks what was asked and every block
// each Interval, and starts the copies the queue calls for.
func (s *Scheduler) run() {
	defer close(s.donec)
	held := true // the first pass that is not held checks everything
	var next time.Time
	for {
		t := s.cfg.Clock.NewTimer(s.tick())
		select {
		case <-s.stopc:
			t.Stop()
			return
		case <-s.wake:
		case <-t.C():
		}
		t.Stop()
		if s.cfg.Hold() {
			held = true
			continue
		}
		now := s.cfg.Clock.Now()
		s.mu.Lock()
		full := s.mu.rescan || held || !now.Before(next)
		s.mu.rescan, held = false, false
		s.mu.Unlock()
		if full {
			next = now.Add(s.cfg.Interval)
			s.scan()
		}
		s.checkDirty()
		s.dispatch()
	}
}

// errStopped ends a scan cut short by Close.
var errStopped = errors.New("repair: stopped")

// scan checks every block of the namespace, one at a time: the block
// map's lock is taken per block, never for the whole pass.
func (s *Scheduler) scan() {
	start := s.cfg.Clock.Now()
	n := 0
	err := s.cfg.Namespace.Blocks(func(b Block) error {
		select {
		case <-s.stopc:
			return errStopped
		default:
		}
		n++
		s.checkBlock(b)
		return nil
	})
	if err != nil && !errors.Is(err, errStopped) {
		glog.Warningf("repair: scanning the blocks: %v", err)
		return
	}
	st := s.Stats()
	glog.V(1).Infof("repair: checked %d blocks in %v: %d under-replicated, %d missing, %d copies in flight",
		n, s.cfg.Clock.Now().Sub(start), st.UnderReplicated, st.Missing, st.InFlight)
}

// checkDirty checks the blocks asked for.
func (s *Scheduler) checkDirty() {
	s.mu.Lock()
	dirty := s.mu.dirty
	s.mu.dirty = map[int64]struct{}{}
	s.mu.Unlock()
	for id := range dirty {
		b, err := s.cfg.Namespace.Block(id)
		switch {
		case errors.Is(err, ErrGone):
			s.Forget(id)
		case err != nil:
			glog.Warningf("repair: block %d: %v; checked again later", id, err)
		default:
			s.checkBlock(b)
		}
	}
}

// checkBlock brings what the Scheduler tracks of b up to date with the
// block map, and deletes the replicas that can go.
func (s *Scheduler) checkBlock(b Block) {
	states := s.cfg.Replicas.States(blockmap.BlockID(b.ID))
	s.mu.Lock()
	drop, trim := s.noteLocked(b, states)
	s.mu.Unlock()
	for _, addr := range drop {
		glog.Infof("repair: block %d has %d good replicas elsewhere: deleting its corrupt or stale replica on %s", b.ID, b.Replication, addr)
		s.cfg.Replicas.DropReplica(blockmap.BlockID(b.ID), addr)
		s.cfg.Chunkservers.Delete(addr, []int64{b.ID})
		s.cfg.OnDropCorrupt()
	}
	for _, addr := range trim {
		glog.V(1).Infof("repair: block %d has more than %d replicas: deleting the one on %s", b.ID, b.Replication, addr)
		s.cfg.Replicas.DropReplica(blockmap.BlockID(b.ID), addr)
		s.cfg.Chunkservers.Delete(addr, []int64{b.ID})
		s.cfg.OnTrim()
	}
}

// noteLocked records b's state and returns the corrupt or stale and the
// excess replicas to delete.
func (s *Scheduler) noteLocked(b Block, states []blockmap.ReplicaState) (drop, trim []string) {
	if b.Replication < 1 {
		// The namespace never stores one (0 means the default); a
		// record that says so must not get every replica trimmed.
		glog.Errorf("repair: block %d has replication %d: left alone", b.ID, b.Replication)
		return nil, nil
	}
	now := s.cfg.Clock.Now()
	e := s.mu.entries[b.ID]
	v := assess(b, states)
	live := v.counting
	if e != nil {
		e.block, e.states = b, states
		live += e.pending(states, now)
	}
	missing := v.missing() && !b.Open && live == 0
	if !missing {
		delete(s.mu.missing, b.ID)
	} else if _, ok := s.mu.missing[b.ID]; !ok {
		glog.Errorf("repair: block %d (replication %d) has no good replica (%d replicas, none sealed at its %d bytes and not known corrupt): missing",
			b.ID, b.Replication, len(states), b.Size)
		s.mu.missing[b.ID] = struct{}{}
	}
	switch {
	case missing && !v.source:
		// Nothing to copy from.
		if e != nil && len(e.copies) == 0 {
			s.mu.queue.remove(e)
			delete(s.mu.entries, b.ID)
		}
		return nil, nil
	case live < b.Replication:
		if e == nil {
			s.mu.seq++
			e = newEntry(b, s.mu.seq)
			e.states = states
			s.mu.entries[b.ID] = e
		}
		e.live = live
		if b.Open || e.need() <= 0 {
			s.mu.queue.remove(e)
		} else {
			s.mu.queue.put(e)
		}
	case e != nil && len(e.copies) == 0 && len(e.expect) == 0:
		s.mu.queue.remove(e)
		delete(s.mu.entries, b.ID)
	case e != nil:
		e.live = live
		s.mu.queue.remove(e)
	}
	if b.Open || (e != nil && len(e.copies) > 0) {
		return nil, nil // a copy in flight changes the count: wait for it
	}
	return v.drop, v.trim
}

// pending forgets the expected replicas that the map shows (or that are
// overdue) and returns how many are still on their way.
func (e *entry) pending(states []blockmap.ReplicaState, now time.Time) int {
	for _, r := range states {
		delete(e.expect, r.Addr)
	}
	for addr, until := range e.expect {
		if now.After(until) {
			delete(e.expect, addr)
		}
	}
	return len(e.expect)
}
