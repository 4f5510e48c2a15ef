package volume

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/internal/clock"
)

// DefaultCheckInterval is how often every volume is checked without an
// error to ask for it.
const DefaultCheckInterval = time.Minute

// DefaultCheckTimeout is how long a check of a volume may take before
// the volume is taken for hung and goes out of service. A healthy disk
// checks in milliseconds, a busy one (an fdatasync behind seconds of
// writeback on a loaded hard disk) in a few seconds; 30 s is Linux's
// default SCSI command timeout (/sys/block/*/device/timeout), past which
// the kernel itself gives up on the command and starts its error
// handling. A shorter timeout would fail loaded but healthy disks; a
// longer one keeps readers of a hung disk waiting: a reader waits at
// most some 45 s (its stall seen in 10 to 15 s, then the timeout) before
// it is let go and the SDK reads another replica. HDFS waits 10 minutes
// (dfs.datanode.disk.check.timeout), its readers having timeouts of
// their own.
const DefaultCheckTimeout = 30 * time.Second

// Config configures a Set.
type Config struct {
	// Dirs are the volumes' data directories, one per disk.
	Dirs []string
	// FailedTolerated is how many failed volumes the chunkserver serves
	// with; -1 means every one but the last.
	FailedTolerated int
	// Clock is the source of time; the real clock if nil.
	Clock clock.Clock
	// DiskSpace, if set, replaces the file system's capacity and free
	// bytes of a volume's directory (a test knob).
	DiskSpace func(dir string) (capacity, free int64)
	// CheckInterval is how often every volume is checked; 0 means
	// DefaultCheckInterval.
	CheckInterval time.Duration
	// CheckTimeout is how long a check may take before its volume is
	// taken for hung and goes out of service; 0 means
	// DefaultCheckTimeout.
	CheckTimeout time.Duration
	// OnChange, if set, is called when a volume changes state. It must
	// not block.
	OnChange func()
	// TestingKnobs are seams for tests; the zero value is production.
	TestingKnobs TestingKnobs
}

// TestingKnobs let tests make a volume's disk fail.
type TestingKnobs struct {
	// Fault, if set, is the blockstore.TestingKnobs.Fault of the volume
	// in dir (one of Config.Dirs): it may fail or block the volume's I/O.
	Fault func(dir string, op blockstore.Op, path string) error
}

// storeKnobs returns the blockstore knobs of the volume in dir.
func (c *Config) storeKnobs(dir string) blockstore.TestingKnobs {
	fault := c.TestingKnobs.Fault
	if fault == nil {
		return blockstore.TestingKnobs{}
	}
	return blockstore.TestingKnobs{Fault: func(op blockstore.Op, path string) error { return fault(dir, op, path) }}
}

// MaxVolumes is the most volumes a chunkserver may have: the most the
// nameserver tells apart (its block map keeps a replica's volume in 7
// bits).
const MaxVolumes = 128

