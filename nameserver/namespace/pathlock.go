package namespace

import "sync"

// pathLocks serializes mutations whose paths overlap. A mutation names the
// paths it only depends on (reads: they must keep existing and keep their
// meaning) and the paths it changes (writes). It waits until it can take
// all of them at once, so there is no lock order to get wrong.
//
// Writers can starve behind a steady stream of readers of the same path
// (say, renaming a directory that is busy with creates); holds last one
// batch commit, so in practice the wait is short.
type pathLocks struct {
	mu struct {
		sync.Mutex
		// held maps a path to its number of readers, or -1 for a writer.
		held map[string]int
	}
	cond *sync.Cond
}

func newPathLocks() *pathLocks {
	l := &pathLocks{}
	l.mu.held = make(map[string]int)
	l.cond = sync.NewCond(&l.mu)
	return l
}

// acquire blocks until every path in writes is free and no path in reads
// is write-held, takes them, and returns the function that releases them.
// A path in both lists is taken for writing.
func (l *pathLocks) acquire(reads, writes []string) (release func()) {
	writes = without(writes, nil)
	reads = without(reads, writes)
	l.mu.Lock()
	for !l.freeLocked(reads, writes) {
		l.cond.Wait()
	}
	for _, p := range writes {
		l.mu.held[p] = -1
	}
	for _, p := range reads {
		l.mu.held[p]++
	}
	l.mu.Unlock()
	return func() { l.release(reads, writes) }
}

func (l *pathLocks) freeLocked(reads, writes []string) bool {
	for _, p := range writes {
		if l.mu.held[p] != 0 {
			return false
		}
	}
	for _, p := range reads {
		if l.mu.held[p] < 0 {
			return false
		}
	}
	return true
}

func (l *pathLocks) release(reads, writes []string) {
	l.mu.Lock()
	for _, p := range writes {
		delete(l.mu.held, p)
	}
	for _, p := range reads {
		if l.mu.held[p]--; l.mu.held[p] == 0 {
			delete(l.mu.held, p)
		}
	}
	l.mu.Unlock()
	l.cond.Broadcast()
}

// without returns the paths of a that are not in b, without duplicates.
func without(a, b []string) []string {
	out := make([]string, 0, len(a))
	for _, p := range a {
		if !contains(b, p) && !contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func contains(list []string, p string) bool {
	for _, q := range list {
		if q == p {
			return true
		}
	}
	return false
}
