package session

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Table is the pure session state machine: sessions by id, and a min-heap of
// them by deadline so expiry costs O(log n) per expired session and nothing
// for the live ones. It does no I/O, reads no clock (every method that needs
// the time takes now) and is not safe for concurrent use.
//
// A session whose deadline is <= now is expired even before Expire removes
// it: Renew refuses it and List leaves it out.
type Table struct {
	byID map[ID]*entry
	heap deadlineHeap
	// owners counts the sessions of each owner, expired ones not yet
	// removed included, so that a limit per owner costs a lookup.
	owners map[string]int
}

type entry struct {
	s        Session
	deadline time.Time
	index    int // position in the heap, kept by deadlineHeap.Swap
}

// NewTable returns an empty Table.
func NewTable() *Table {
	return &Table{byID: make(map[ID]*entry), owners: make(map[string]int)}
}

// Grant inserts s, or replaces the session with the same ID, with deadline
// now+s.TTL.
func (t *Table) Grant(s Session, now time.Time) {
	deadline := now.Add(s.TTL)
	if e, ok := t.byID[s.ID]; ok {
		t.forget(e)
		e.s, e.deadline = s, deadline
		t.owners[s.Owner]++
		heap.Fix(&t.heap, e.index)
		return
	}
	e := &entry{s: s, deadline: deadline}
	t.byID[s.ID] = e
	t.owners[s.Owner]++
	heap.Push(&t.heap, e)
}

// Owned is the number of sessions of owner held, expired ones not yet
// removed included.
func (t *Table) Owned(owner string) int { return t.owners[owner] }

// forget drops e's session from the count of its owner.
func (t *Table) forget(e *entry) {
	if t.owners[e.s.Owner]--; t.owners[e.s.Owner] == 0 {
		delete(t.owners, e.s.Owner)
	}
}

// Renew moves the deadline of session id to now+TTL and returns the TTL.
// It fails with ErrNotFound for an unknown id and with ErrExpired for a
// session whose deadline has passed but that Expire has not removed yet: a
// keep-alive that arrives late does not bring a session back.
func (t *Table) Renew(id ID, now time.Time) (time.Duration, error) {
	e, ok := t.byID[id]
	if !ok {
		return 0, fmt.Errorf("renew session %s: %w", id, ErrNotFound)
	}
	if !now.Before(e.deadline) {
		return 0, fmt.Errorf("renew session %s, %v after its deadline: %w",
			id, now.Sub(e.deadline), ErrExpired)
	}
	e.deadline = now.Add(e.s.TTL)
	heap.Fix(&t.heap, e.index)
	return e.s.TTL, nil
}

// Revoke removes session id, expired or not, and returns it.
func (t *Table) Revoke(id ID) (Session, bool) {
	e, ok := t.byID[id]
	if !ok {
		return Session{}, false
	}
	heap.Remove(&t.heap, e.index)
	delete(t.byID, id)
	t.forget(e)
	return e.s, true
}

// Get returns session id and its deadline, whether or not it has passed.
func (t *Table) Get(id ID) (s Session, deadline time.Time, ok bool) {
	e, ok := t.byID[id]
	if !ok {
		return Session{}, time.Time{}, false
	}
	return e.s, e.deadline, true
}

// Expire removes and returns every session whose deadline is <= now, in
// deadline order (ties by ID). It returns nil if none is due.
func (t *Table) Expire(now time.Time) []Session {
	var ended []Session
	for len(t.heap.entries) > 0 && !t.heap.entries[0].deadline.After(now) {
		e := heap.Pop(&t.heap).(*entry)
		delete(t.byID, e.s.ID)
		t.forget(e)
		ended = append(ended, e.s)
	}
	return ended
}

// NextDeadline returns the earliest deadline, if there is any session.
func (t *Table) NextDeadline() (time.Time, bool) {
	if len(t.heap.entries) == 0 {
		return time.Time{}, false
	}
	return t.heap.entries[0].deadline, true
}