func (c *Config) validate() error {
	switch {
	case len(c.Dirs) == 0:
		return errors.New("volume: no data directory")
	case len(c.Dirs) > MaxVolumes:
		return fmt.Errorf("volume: %d data directories, more than the %d volumes a chunkserver may have", len(c.Dirs), MaxVolumes)
	}
	seen := make(map[string]bool, len(c.Dirs))
	for _, d := range c.Dirs {
		if d == "" {
			return fmt.Errorf("volume: empty data directory in %q", strings.Join(c.Dirs, ","))
		}
		clean, err := filepath.Abs(d)
		if err != nil {
			return fmt.Errorf("volume: data directory %s: %w", d, err)
		}
		if seen[clean] {
			return fmt.Errorf("volume: data directory %s named twice", d)
		}
		seen[clean] = true
	}
	switch {
	case c.FailedTolerated < -1:
		return fmt.Errorf("volume: failed volumes tolerated %d: want -1 (all but the last) or more", c.FailedTolerated)
	case c.FailedTolerated >= len(c.Dirs):
		return fmt.Errorf("volume: %d failed volumes tolerated of %d volumes: the chunkserver would serve with none left; use -1 to serve while one is left",
			c.FailedTolerated, len(c.Dirs))
	case c.CheckInterval < 0:
		return fmt.Errorf("volume: negative check interval %v", c.CheckInterval)
	case c.CheckTimeout < 0:
		return fmt.Errorf("volume: negative check timeout %v", c.CheckTimeout)
	}
	if c.CheckInterval == 0 {
		c.CheckInterval = DefaultCheckInterval
	}
	if c.CheckTimeout == 0 {
		c.CheckTimeout = DefaultCheckTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.OnChange == nil {
		c.OnChange = func() {}
	}
	return nil
}

// createStripes is how many locks serialize the creates of replicas, by
// block id, so that two volumes never create the same block.
const createStripes = 256

// Set is a chunkserver's volumes. See the package documentation.
type Set struct {
	cfg    Config
	vols   []*Volume
	policy atomic.Pointer[Policy]
	// creates serializes, per stripe of block ids, the look across the
	// volumes and the create that follows it.
	creates [createStripes]sync.Mutex

	fatal     chan error
	fatalOnce sync.Once
	stopc     chan struct{}
	// checkers are the volumes' checkers (watch), one per volume opened.
	checkers sync.WaitGroup
	// io are the goroutines that do a volume's I/O for a caller that may
	// leave them behind on a disk that hangs: checks, reads, the
	// abandoning of a failed volume's store. ioMu guards their start
	// against Close's wait: none starts once ioClosed is set.
	io       sync.WaitGroup
	ioMu     sync.RWMutex
	ioClosed bool

	closeOnce sync.Once
	closeErr  error
}

// Open opens every volume of cfg.Dirs and starts the checks. A volume
// that does not open counts as failed; Open fails if more did than
// cfg.FailedTolerated allows, or none opened.
func Open(cfg Config) (*Set, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Set{cfg: cfg, fatal: make(chan error, 1), stopc: make(chan struct{})}
	s.policy.Store(&Policy{})
	now := cfg.Clock.Now()
	for i, dir := range cfg.Dirs {
		v := newVolume(i, dir, now)
		st, err := blockstore.OpenWith(dir, cfg.storeKnobs(dir))
		if err != nil {
			glog.Errorf("volume %s did not open and is out of service: %v", dir, err)
			v.fail(err.Error(), now)
		}
		v.store = st
		s.vols = append(s.vols, v)
	}
	if err := s.tolerable(); err != nil {
		for _, v := range s.vols {
			if v.store != nil {
				v.store.Close()
			}
		}
		return nil, err
	}
	s.dedupe()
	for _, v := range s.serving() {
		s.checkers.Add(1)
		go s.watch(v)
	}
	return s, nil
}

// tolerable returns an error if more volumes failed than tolerated.
func (s *Set) tolerable() error {
	var failed []string
	for _, v := range s.vols {
		if v.Failed() {
			v.mu.Lock()
			failed = append(failed, v.dir+": "+v.mu.reason)
			v.mu.Unlock()
		}
	}
	limit := s.cfg.FailedTolerated
	if limit < 0 {
		limit = len(s.vols) - 1
	}
	if len(failed) > limit {
		return fmt.Errorf("volume: %d of %d volumes failed, %d tolerated (--failed-volumes-tolerated): %s",
			len(failed), len(s.vols), limit, strings.Join(failed, "; "))
	}
	return nil
}

// dedupe keeps one replica of each block found on several volumes: the
// sealed one, then the longer, then the earlier volume's.
func (s *Set) dedupe() {
	type holder struct {
		v    *Volume
		info blockstore.BlockInfo
	}
	first := make(map[blockstore.BlockID]holder)
	for _, v := range s.serving() {
		for _, info := range v.store.List() {
			h, dup := first[info.ID]
			if !dup {
				first[info.ID] = holder{v, info}
				continue
			}
			keep, drop := h, holder{v, info}
			if !h.info.Sealed && info.Sealed || h.info.Sealed == info.Sealed && info.Size > h.info.Size {
				keep, drop = drop, keep
			}
			first[info.ID] = keep
			glog.Warningf("block %d has a replica on volumes %s and %s: keeping the one on %s (%d bytes, sealed %v), deleting the other",
				info.ID, h.v.dir, v.dir, keep.v.dir, keep.info.Size, keep.info.Sealed)
			if err := drop.v.store.Delete(info.ID); err != nil {
				glog.Errorf("block %d on volume %s: %v", info.ID, drop.v.dir, err)
			}
		}
	}
}

// Close stops the checks (a check under way ends first, within the check
// timeout) and closes the volumes' stores: those in service write their
// meta logs into their meta files (a full one keeps its logs, replayed at
// the next open), failed ones are abandoned.
func (s *Set) Close() error {
	s.closeOnce.Do(func() {
		close(s.stopc)
		s.checkers.Wait()
		s.ioMu.Lock()
		s.ioClosed = true
		s.ioMu.Unlock()
		s.waitIO()
		var errs []error
		for _, v := range s.vols {
			switch {
			case v.store == nil:
			case v.Failed():
				v.store.Abandon()
			default:
				if err := v.store.Close(); noSpace(err) {
					glog.Warningf("volume %s closed full: its meta logs stay, replayed at the next start: %v", v.dir, err)
				} else if err != nil {
					errs = append(errs, fmt.Errorf("volume %s: %w", v.dir, err))
				}
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// goIO runs fn on an I/O goroutine (see Set.io); false, without running
// it, once the Set is closing.
func (s *Set) goIO(fn func()) bool {
	s.ioMu.RLock()
	defer s.ioMu.RUnlock()
	if s.ioClosed {
		return false
	}
	s.io.Go(fn)
	return true
}

// waitIO waits for the I/O goroutines to end, for at most the check
// timeout. One blocked in a system call on a hung disk may never return,
// and nothing can stop it: the chunkserver must still be able to stop
// (its process exits without it), so Close leaves it behind, saying so.
// The waiting goroutine is left with it.
func (s *Set) waitIO() {
	done := make(chan struct{})
	go func() {
		s.io.Wait()
		close(done)
	}()
	t := s.cfg.Clock.NewTimer(s.cfg.CheckTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C():
		glog.Errorf("volume: I/O blocked on a hung disk for %v after close: left behind", s.cfg.CheckTimeout)
	}
}

// Fatal delivers, once, why the chunkserver must stop: more volumes
// failed than tolerated.
func (s *Set) Fatal() <-chan error { return s.fatal }

// SetPolicy sets what the volumes keep free (the nameserver's policy).
func (s *Set) SetPolicy(p Policy) { s.policy.Store(&p) }

// Volumes returns every volume, by index.
func (s *Set) Volumes() []*Volume { return slices.Clone(s.vols) }

// Status describes every volume, by index.
func (s *Set) Status() []Status {
	p := *s.policy.Load()
	out := make([]Status, len(s.vols))
	for i, v := range s.vols {
		var capacity, free int64
		if !v.Failed() {
			capacity, free = s.space(v)
		}
		out[i] = v.status(capacity, free, p)
	}
	return out
}

// space is the capacity and free bytes of v's file system.
func (s *Set) space(v *Volume) (capacity, free int64) {
	if s.cfg.DiskSpace != nil {
		return s.cfg.DiskSpace(v.dir)
	}
	return diskSpace(v.dir)
}

// serving returns the volumes in service.
func (s *Set) serving() []*Volume {
	out := make([]*Volume, 0, len(s.vols))
	for _, v := range s.vols {
		if v.serving() {
			out = append(out, v)
		}
	}
	return out
}

// Usage returns the replicas and their bytes on the volumes in service.
func (s *Set) Usage() (blocks, bytes int64) {
	for _, v := range s.serving() {
		b, n := v.store.Usage()
		blocks, bytes = blocks+b, bytes+n
	}
	return blocks, bytes
}

// Replica is a replica as List reports it.
type Replica struct {
	blockstore.BlockInfo
	// Volume is the index of the volume holding it.
	Volume int
}

// List describes every replica on the volumes in service, by increasing
// id.
func (s *Set) List() []Replica {
	var out []Replica
	for _, v := range s.serving() {
		for _, info := range v.store.List() {
			out = append(out, Replica{BlockInfo: info, Volume: v.index})
		}
	}
	slices.SortFunc(out, func(a, b Replica) int { return int(min(max(a.ID-b.ID, -1), 1)) })
	return out
}

// find returns the volume in service that holds (or is creating) block
// id, or nil.
func (s *Set) find(id blockstore.BlockID) *Volume {
	for _, v := range s.vols {
		if v.serving() && v.store.Has(id) {
			return v
		}
	}
	return nil
}

// notFound is the error for a block no volume in service holds.
func notFound(id blockstore.BlockID) error {
	return fmt.Errorf("%w: block %d", blockstore.ErrNotFound, id)
}

// stripe returns the lock of block id's creates.
func (s *Set) stripe(id blockstore.BlockID) *sync.Mutex {
	return &s.creates[uint64(id)%createStripes]
}

// Create makes an empty replica of block id (see blockstore.Store.Create)
// on a volume picked for it, unless a volume holds one already.
func (s *Set) Create(ctx context.Context, id blockstore.BlockID) error {
	v, unlock, err := s.placeFor(id)
	if err != nil {
		return err
	}
	defer unlock()
	v.begin()
	defer v.end()
	return s.note(v, v.store.Create(ctx, id))
}

// Seal seals the replica of block id (see blockstore.Store.Seal); a block
// no volume holds is recorded sealed at 0 on a volume picked for it.
func (s *Set) Seal(id blockstore.BlockID) (int64, uint64, error) {
	v, unlock, err := s.placeFor(id)
	if err != nil {
		return 0, 0, err
	}
	defer unlock()
	v.begin()
	size, version, err := v.store.Seal(id)
	v.end()
	return size, version, s.note(v, err)
}

// placeFor returns the volume holding block id or, if none does, one
// picked for a new replica; in that case the block's create lock is held
// until unlock is called, so that no other volume creates it meanwhile.
func (s *Set) placeFor(id blockstore.BlockID) (v *Volume, unlock func(), err error) {
	if v := s.find(id); v != nil {
		return v, func() {}, nil
	}
	mu := s.stripe(id)
	mu.Lock()
	if v := s.find(id); v != nil {
		mu.Unlock()
		return v, func() {}, nil
	}
	if v, err = s.choose(); err != nil {
		mu.Unlock()
		return nil, nil, err
	}
	return v, mu.Unlock, nil
}
