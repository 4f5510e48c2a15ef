package clock

import (
	"context"
	"sync"
	"time"
)

// Fake is a Clock that only moves when Advance is called. Its timers follow
// the Go 1.23+ contract of *time.Timer: after Stop or Reset returns, no stale
// value is received from C. Fake is safe for concurrent use.
//
// Now carries no monotonic reading; code that compares times from a Fake
// compares wall-clock readings, which never go backwards here.
type Fake struct {
	// mu guards everything below. Timers fire with mu held, which is what
	// keeps Advance's firing order strict; it is safe because firing is a
	// non-blocking send or starting a goroutine.
	mu      sync.Mutex
	now     time.Time
	armed   map[*fakeTimer]struct{}
	seq     uint64        // arming order, breaks ties between equal deadlines
	changed chan struct{} // closed (and replaced) when armed changes
}

var _ Clock = (*Fake)(nil)

// NewFake returns a Fake clock reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{
		now:     start,
		armed:   make(map[*fakeTimer]struct{}),
		changed: make(chan struct{}),
	}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer whose channel receives the fake time it fired at
// once the clock has been advanced by d. A d <= 0 fires at once.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// AfterFunc calls fn in its own goroutine once the clock has been advanced
// by d. Like time.AfterFunc, Advance does not wait for fn to run.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{f: f, fn: fn}
	t.Reset(d)
	return t
}

// Advance moves the clock forward by d, firing every timer that falls due
// in deadline order (ties in the order they were armed). While a timer
// fires, Now reads its deadline. A negative d is treated as zero: the clock
// never goes backwards.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	target := f.now.Add(max(d, 0))
	for {
		t := f.earliestLocked()
		if t == nil || t.deadline.After(target) {
			break
		}
		f.now = t.deadline
		f.fireLocked(t)
	}
	f.now = target
}

// WaiterCount returns the number of armed timers.
func (f *Fake) WaiterCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.armed)
}

// BlockUntil waits until at least n timers are armed, so a test can wait
// for a goroutine to arm its timer before advancing the clock. It returns
// ctx.Err() if ctx ends first.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		armed, changed := len(f.armed), f.changed
		f.mu.Unlock()
		if armed >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *Fake) earliestLocked() *fakeTimer {
	var first *fakeTimer
	for t := range f.armed {
		if first == nil || t.deadline.Before(first.deadline) ||
			(t.deadline.Equal(first.deadline) && t.seq < first.seq) {
			first = t
		}
	}
	return first
}

func (f *Fake) fireLocked(t *fakeTimer) {
	f.disarmLocked(t)
	if t.fn != nil {
		go t.fn()
		return
	}
	select {
	case t.c <- f.now:
	default: // unreachable: the channel is drained whenever the timer is re-armed
	}
}

func (f *Fake) armLocked(t *fakeTimer, d time.Duration) {
	f.seq++
	t.seq = f.seq
	t.deadline = f.now.Add(d)
	f.armed[t] = struct{}{}
	f.notifyLocked()
	if d <= 0 {
		f.fireLocked(t)
	}
}

// disarmLocked reports whether t was armed.
func (f *Fake) disarmLocked(t *fakeTimer) bool {
	if _, ok := f.armed[t]; !ok {
		return false
	}
	delete(f.armed, t)
	f.notifyLocked()
	return true
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	f  *Fake
	c  chan time.Time // nil for AfterFunc timers
	fn func()         // nil for channel timers

	// Guarded by f.mu.
	deadline time.Time
	seq      uint64
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

// Stop disarms t. As with Go 1.23+ timers, a value fired but not yet
// received is discarded and the timer counts as stopped, not fired.
func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.stopLocked()
}

// Reset re-arms t to fire d after the current fake time.
func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	active := t.stopLocked()
	t.f.armLocked(t, d)
	return active
}

func (t *fakeTimer) stopLocked() bool {
	active := t.f.disarmLocked(t)
	if t.c != nil {
		select {
		case <-t.c:
			active = true
		default:
		}
	}
	return active
}
