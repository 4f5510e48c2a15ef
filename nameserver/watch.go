package nameserver

import (
	"errors"
	"fmt"
	"sync"

	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// watchers fans lock transitions out to WatchDirLocks streams, and wakes
// calls waiting for a lock to change (LockDir and UnlockDir with wait):
// each waits for the lock of one path (waitAt), and a transition wakes
// the calls waiting on its path only.
//
// Publishing never walks the watchers. A transition is appended to a
// few feeds: the feed of the session whose lock ended (the SDK's watch,
// one stream per client session) and the feed of each prefix at or above
// its path that someone watches, a map lookup per level of the path.
// Every watcher of a feed reads it at a cursor of its own, and publish
// wakes only those already waiting at the feed's end: one blocked in a
// Send (a client that does not read) costs nothing. So publishing, which
// runs in the apply step under the command's path locks, costs the
// depth of the path, whatever the number of watchers (the flood of idle
// watchers that took other clients' lock+unlock from 1 ms to seconds).
//
// A feed keeps its last buffer transitions while a watcher still has to
// read them, and none once every watcher has: a watcher that falls
// further behind than buffer is cut off when it next reads (errLagged:
// it must list again and watch anew). The memory of a feed is thus at
// most buffer events, shared by all its watchers; the streams are
// bounded per identity (a prefix's) and per session (a session's), see
// subscribe.
//
// The status page's feed (sink) is the one channel delivery left: one
// in-process reader, never a client.
type watchers struct {
	buffer                  int // transitions a feed keeps
	perIdentity, perSession int // streams an identity / a session may have open
	total                   int // streams of a prefix all identities may have open
	mu                      struct {
		sync.Mutex
		bySession map[string]*feed
		byPrefix  map[string]*feed
		// identities counts the prefix watchers of each identity,
		// prefixes all prefix watchers, streams all watchers.
		identities map[string]int
		prefixes   int
		streams    int
		sinks      map[*sink]struct{}
		// atPath are the calls waiting for a transition of the lock of
		// a path.
		atPath map[string]*pathWait
	}
}

// pathWait is the calls waiting on one path: ready is closed (and
// replaced) at the path's next transition.
type pathWait struct {
	ready chan struct{}
	calls int
}

// feed is the transitions one session's watchers, or one prefix's, see.
// Its fields are guarded by watchers.mu.
type feed struct {
	key     string
	session bool
	// events holds the transitions numbered first..next-1; behind
	// counts the watchers whose cursor is before next. With none behind
	// it holds nothing.
	events      []*bfspb.DirLockEvent
	first, next uint64
	watchers    int
	behind      int
	// ready is closed at the next append if someone took it.
	ready chan struct{}
	taken bool
}

// watcher is one stream's place in its feed.
type watcher struct {
	feed *feed
	// prefix filters a session's feed (a prefix's feed is its own
	// filter); identity is who a prefix watcher counts against.
	prefix, session, identity string
	cursor                    uint64 // the next transition to read
}

// sink is the status page's subscription: every transition under
// prefix, delivered into a buffered channel; lagged is closed (and the
// sink dropped) when the channel is full.
type sink struct {
	prefix string
	events chan *bfspb.DirLockEvent
	lagged chan struct{}
}

// errWatchLimit is wrapped by a watch refused by a limit.
var errWatchLimit = errors.New("too many lock watch streams")

// watchLimitError refuses a stream over a limit (see subscribe).
type watchLimitError struct {
	session  string // a session's watch: its limit is the session's
	identity string
	total    bool // the limit of all identities together
	max      int
}

func (e *watchLimitError) Error() string {
	if e.total {
		return fmt.Sprintf("%v: the nameserver has %d lock watch streams of a prefix open, the most it takes (--max-watches): watch one session's locks, or later", errWatchLimit, e.max)
	}
	if e.session != "" {
		return fmt.Sprintf("%v: session %s has %d lock watch streams open, the most one session may (--max-watches-per-session): the SDK needs one per session", errWatchLimit, e.session, e.max)
	}
	return fmt.Sprintf("%v: %s has %d lock watch streams of a prefix open, the most one identity may (--max-watches-per-identity): close one, or watch one session's locks (a session's watches count against the session)", errWatchLimit, e.identity, e.max)
}

func (e *watchLimitError) Unwrap() error { return errWatchLimit }

func newWatchers(buffer, perIdentity, perSession, total int) *watchers {
	w := &watchers{buffer: buffer, perIdentity: perIdentity, perSession: perSession, total: total}
	w.mu.bySession = make(map[string]*feed)
	w.mu.byPrefix = make(map[string]*feed)
	w.mu.identities = make(map[string]int)
	w.mu.sinks = make(map[*sink]struct{})
	w.mu.atPath = make(map[string]*pathWait)
	return w
}

// waitAt returns a channel closed at the next transition of the lock of
// path (a transition published after waitAt returned); done ends the
// wait. A caller checks the lock after waitAt, so that no transition
// falls between its check and its wait.
func (w *watchers) waitAt(path string) (ready <-chan struct{}, done func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pw := w.mu.atPath[path]
	if pw == nil {
		pw = &pathWait{ready: make(chan struct{})}
		w.mu.atPath[path] = pw
	}
	pw.calls++
	return pw.ready, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if pw.calls--; pw.calls == 0 {
			delete(w.mu.atPath, path)
		}
	}
}

