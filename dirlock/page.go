package dirlock

import (
	"sort"
	"strings"

	"github.com/bfs-go/bfs/internal/fspath"
)

// Query selects one page of a lock listing. Pages come in path order;
// each resumes strictly after the path the previous one ended at, so a
// lock added or removed between pages neither breaks the listing nor
// shows twice: one added behind the cursor is not seen, one added ahead
// of it is.
type Query struct {
	// Prefix keeps the locks at or under this directory ("" or "/": all).
	Prefix string
	// After resumes the listing strictly after this path ("": from the
	// start); it is the Next of the previous page.
	After string
	// Status keeps only locks in this state; Unlocked (the zero value)
	// keeps both LOCKED and CLEANING, since the table holds nothing else.
	Status Status
	// Holder and Session, when set, keep only the locks with that holder
	// or of that session.
	Holder  string
	Session SessionID
	// Limit is the most locks a page holds (at least 1).
	Limit int
	// Scan bounds the locks a page looks at, so that a selective filter
	// over many locks holds the table's mutex briefly: a page that reaches
	// it ends early, possibly empty, and the listing goes on from where it
	// stopped. 0 means no bound.
	Scan int
}

// matches reports whether l passes q's filters (not its range).
func (q *Query) matches(l *Lock) bool {
	return (q.Status == Unlocked || l.Status == q.Status) &&
		(q.Holder == "" || l.Holder == q.Holder) &&
		(q.Session == "" || l.Session == q.Session)
}

// Page returns the locks of one page of q, sorted by path, and next, the
// path the following page resumes after ("" when the listing is
// complete). A full page whose last lock is the last match reports next
// "": a listing ends with an empty page only when Scan cut it or the
// locks changed between pages. It costs O(log n) to find the page's
// start, then O(locks looked at).
func (t *Table) Page(q Query) (locks []Lock, next string) {
	q.Limit = max(q.Limit, 1)
	prefix := q.Prefix
	if prefix == "" {
		prefix = fspath.Root
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	scanned := 0
	var last string // the last path looked at
	for i := t.pageStartLocked(prefix, q.After); i < len(t.mu.paths); {
		p := t.mu.paths[i]
		i = t.nextLocked(i, p, prefix)
		if !inPrefix(p, prefix) {
			break // past the subtree: paths under a prefix are contiguous
		}
		if q.Scan > 0 && scanned == q.Scan {
			return locks, last
		}
		scanned++
		l := t.mu.byPath[p]
		if !q.matches(l) {
			last = p
			continue
		}
		if len(locks) == q.Limit {
			return locks, locks[len(locks)-1].Path // another match follows
		}
		locks = append(locks, *l)
		last = p
	}
	return locks, ""
}

// nextLocked is the index after i, the index of p, in a listing of
// prefix's subtree: past prefix itself it skips to its subtree.
func (t *Table) nextLocked(i int, p, prefix string) int {
	if p == prefix && prefix != fspath.Root {
		return sort.SearchStrings(t.mu.paths, prefix+"/")
	}
	return i + 1
}

// pageStartLocked is the index of the first path of prefix's subtree
// strictly after after. The subtree is prefix itself and the range of
// paths starting with prefix+"/"; between the two lie siblings such as
// prefix+"-old", which sort before "/", and are skipped.
func (t *Table) pageStartLocked(prefix, after string) int {
	if prefix == fspath.Root {
		return t.searchAfterLocked(after)
	}
	if after < prefix {
		if i := sort.SearchStrings(t.mu.paths, prefix); i < len(t.mu.paths) && t.mu.paths[i] == prefix {
			return i
		}
	}
	if below := prefix + "/"; after < below {
		return sort.SearchStrings(t.mu.paths, below)
	}
	return t.searchAfterLocked(after)
}

// searchAfterLocked is the index of the first path > after (all of them
// for after "").
func (t *Table) searchAfterLocked(after string) int {
	if after == "" {
		return 0
	}
	// after+"\x00" is the least string greater than after.
	return sort.SearchStrings(t.mu.paths, after+"\x00")
}

// inPrefix reports whether p is prefix or lies under it.
func inPrefix(p, prefix string) bool {
	if prefix == fspath.Root {
		return true
	}
	return p == prefix || (strings.HasPrefix(p, prefix) && p[len(prefix)] == '/')
}

// Counts returns how many directories are LOCKED and how many CLEANING.
func (t *Table) Counts() (locked, cleaning int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.locked, len(t.mu.byPath) - t.mu.locked
}

// heldScanChunk is how many locks HeldBy looks at per hold of the mutex.
const heldScanChunk = 4096

// HeldBy returns, for each of sessions, the paths of the locks it holds
// (LOCKED), sorted, at most perSession of them, and how many it holds in
// all. It visits every lock once, whatever the number of sessions, and
// releases the table's mutex every few thousand locks, so it never stalls
// the lock checks of mutations for long; locks set or removed meanwhile
// may or may not be counted.
func (t *Table) HeldBy(sessions []SessionID, perSession int) (paths map[SessionID][]string, counts map[SessionID]int) {
	want := make(map[SessionID]bool, len(sessions))
	for _, s := range sessions {
		want[s] = true
	}
	paths, counts = make(map[SessionID][]string), make(map[SessionID]int)
	for after := ""; ; {
		var done bool
		after, done = t.heldChunk(want, after, perSession, paths, counts)
		if done {
			return paths, counts
		}
	}
}

// heldChunk is one step of HeldBy: the locks strictly after after, up to
// heldScanChunk of them. It returns the last path looked at and whether
// the table ended.
func (t *Table) heldChunk(want map[SessionID]bool, after string, perSession int, paths map[SessionID][]string, counts map[SessionID]int) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := t.searchAfterLocked(after)
	end := min(i+heldScanChunk, len(t.mu.paths))
	for _, p := range t.mu.paths[i:end] {
		l := t.mu.byPath[p]
		if l.Status != Locked || !want[l.Session] {
			continue
		}
		counts[l.Session]++
		if len(paths[l.Session]) < perSession {
			paths[l.Session] = append(paths[l.Session], p)
		}
	}
	if end == len(t.mu.paths) {
		return "", true
	}
	return t.mu.paths[end-1], false
}
