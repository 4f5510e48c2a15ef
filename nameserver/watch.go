package nameserver

import (
	"sync"

	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// watchBuffer is how many events a watcher may lag behind before it is cut
// off (it must list again and watch anew).
const watchBuffer = 4096

// watchers fans lock transitions out to WatchDirLocks streams, and wakes
// calls waiting for a lock to change (LockDir and UnlockDir with wait).
//
// Watchers of a session (the SDK's, one per client session) are indexed
// by session id and receive only the ends of that session's locks, so a
// transition costs a map lookup for them however many sessions watch;
// prefix watchers (operators, masters) are few and each is looked at.
type watchers struct {
	mu struct {
		sync.Mutex
		bySession map[string]map[*watcher]struct{}
		byPrefix  map[*watcher]struct{}
		// changed is closed (and replaced) at the next transition after
		// someone took it with changes.
		changed chan struct{}
		taken   bool
	}
}

type watcher struct {
	prefix  string
	session string
	events  chan *bfspb.DirLockEvent
	// lagged is closed when the watcher fell too far behind.
	lagged chan struct{}
}

func newWatchers() *watchers {
	w := &watchers{}
	w.mu.bySession = make(map[string]map[*watcher]struct{})
	w.mu.byPrefix = make(map[*watcher]struct{})
	w.mu.changed = make(chan struct{})
	return w
}

// changes returns a channel closed at the next transition.
func (w *watchers) changes() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.taken = true
	return w.mu.changed
}

// subscribe registers a watcher of the transitions under prefix; with a
// session, only of the ends of that session's locks.
func (w *watchers) subscribe(prefix, session string) *watcher {
	sub := &watcher{prefix: prefix, session: session,
		events: make(chan *bfspb.DirLockEvent, watchBuffer), lagged: make(chan struct{})}
	w.mu.Lock()
	defer w.mu.Unlock()
	if session == "" {
		w.mu.byPrefix[sub] = struct{}{}
		return sub
	}
	subs := w.mu.bySession[session]
	if subs == nil {
		subs = make(map[*watcher]struct{}, 1)
		w.mu.bySession[session] = subs
	}
	subs[sub] = struct{}{}
	return sub
}

func (w *watchers) unsubscribe(sub *watcher) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removeLocked(sub)
}

func (w *watchers) removeLocked(sub *watcher) {
	if sub.session == "" {
		delete(w.mu.byPrefix, sub)
		return
	}
	subs := w.mu.bySession[sub.session]
	delete(subs, sub)
	if len(subs) == 0 {
		delete(w.mu.bySession, sub.session)
	}
}

// publish delivers events to the watchers they concern and wakes the
// waiters. It never blocks: a watcher whose buffer is full is cut off.
func (w *watchers) publish(events ...*bfspb.DirLockEvent) {
	if len(events) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range events {
		if ev.Lock.Status != bfspb.LockStatus_LOCK_STATUS_LOCKED {
			for sub := range w.mu.bySession[ev.Lock.SessionId] {
				w.deliverLocked(sub, ev)
			}
		}
		for sub := range w.mu.byPrefix {
			w.deliverLocked(sub, ev)
		}
	}
	if w.mu.taken {
		close(w.mu.changed)
		w.mu.changed = make(chan struct{})
		w.mu.taken = false
	}
}

func (w *watchers) deliverLocked(sub *watcher, ev *bfspb.DirLockEvent) {
	if !fspath.Within(ev.Lock.Path, sub.prefix) {
		return
	}
	select {
	case sub.events <- ev:
	default:
		close(sub.lagged)
		w.removeLocked(sub)
	}
}
