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
type watchers struct {
	mu struct {
		sync.Mutex
		subs map[*watcher]struct{}
		// changed is closed (and replaced) at every transition.
		changed chan struct{}
	}
}

type watcher struct {
	prefix string
	events chan *bfspb.DirLockEvent
	// lagged is closed when the watcher fell too far behind.
	lagged chan struct{}
}

func newWatchers() *watchers {
	w := &watchers{}
	w.mu.subs = make(map[*watcher]struct{})
	w.mu.changed = make(chan struct{})
	return w
}

// changes returns a channel closed at the next transition.
func (w *watchers) changes() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.changed
}

func (w *watchers) subscribe(prefix string) *watcher {
	sub := &watcher{prefix: prefix, events: make(chan *bfspb.DirLockEvent, watchBuffer), lagged: make(chan struct{})}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.subs[sub] = struct{}{}
	return sub
}

func (w *watchers) unsubscribe(sub *watcher) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.mu.subs, sub)
}

// publish delivers events to every watcher whose prefix covers them and
// wakes the waiters. It never blocks: a watcher whose buffer is full is
// cut off.
func (w *watchers) publish(events ...*bfspb.DirLockEvent) {
	if len(events) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for sub := range w.mu.subs {
		w.deliverLocked(sub, events)
	}
	close(w.mu.changed)
	w.mu.changed = make(chan struct{})
}

func (w *watchers) deliverLocked(sub *watcher, events []*bfspb.DirLockEvent) {
	for _, ev := range events {
		if !fspath.Within(ev.Lock.Path, sub.prefix) {
			continue
		}
		select {
		case sub.events <- ev:
		default:
			close(sub.lagged)
			delete(w.mu.subs, sub)
			return
		}
	}
}
