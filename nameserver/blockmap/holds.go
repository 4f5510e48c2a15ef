package blockmap

import "time"

// holdMeter measures how long the mutex is held at a time, for the tests
// and benchmarks that bound it. Off, it costs a branch per lock; on, it
// reads the wall clock, which is why only tests turn it on. It is
// guarded by the mutex it measures.
type holdMeter struct {
	on    bool
	since time.Time
	max   time.Duration
}

func (m *Map) lock() {
	m.mu.Lock()
	if m.mu.holds.on {
		m.mu.holds.since = time.Now()
	}
}

func (m *Map) unlock() {
	if h := &m.mu.holds; h.on {
		h.max = max(h.max, time.Since(h.since))
	}
	m.mu.Unlock()
}
