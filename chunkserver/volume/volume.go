package volume

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
)

// State is where a volume stands.
type State int

const (
	// Healthy: in service, taking new replicas.
	Healthy State = iota
	// Full: serving what it holds, taking no new replica, until space is
	// freed.
	Full
	// Failed: out of service until the chunkserver restarts.
	Failed
)

func (s State) String() string {
	switch s {
	case Healthy:
		return "healthy"
	case Full:
		return "full"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// ErrVolumeFailed: the volume that held the replica failed; the replica
// is gone from this chunkserver.
var ErrVolumeFailed = errors.New("volume failed")

// Policy is what a volume keeps free: a new replica goes only to a volume
// whose free space is above the larger of MinFree bytes and (1 - MaxFill)
// of its capacity. The zero Policy keeps nothing free.
type Policy struct {
	MinFree int64
	// MaxFill is the most of its capacity a volume is filled to, in
	// (0, 1]; 0 means 1.
	MaxFill float64
}

// reserve returns the bytes a volume of capacity bytes keeps free.
func (p Policy) reserve(capacity int64) int64 {
	r := p.MinFree
	if p.MaxFill > 0 && p.MaxFill < 1 {
		r = max(r, int64((1-p.MaxFill)*float64(capacity)))
	}
	return r
}

// Status describes a volume, as a heartbeat reports it.
type Status struct {
	// Index is the volume's place in Config.Dirs.
	Index int
	Dir   string
	State State
	// Reason says why the volume failed or is full; "" when healthy.
	Reason string
	// Since is when the volume entered its state (when it opened, for
	// one that has always been healthy).
	Since time.Time
	// Capacity and Free are its file system's, in bytes (0, 0 when it
	// cannot tell); Used the bytes of the replicas it holds, Blocks how
	// many.
	Capacity, Free, Used, Blocks int64
}

// Volume is one data directory.
type Volume struct {
	index int
	dir   string
	// store is nil for a volume that did not open.
	store *blockstore.Store
	// done is closed when the volume fails.
	done chan struct{}
	// kick wakes the volume's checker (Set.watch).
	kick chan struct{}
	// ops counts the store calls under way on the volume and those that
	// ended, for the checker to see a disk that hangs: it returns no
	// error to ask for a check.
	ops struct{ busy, ended atomic.Int64 }

	mu struct {
		sync.Mutex
		state State
		// full is set while the last check found no space.
		full   bool
		reason string
		since  time.Time
	}
	// check numbers the checks asked for, started and ended, and keeps
	// the last result. A check asked for is one that starts after the
	// asking: one under way may have looked at the disk before the error
	// that asks, so it does not answer for it.
	check struct {
		sync.Mutex
		wanted, started, ended uint64
		// urgent: a caller waits for the check asked for, which runs at
		// once rather than minCheckGap after the last one.
		urgent bool
		// last is when the last check started; zero before the first.
		last time.Time
		err  error
		// endc is closed, and replaced, when a check ends.
		endc chan struct{}
	}
}

func newVolume(index int, dir string, now time.Time) *Volume {
	v := &Volume{index: index, dir: dir, done: make(chan struct{}), kick: make(chan struct{}, 1)}
	v.mu.since = now
	v.check.endc = make(chan struct{})
	return v
}

// begin and end bracket a store call on the volume (see ops).
func (v *Volume) begin() { v.ops.busy.Add(1) }
func (v *Volume) end()   { v.ops.ended.Add(1); v.ops.busy.Add(-1) }

// ask asks for a check of the volume that starts from now on, urgent if
// the caller waits for it, wakes the checker and returns the check's
// number. Requests made before a check starts share it.
func (v *Volume) ask(urgent bool) uint64 {
	v.check.Lock()
	n := v.check.started + 1
	v.check.wanted = max(v.check.wanted, n)
	v.check.urgent = v.check.urgent || urgent
	v.check.Unlock()
	select {
	case v.kick <- struct{}{}:
	default:
	}
	return n
}

// startCheck records that a check starts at now, and returns its number.
func (v *Volume) startCheck(now time.Time) uint64 {
	v.check.Lock()
	defer v.check.Unlock()
	v.check.started++
	v.check.urgent = false
	v.check.last = now
	return v.check.started
}

// endCheck records the result of check n and wakes those waiting for it.
func (v *Volume) endCheck(n uint64, err error) {
	v.check.Lock()
	defer v.check.Unlock()
	v.check.ended, v.check.err = n, err
	close(v.check.endc)
	v.check.endc = make(chan struct{})
}

// failure is why the volume is out of service.
func (v *Volume) failure() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return fmt.Errorf("%w: %s: %s", ErrVolumeFailed, v.dir, v.mu.reason)
}

// Index is the volume's place in Config.Dirs.
func (v *Volume) Index() int { return v.index }

// Dir is the volume's data directory.
func (v *Volume) Dir() string { return v.dir }

// Store is the volume's block store; nil if it did not open.
func (v *Volume) Store() *blockstore.Store { return v.store }

// Done is closed when the volume fails.
func (v *Volume) Done() <-chan struct{} { return v.done }

// Failed reports whether the volume is out of service.
func (v *Volume) Failed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mu.state == Failed
}

// serving reports whether the volume is in service (healthy or full).
func (v *Volume) serving() bool { return !v.Failed() }

// fail takes the volume out of service; false if it was already.
func (v *Volume) fail(reason string, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mu.state == Failed {
		return false
	}
	v.mu.state, v.mu.reason, v.mu.since = Failed, reason, now
	close(v.done)
	return true
}

// isFull reports whether the volume was found full.
func (v *Volume) isFull() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mu.full
}

// setFull records what the last check said of the volume's space; it
// reports whether that changed.
func (v *Volume) setFull(full bool, reason string, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mu.state == Failed || v.mu.full == full {
		return false
	}
	v.mu.full, v.mu.reason, v.mu.since = full, reason, now
	return true
}

// status describes the volume, with its file system's capacity and free
// bytes, under policy p.
func (v *Volume) status(capacity, free int64, p Policy) Status {
	v.mu.Lock()
	st := Status{Index: v.index, Dir: v.dir, State: v.mu.state, Reason: v.mu.reason, Since: v.mu.since,
		Capacity: capacity, Free: free}
	full := v.mu.full
	v.mu.Unlock()
	if st.State == Failed {
		st.Capacity, st.Free = 0, 0
		return st
	}
	if v.store != nil {
		st.Blocks, st.Used = v.store.Usage()
	}
	switch {
	case full:
		st.State = Full
	case capacity > 0 && free <= p.reserve(capacity):
		st.State, st.Reason = Full, fmt.Sprintf("%d bytes free, no more than the %d the placement policy keeps free", free, p.reserve(capacity))
	default:
		st.Reason = ""
	}
	return st
}
