package dirlock

import (
	"errors"
	"fmt"

	"github.com/bfs-go/bfs/internal/fspath"
)

// Fence is a lock a client holds or has lost, as it sends it with a
// mutation of a path at, under or (for a recursive delete, a move) above
// the lock's directory: the fencing token of SPEC §6.
type Fence struct {
	Path  string
	Epoch Epoch
}

// ErrFenceUnrelated refuses a fence whose directory is neither at, above
// nor below any path of the request it came with: a confused client.
var ErrFenceUnrelated = errors.New("fence unrelated to the request's paths")

// StaleEpochError is a fence refused: its directory is no longer LOCKED at
// its epoch by the sending session. Lock is the directory's lock now (its
// Status is Unlocked when nobody holds it). It matches ErrStaleEpoch.
type StaleEpochError struct {
	Fence Fence
	Lock  Lock
}

func (e *StaleEpochError) Error() string {
	now := "unlocked"
	switch e.Lock.Status {
	case Locked:
		now = fmt.Sprintf("locked by %s at epoch %d", e.Lock.Holder, e.Lock.Epoch)
	case Cleaning:
		now = fmt.Sprintf("being cleaned at epoch %d", e.Lock.Epoch)
	}
	return fmt.Sprintf("%s: the lock of epoch %d was lost; the directory is %s now (lock it again to use it)",
		e.Fence.Path, e.Fence.Epoch, now)
}

// Is matches ErrStaleEpoch.
func (e *StaleEpochError) Is(target error) bool { return target == ErrStaleEpoch }

// CheckFences accepts a mutation of targets by session carrying fences
// only while each fence's directory is LOCKED at the fence's epoch by
// session. A fence must lie at, above or below one of targets.
//
// Like Check, it is atomic with the mutation only under the owner's path
// locks: a fence above or at a target is read- or write-locked with it,
// and one below a target is covered by the target's write lock (a lock
// transition below it read-locks the target).
func (t *Table) CheckFences(targets []string, session SessionID, fences []Fence) error {
	if len(fences) == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range fences {
		if !related(f.Path, targets) {
			return fmt.Errorf("%w: fence %s (epoch %d)", ErrFenceUnrelated, f.Path, f.Epoch)
		}
		l := t.mu.byPath[f.Path]
		if l == nil {
			return &StaleEpochError{Fence: f, Lock: Lock{Path: f.Path}}
		}
		if l.Status != Locked || l.Epoch != f.Epoch || l.Session != session {
			return &StaleEpochError{Fence: f, Lock: *l}
		}
	}
	return nil
}

func related(dir string, targets []string) bool {
	for _, t := range targets {
		if fspath.Within(t, dir) || fspath.Within(dir, t) {
			return true
		}
	}
	return false
}