// List returns the sessions still live at now, sorted by ID. It is the one
// method that visits every session; it is meant for operators, not for any
// per-request path.
func (t *Table) List(now time.Time) []Info {
	infos := make([]Info, 0, len(t.byID))
	for _, e := range t.byID {
		if remaining := e.deadline.Sub(now); remaining > 0 {
			infos = append(infos, Info{Session: e.s, Remaining: remaining})
		}
	}
	slices.SortFunc(infos, func(a, b Info) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return infos
}

// Page returns one page of List: at most limit live sessions (at least 1)
// with an ID after after and, unless holder is "", that holder, sorted by
// ID, and next, the ID the following page resumes after ("" when no live
// session follows). It looks at every session once: O(n log limit).
func (t *Table) Page(after ID, limit int, holder string, now time.Time) (infos []Info, next ID) {
	limit = max(limit, 1)
	// The limit+1 smallest IDs after after, in a max-heap by ID: the one
	// beyond limit says whether another page follows.
	h := &idHeap{}
	for id, e := range t.byID {
		if id <= after || (holder != "" && e.s.Holder != holder) || !now.Before(e.deadline) {
			continue
		}
		if h.Len() <= limit {
			heap.Push(h, e)
		} else if id < h.entries[0].s.ID {
			h.entries[0] = e
			heap.Fix(h, 0)
		}
	}
	more := h.Len() > limit
	slices.SortFunc(h.entries, func(a, b *entry) int { return strings.Compare(string(a.s.ID), string(b.s.ID)) })
	if more {
		h.entries = h.entries[:limit]
	}
	infos = make([]Info, 0, len(h.entries))
	for _, e := range h.entries {
		infos = append(infos, Info{Session: e.s, Remaining: e.deadline.Sub(now)})
	}
	if more {
		next = infos[len(infos)-1].ID
	}
	return infos, next
}

// idHeap is a max-heap of entries by ID (it leaves entry.index alone:
// that is the deadline heap's).
type idHeap struct{ entries []*entry }

func (h *idHeap) Len() int           { return len(h.entries) }
func (h *idHeap) Less(i, j int) bool { return h.entries[i].s.ID > h.entries[j].s.ID }
func (h *idHeap) Swap(i, j int)      { h.entries[i], h.entries[j] = h.entries[j], h.entries[i] }
func (h *idHeap) Push(x any)         { h.entries = append(h.entries, x.(*entry)) }
func (h *idHeap) Pop() any {
	e := h.entries[len(h.entries)-1]
	h.entries = h.entries[:len(h.entries)-1]
	return e
}

// Len returns the number of sessions, including expired ones Expire has not
// removed yet.
func (t *Table) Len() int { return len(t.byID) }

// deadlineHeap implements heap.Interface, earliest deadline first.
type deadlineHeap struct {
	entries []*entry
	// compares counts calls to Less, so tests can check that expiry does
	// O(log n) work per expired session rather than scanning the table.
	compares int
}

func (h *deadlineHeap) Len() int { return len(h.entries) }

func (h *deadlineHeap) Less(i, j int) bool {
	h.compares++
	a, b := h.entries[i], h.entries[j]
	if c := a.deadline.Compare(b.deadline); c != 0 {
		return c < 0
	}
	return a.s.ID < b.s.ID // deterministic order for equal deadlines
}

func (h *deadlineHeap) Swap(i, j int) {
	h.entries[i], h.entries[j] = h.entries[j], h.entries[i]
	h.entries[i].index = i
	h.entries[j].index = j
}

func (h *deadlineHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(h.entries)
	h.entries = append(h.entries, e)
}

func (h *deadlineHeap) Pop() any {
	last := len(h.entries) - 1
	e := h.entries[last]
	h.entries[last] = nil // let the entry be collected
	h.entries = h.entries[:last]
	e.index = -1
	return e
}