// subscribe registers a watcher of the transitions under prefix by
// identity; with a session, only of the ends of that session's locks.
// It reads from the next transition on. A session may have perSession
// watchers (whoever opens them: a session's owner and admins may), an
// identity perIdentity watchers of a prefix, and all identities total
// watchers of a prefix: more are refused with a *watchLimitError.
func (w *watchers) subscribe(prefix, session, identity string) (*watcher, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sub := &watcher{prefix: prefix, session: session}
	if session != "" {
		f := w.mu.bySession[session]
		if f != nil && f.watchers >= w.perSession {
			return nil, &watchLimitError{session: session, max: w.perSession}
		}
		sub.feed = w.feedLocked(w.mu.bySession, f, session, true)
	} else {
		switch {
		case w.mu.identities[identity] >= w.perIdentity:
			return nil, &watchLimitError{identity: identity, max: w.perIdentity}
		case w.mu.prefixes >= w.total:
			return nil, &watchLimitError{identity: identity, total: true, max: w.total}
		}
		sub.identity = identity
		w.mu.identities[identity]++
		w.mu.prefixes++
		sub.feed = w.feedLocked(w.mu.byPrefix, w.mu.byPrefix[prefix], prefix, false)
	}
	sub.feed.watchers++
	sub.cursor = sub.feed.next
	w.mu.streams++
	return sub, nil
}

// feedLocked is f, or a new feed of key in m if f is nil.
func (w *watchers) feedLocked(m map[string]*feed, f *feed, key string, session bool) *feed {
	if f == nil {
		f = &feed{key: key, session: session, ready: make(chan struct{})}
		m[key] = f
	}
	return f
}

func (w *watchers) unsubscribe(sub *watcher) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := sub.feed
	f.watchers--
	if sub.cursor < f.next {
		f.caughtUpLocked()
	}
	if f.watchers == 0 {
		if f.session {
			delete(w.mu.bySession, f.key)
		} else {
			delete(w.mu.byPrefix, f.key)
		}
	}
	if sub.session == "" {
		if w.mu.identities[sub.identity]--; w.mu.identities[sub.identity] == 0 {
			delete(w.mu.identities, sub.identity)
		}
		w.mu.prefixes--
	}
	w.mu.streams--
}

// streams is how many watch streams are open.
func (w *watchers) streams() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.streams
}

// watchBatch is the most transitions next hands a watcher at once.
const watchBatch = 64

