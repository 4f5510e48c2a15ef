package dirlock

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bfs-go/bfs/internal/fspath"
)

// Epoch numbers the grants of locks; it only grows.
type Epoch uint64

// SessionID names the session holding a lock.
type SessionID string

// Status is the state of a directory's lock.
type Status int

// The lock states.
const (
	Unlocked Status = iota
	Locked
	Cleaning
)

func (s Status) String() string {
	switch s {
	case Unlocked:
		return "UNLOCKED"
	case Locked:
		return "LOCKED"
	case Cleaning:
		return "CLEANING"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Lock is one locked (or cleaning) directory.
type Lock struct {
	Path    string
	Status  Status
	Holder  string
	Session SessionID
	Epoch   Epoch
	// Since is when the lock entered its status (wall clock, display only).
	Since time.Time
	// EntryID is the directory's entry id in the namespace.
	EntryID uint64
}

// Errors. A *LockedError matches ErrLocked or ErrCleaning by its status.
var (
	ErrLocked     = errors.New("directory locked by another session")
	ErrCleaning   = errors.New("directory is being cleaned")
	ErrUnlocked   = errors.New("directory is not locked")
	ErrStaleEpoch = errors.New("lock epoch is stale")
)

// LockedError says which lock refused a request.
type LockedError struct {
	Lock Lock
	// Move is set when the request would have moved the lock (a rename of
	// its directory or of one above it), which nobody may do.
	Move bool
}

func (e *LockedError) Error() string {
	var msg string
	if e.Lock.Status == Cleaning {
		msg = fmt.Sprintf("%s is being cleaned (epoch %d)", e.Lock.Path, e.Lock.Epoch)
	} else {
		msg = fmt.Sprintf("%s is locked by %s (epoch %d)", e.Lock.Path, e.Lock.Holder, e.Lock.Epoch)
	}
	if e.Move {
		msg += ": a locked directory cannot be moved; unlock it first"
	}
	return msg
}

// Is matches ErrLocked or ErrCleaning, by the lock's status.
func (e *LockedError) Is(target error) bool {
	return (target == ErrLocked && e.Lock.Status == Locked) || (target == ErrCleaning && e.Lock.Status == Cleaning)
}

// Table holds every lock that is not UNLOCKED. It is safe for concurrent
// use; see the package documentation for what makes checks atomic.
type Table struct {
	mu struct {
		sync.Mutex
		byPath map[string]*Lock
		// paths is byPath's keys, sorted, for subtree queries.
		paths []string
		// locked counts the LOCKED locks (the others are CLEANING).
		locked int
	}
}

// NewTable returns an empty table.
func NewTable() *Table {
	t := &Table{}
	t.mu.byPath = make(map[string]*Lock)
	return t
}

// Check decides whether session may mutate target: no directory at or
// above target may be locked by another session or be cleaning.
func (t *Table) Check(target string, session SessionID) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.checkAboveLocked(target, session)
}

// CheckSubtree is Check for a mutation that also affects everything below
// target (a recursive delete, the move of a directory): no directory in
// target's subtree may be locked by another session or be cleaning either.
func (t *Table) CheckSubtree(target string, session SessionID) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkAboveLocked(target, session); err != nil {
		return err
	}
	return t.checkBelowLocked(target, session)
}

// CheckMove is Check for moving target (a rename's source): besides,
// no directory at or below target may be locked or cleaning at all, not
// even by session. Everyone knows a lock by its path (the holder's
// handle, the master, lockctl, the history); moving it would leave them
// all watching a directory that is not the locked one.
func (t *Table) CheckMove(target string, session SessionID) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkAboveLocked(target, session); err != nil {
		return err
	}
	if l := t.mu.byPath[target]; l != nil {
		return &LockedError{Lock: *l, Move: true}
	}
	if below := t.belowLocked(target); len(below) > 0 {
		return &LockedError{Lock: *t.mu.byPath[below[0]], Move: true}
	}
	return nil
}

func (t *Table) checkAboveLocked(target string, session SessionID) error {
	if len(t.mu.byPath) == 0 {
		return nil
	}
	for p := target; ; p = fspath.Dir(p) {
		if l := t.mu.byPath[p]; l != nil && (l.Status == Cleaning || l.Session != session) {
			return &LockedError{Lock: *l}
		}
		if p == fspath.Root {
			return nil
		}
	}
}

// checkBelowLocked refuses if a lock strictly below target belongs to
// another session or is cleaning.
func (t *Table) checkBelowLocked(target string, session SessionID) error {
	for _, p := range t.belowLocked(target) {
		if l := t.mu.byPath[p]; l.Status == Cleaning || l.Session != session {
			return &LockedError{Lock: *l}
		}
	}
	return nil
}

