package dirlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/golang/glog"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/retry"
	"github.com/bfs-go/bfs/internal/taskgroup"
)

// Job is one directory's cleaning: the files that were open for write in
// its subtree when it moved to CLEANING, to be closed before it (and every
// lock below it that the cleaning took over) is UNLOCKED. (Its name is
// not Cleaning, which is the lock status.)
type Job struct {
	Path string
	// Dir is the directory's entry id; a directory's cleanings are known
	// by it.
	Dir   uint64
	Epoch Epoch
	// Reason is why the directory is cleaned: the holder unlocked it, it
	// was forced, its session expired, or a grant waits for it ("grant").
	Reason string
	// Files are the entry ids of the files to close. Nobody changes the
	// slice once the cleaning has started.
	Files []uint64
}

// ErrGone says a cleaning's directory is no longer there (deleted, or its
// path names another directory now): there is nothing left to unlock.
var ErrGone = errors.New("directory is gone")

// Store persists the ends of cleanings and knows those in progress. The
// nameserver's is the namespace; implementations must be safe for
// concurrent use.
type Store interface {
	// FinishCleaning persists the end of j (SPEC §6 step 4): j's directory
	// and every lock j took over become UNLOCKED in one durable step. It
	// reports false when nothing of j was left to finish: j was handed
	// over to a cleaning of a directory above (or finished already). An
	// error wrapping ErrGone or ErrStaleEpoch (the directory has moved on
	// to another epoch) is final; any other is retried.
	FinishCleaning(ctx context.Context, j Job, truncated int64) (unlocked bool, err error)
	// Cleanings lists the cleanings persisted as in progress.
	Cleanings(ctx context.Context) ([]Job, error)
}

// Outcome is how a cleaning ended.
type Outcome int

// The ends of a cleaning.
const (
	// Finished: UNLOCKED is persisted.
	Finished Outcome = iota
	// HandedOver: a cleaning of a directory above took this one's files
	// and directories over, and unlocks them when it finishes.
	HandedOver
	// Abandoned: the directory is gone, or has moved on to another epoch.
	Abandoned
)