// next gives sub the transitions it has not read yet, in buf (at most
// watchBatch), or, when it has read them all, a channel closed at the
// next one. lagged says sub fell further behind than the feed keeps:
// it is cut off.
func (w *watchers) next(sub *watcher, buf []*bfspb.DirLockEvent) (evs []*bfspb.DirLockEvent, ready <-chan struct{}, lagged bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := sub.feed
	switch {
	case sub.cursor < f.first:
		return nil, nil, true
	case sub.cursor == f.next:
		f.taken = true
		return nil, f.ready, false
	}
	from := sub.cursor - f.first
	n := min(f.next-sub.cursor, watchBatch)
	evs = append(buf[:0], f.events[from:from+n]...)
	if sub.cursor += n; sub.cursor == f.next {
		f.caughtUpLocked()
	}
	return evs, nil, false
}

// caughtUpLocked notes that a watcher behind is no longer: it read
// everything, or left.
func (f *feed) caughtUpLocked() {
	if f.behind--; f.behind == 0 {
		clear(f.events)
		f.events, f.first = f.events[:0], f.next
	}
}

// appendLocked adds ev to f; it reports whether a watcher waits for it.
func (f *feed) appendLocked(ev *bfspb.DirLockEvent, buffer int) (wake bool) {
	if len(f.events) == buffer {
		f.events[0] = nil
		f.events = f.events[1:]
		f.first++
	}
	f.events = append(f.events, ev)
	f.next++
	f.behind = f.watchers
	wake, f.taken = f.taken, false
	return wake
}

// publish delivers events to the feeds they concern and wakes the
// waiters. It never blocks and never walks the watchers (see watchers).
func (w *watchers) publish(events ...*bfspb.DirLockEvent) {
	if len(events) == 0 {
		return
	}
	var (
		wake  []*feed
		paths []chan struct{}
	)
	w.mu.Lock()
	add := func(f *feed, ev *bfspb.DirLockEvent) {
		if f != nil && f.appendLocked(ev, w.buffer) {
			wake = append(wake, f)
		}
	}
	for _, ev := range events {
		if pw := w.mu.atPath[ev.Lock.Path]; pw != nil {
			paths = append(paths, pw.ready)
			pw.ready = make(chan struct{})
		}
		if ev.Lock.Status != bfspb.LockStatus_LOCK_STATUS_LOCKED {
			add(w.mu.bySession[ev.Lock.SessionId], ev)
		}
		if len(w.mu.byPrefix) > 0 {
			for p := ev.Lock.Path; ; p = fspath.Dir(p) {
				add(w.mu.byPrefix[p], ev)
				if p == fspath.Root {
					break
				}
			}
		}
		for s := range w.mu.sinks {
			w.deliverLocked(s, ev)
		}
	}
	// A feed's watchers wake on their own channel: replace it, close the
	// old one once the lock is let go.
	ready := make([]chan struct{}, len(wake))
	for i, f := range wake {
		ready[i], f.ready = f.ready, make(chan struct{})
	}
	w.mu.Unlock()
	for _, c := range ready {
		close(c)
	}
	for _, c := range paths {
		close(c)
	}
}

// subscribeSink registers the status page's sink of the transitions
// under prefix.
func (w *watchers) subscribeSink(prefix string) *sink {
	s := &sink{prefix: prefix, events: make(chan *bfspb.DirLockEvent, w.buffer), lagged: make(chan struct{})}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.sinks[s] = struct{}{}
	return s
}

func (w *watchers) unsubscribeSink(s *sink) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.mu.sinks, s)
}

func (w *watchers) deliverLocked(s *sink, ev *bfspb.DirLockEvent) {
	if !fspath.Within(ev.Lock.Path, s.prefix) {
		return
	}
	select {
	case s.events <- ev:
	default:
		close(s.lagged)
		delete(w.mu.sinks, s)
	}
}