// belowLocked returns the locked paths strictly below target, sorted.
func (t *Table) belowLocked(target string) []string {
	prefix := target + "/"
	if target == fspath.Root {
		prefix = "/"
	}
	i := sort.SearchStrings(t.mu.paths, prefix)
	var out []string
	for ; i < len(t.mu.paths) && strings.HasPrefix(t.mu.paths[i], prefix); i++ {
		if t.mu.paths[i] != target {
			out = append(out, t.mu.paths[i])
		}
	}
	return out
}

// CanLock decides a LockDir of path by session. It returns the existing
// lock if session already holds path (a retried request: grant it again
// with the same epoch), nil if a new lock may be granted, or the error
// that refuses it.
func (t *Table) CanLock(path string, session SessionID) (*Lock, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.mu.byPath[path]; l != nil {
		if l.Status == Locked && l.Session == session {
			held := *l
			return &held, nil
		}
		return nil, &LockedError{Lock: *l}
	}
	if err := t.checkAboveLocked(path, session); err != nil {
		return nil, err
	}
	return nil, t.checkBelowLocked(path, session)
}

// CanUnlock decides an UnlockDir of path. force lets anyone unlock; a
// non-zero epoch must match the lock's. It returns the lock to release, or
// ErrUnlocked / a *LockedError for a CLEANING lock (the current state, not
// a failure) / ErrStaleEpoch / a *LockedError (ErrLocked) for a session
// that does not hold it.
func (t *Table) CanUnlock(path string, session SessionID, force bool, epoch Epoch) (Lock, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.mu.byPath[path]
	switch {
	case l == nil:
		return Lock{Path: path}, ErrUnlocked
	case l.Status == Cleaning:
		return *l, &LockedError{Lock: *l}
	case epoch != 0 && epoch != l.Epoch:
		return *l, fmt.Errorf("%w: %s is at epoch %d, not %d", ErrStaleEpoch, path, l.Epoch, epoch)
	case !force && l.Session != session:
		return *l, &LockedError{Lock: *l}
	}
	return *l, nil
}

// Subtree returns path's lock and every lock below it, path's first.
func (t *Table) Subtree(path string) []Lock {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Lock
	if l := t.mu.byPath[path]; l != nil {
		out = append(out, *l)
	}
	for _, p := range t.belowLocked(path) {
		out = append(out, *t.mu.byPath[p])
	}
	return out
}

// Reset forgets every lock (before the table is filled again from a
// restored store).
func (t *Table) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.byPath = make(map[string]*Lock)
	t.mu.paths, t.mu.locked = nil, 0
}

// Set records a lock in its new state (LOCKED or CLEANING).
func (t *Table) Set(l Lock) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.mu.byPath[l.Path]; !ok {
		i, _ := slices.BinarySearch(t.mu.paths, l.Path)
		t.mu.paths = slices.Insert(t.mu.paths, i, l.Path)
	} else if old.Status == Locked {
		t.mu.locked--
	}
	if l.Status == Locked {
		t.mu.locked++
	}
	t.mu.byPath[l.Path] = &l
}

// Remove records that path is UNLOCKED.
func (t *Table) Remove(path string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(path)
}

func (t *Table) removeLocked(path string) {
	l, ok := t.mu.byPath[path]
	if !ok {
		return
	}
	if l.Status == Locked {
		t.mu.locked--
	}
	delete(t.mu.byPath, path)
	if i, ok := slices.BinarySearch(t.mu.paths, path); ok {
		t.mu.paths = slices.Delete(t.mu.paths, i, i+1)
	}
}

// Get returns the lock of path, if it is not UNLOCKED.
func (t *Table) Get(path string) (Lock, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.mu.byPath[path]; l != nil {
		return *l, true
	}
	return Lock{}, false
}

// List returns the locks at or under prefix, sorted by path; with
// filter, only those in status.
func (t *Table) List(prefix string, filter bool, status Status) []Lock {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Lock
	for _, p := range t.mu.paths {
		l := t.mu.byPath[p]
		if fspath.Within(p, prefix) && (!filter || l.Status == status) {
			out = append(out, *l)
		}
	}
	return out
}

// Held returns the locks session holds (LOCKED), sorted by path.
func (t *Table) Held(session SessionID) []Lock {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Lock
	for _, p := range t.mu.paths {
		if l := t.mu.byPath[p]; l.Session == session && l.Status == Locked {
			out = append(out, *l)
		}
	}
	return out
}
