package main

import (
	"sync"
	"sync/atomic"
)

// lastHandle is the last handle issued, of any kind. Handles come from one
// counter so that a handle of one kind passed where another is expected is
// found in no table: BFS_ERR_BAD_HANDLE, not another object.
var lastHandle atomic.Uint64

// handles is a table of the objects of one kind that C holds handles to.
// C gets the integer, never a pointer: a stale or forged handle is a miss,
// not a crash, and Go memory never crosses into C. Handles are never
// reused, so a handle closed on one thread cannot name a new object that
// another thread would then use by mistake.
type handles[T any] struct {
	mu struct {
		sync.RWMutex
		byHandle map[uint64]T
	}
}

// add registers v and returns its new handle.
func (t *handles[T]) add(v T) uint64 {
	h := lastHandle.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.byHandle == nil {
		t.mu.byHandle = make(map[uint64]T)
	}
	t.mu.byHandle[h] = v
	return h
}

// get returns the object of handle h.
func (t *handles[T]) get(h uint64) (T, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	v, ok := t.mu.byHandle[h]
	return v, ok
}

// remove unregisters handle h and returns its object: of several callers
// removing h at once, one gets it.
func (t *handles[T]) remove(h uint64) (T, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.mu.byHandle[h]
	delete(t.mu.byHandle, h)
	return v, ok
}