func (o Outcome) String() string {
	switch o {
	case Finished:
		return "finished"
	case HandedOver:
		return "handed over"
	case Abandoned:
		return "abandoned"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// End is what OnEnd is told about a cleaning that ended.
type End struct {
	Outcome Outcome
	// Truncated is how many bytes longer replicas were cut.
	Truncated int64
	// Err is why an Abandoned cleaning was given up.
	Err error
}

// DefaultConcurrency bounds the files of one cleaning being closed at
// once when CleanerConfig leaves it zero. Each is a goroutine that mostly
// waits (the FileCloser bounds the RPCs); the bound only keeps a fence of
// very many files from starting a goroutine for each at once.
const DefaultConcurrency = 1024

// CleanerConfig configures a Cleaner.
type CleanerConfig struct {
	Closer FileCloser  // required
	Store  Store       // required
	Clock  clock.Clock // required
	// Concurrency bounds the files of one cleaning being closed at once;
	// zero means DefaultConcurrency.
	Concurrency int
	// OnEnd, if set, is called once for every cleaning that ends while
	// the Cleaner runs, after it has left the Cleaner, on the cleaning's
	// goroutine. A cleaning cut short by Close does not end: it resumes
	// after the restart.
	OnEnd func(j Job, e End)
}

// Cleaner owns the cleanings in progress: it drains each one's files
// through the FileCloser, then persists its end through the Store. See
// the package documentation, "Cleaning".
type Cleaner struct {
	closer FileCloser
	store  Store
	clock  clock.Clock
	limit  int
	onEnd  func(Job, End)
	tasks  *taskgroup.Group

	mu struct {
		sync.Mutex
		// byDir holds the cleanings in progress by directory entry id.
		byDir map[uint64]*Job
	}
}

// NewCleaner returns a Cleaner with no cleaning in progress; Resume
// starts those its Store knows of.
func NewCleaner(cfg CleanerConfig) (*Cleaner, error) {
	switch {
	case cfg.Closer == nil:
		return nil, errors.New("dirlock: CleanerConfig.Closer is required")
	case cfg.Store == nil:
		return nil, errors.New("dirlock: CleanerConfig.Store is required")
	case cfg.Clock == nil:
		return nil, errors.New("dirlock: CleanerConfig.Clock is required")
	case cfg.Concurrency < 0:
		return nil, fmt.Errorf("dirlock: negative cleaning concurrency %d", cfg.Concurrency)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	c := &Cleaner{
		closer: cfg.Closer, store: cfg.Store, clock: cfg.Clock, limit: cfg.Concurrency,
		onEnd: cfg.OnEnd, tasks: taskgroup.New(),
	}
	c.mu.byDir = make(map[uint64]*Job)
	return c, nil
}

// Start begins the cleaning j, whose move to CLEANING is persisted: its
// files are closed and then its end is persisted, in the background. A
// newer cleaning of the same directory replaces an older one as the one
// Get answers. It reports false if the Cleaner is closed; the cleaning
// then resumes after the restart.
func (c *Cleaner) Start(j Job) bool {
	own := &j
	c.mu.Lock()
	c.mu.byDir[j.Dir] = own
	c.mu.Unlock()
	if c.tasks.Go(func(ctx context.Context) { c.run(ctx, own) }) {
		return true
	}
	c.forget(own)
	return false
}

// Resume starts every cleaning the Store has in progress: after a restart
// (or a change of leader) they go on from draining their files (SPEC §6
// step 5). It returns how many it started.
func (c *Cleaner) Resume(ctx context.Context) (int, error) {
	jobs, err := c.store.Cleanings(ctx)
	if err != nil {
		return 0, fmt.Errorf("dirlock: listing the cleanings to resume: %w", err)
	}
	for _, j := range jobs {
		glog.Infof("resuming the cleaning of %s (epoch %d, %d files)", j.Path, j.Epoch, len(j.Files))
		c.Start(j)
	}
	return len(jobs), nil
}

// Get returns the cleaning in progress of directory dir.
func (c *Cleaner) Get(dir uint64) (Job, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.mu.byDir[dir]
	if !ok {
		return Job{}, false
	}
	return *j, true
}

// Jobs returns the cleanings in progress.
func (c *Cleaner) Jobs() []Job {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Job, 0, len(c.mu.byDir))
	for _, j := range c.mu.byDir {
		out = append(out, *j)
	}
	return out
}

// Close stops every cleaning and waits for their goroutines. What they
// had not persisted resumes after the restart. Start refuses cleanings
// from then on.
func (c *Cleaner) Close() { c.tasks.Stop() }

// run is one cleaning, from draining its files to persisting its end.
func (c *Cleaner) run(ctx context.Context, j *Job) {
	truncated, err := CloseFilesCtx(ctx, c.closer, j.Files, c.limit)
	if err != nil {
		return // closing: the cleaning resumes after the restart
	}
	end, ok := c.finish(ctx, j, truncated)
	if !ok {
		return
	}
	c.forget(j)
	if c.onEnd != nil {
		c.onEnd(*j, end)
	}
}

// finish persists the end of j, retrying with backoff until the Store
// takes it or says it is final; false if the Cleaner closed first.
func (c *Cleaner) finish(ctx context.Context, j *Job, truncated int64) (End, bool) {
	b := finishBackoff()
	for {
		unlocked, err := c.store.FinishCleaning(ctx, *j, truncated)
		switch {
		case err == nil && unlocked:
			return End{Outcome: Finished, Truncated: truncated}, true
		case err == nil:
			return End{Outcome: HandedOver, Truncated: truncated}, true
		case errors.Is(err, ErrGone), errors.Is(err, ErrStaleEpoch):
			return End{Outcome: Abandoned, Truncated: truncated, Err: err}, true
		}
		glog.Warningf("finishing the cleaning of %s: %v; retrying", j.Path, err)
		if !clock.Sleep(ctx, c.clock, b.NextBackOff()) {
			return End{}, false
		}
	}
}

// finishBackoff paces the retries of a cleaning's end: the Store refuses
// only while it is busy or failing, and the cleanings that all wait for
// it must not retry in step.
func finishBackoff() *backoff.ExponentialBackOff { return retry.New(10*time.Millisecond, time.Second) }

// forget removes j, if it is still its directory's cleaning (a newer one
// of the same directory may have replaced it).
func (c *Cleaner) forget(j *Job) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.byDir[j.Dir] == j {
		delete(c.mu.byDir, j.Dir)
	}
}
