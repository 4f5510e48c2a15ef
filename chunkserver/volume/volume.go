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
	// dirty asks the Set's goroutine for a check.
	dirty atomic.Bool

	mu struct {
		sync.Mutex
		state State
		// full is set while the last check found no space.
		full   bool
		reason string
		since  time.Time
	}
	// check serializes checks and keeps the last result.
	check struct {
		sync.Mutex
		at  time.Time
		err error
	}
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
