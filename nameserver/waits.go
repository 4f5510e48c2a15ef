package nameserver

import (
	"errors"
	"fmt"
	"sync"
)

// errLockWaits is wrapped by a waiting lock call refused by the limit of
// its identity.
var errLockWaits = errors.New("too many lock calls waiting")

// lockWaits counts the LockDir and UnlockDir calls waiting for a lock to
// change, by identity, and refuses one past max. Every lock transition
// wakes each of them (watchers.changes), so their number is what a
// transition costs.
type lockWaits struct {
	max int
	mu  struct {
		sync.Mutex
		byIdentity map[string]int
		total      int
	}
}

func newLockWaits(max int) *lockWaits {
	w := &lockWaits{max: max}
	w.mu.byIdentity = make(map[string]int)
	return w
}

// enter counts a call of identity that is about to wait, or refuses it;
// leave ends the count.
func (w *lockWaits) enter(identity string) (leave func(), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.byIdentity[identity] >= w.max {
		return nil, fmt.Errorf("%w: %s has %d LockDir and UnlockDir calls waiting, the most one identity may (--max-lock-waits-per-identity): wait in fewer calls at once, or ask without waiting",
			errLockWaits, identity, w.max)
	}
	w.mu.byIdentity[identity]++
	w.mu.total++
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.mu.byIdentity[identity]--; w.mu.byIdentity[identity] == 0 {
			delete(w.mu.byIdentity, identity)
		}
		w.mu.total--
	}, nil
}

// count is how many calls wait.
func (w *lockWaits) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.total
}
