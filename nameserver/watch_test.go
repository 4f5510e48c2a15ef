package nameserver

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/proto/bfspb"
)

func event(path, session string, st bfspb.LockStatus) *bfspb.DirLockEvent {
	return &bfspb.DirLockEvent{Lock: &bfspb.DirLock{Path: path, SessionId: session, Status: st}}
}

func subscribe(t *testing.T, w *watchers, prefix, session, identity string) *watcher {
	t.Helper()
	sub, err := w.subscribe(prefix, session, identity)
	require.NoError(t, err)
	return sub
}

// drain returns the transitions sub has not read, as the stream handler
// filters them; it fails the test if sub was cut off.
func drain(t *testing.T, w *watchers, sub *watcher) []string {
	t.Helper()
	var out []string
	for {
		evs, ready, lagged := w.next(sub, nil)
		require.False(t, lagged, "cut off")
		for _, ev := range evs {
			if sub.session == "" || fspath.Within(ev.Lock.Path, sub.prefix) {
				out = append(out, ev.Lock.Path+" "+ev.Lock.SessionId+" "+ev.Lock.Status.String())
			}
		}
		if ready != nil {
			return out
		}
	}
}

func TestWatchersDeliverToWhomItConcerns(t *testing.T) {
	w := newWatchers(16, 8, 8, 100)
	all := subscribe(t, w, "/", "", "client/a")
	underA := subscribe(t, w, "/a", "", "client/a")
	s1 := subscribe(t, w, "/", "s1", "client/a")
	s1b := subscribe(t, w, "/b", "s1", "client/a")
	s2 := subscribe(t, w, "/", "s2", "client/b")
	changed, done := w.waitAt("/a/x")
	other, otherDone := w.waitAt("/a")

	w.publish(event("/a/x", "s1", bfspb.LockStatus_LOCK_STATUS_LOCKED))
	require.Equal(t, []string{"/a/x s1 LOCK_STATUS_LOCKED"}, drain(t, w, all))
	require.Equal(t, []string{"/a/x s1 LOCK_STATUS_LOCKED"}, drain(t, w, underA))
	require.Empty(t, drain(t, w, s1), "a session watch gets only the ends of its locks")
	require.Empty(t, drain(t, w, s2))
	select {
	case <-changed:
	default:
		t.Fatal("a call waiting on the path was not woken")
	}
	select {
	case <-other:
		t.Fatal("a call waiting on another path was woken")
	default:
	}

	w.publish(event("/a/x", "s1", bfspb.LockStatus_LOCK_STATUS_CLEANING), event("/b", "s1", bfspb.LockStatus_LOCK_STATUS_UNLOCKED))
	require.Equal(t, []string{"/a/x s1 LOCK_STATUS_CLEANING", "/b s1 LOCK_STATUS_UNLOCKED"}, drain(t, w, all))
	require.Equal(t, []string{"/a/x s1 LOCK_STATUS_CLEANING"}, drain(t, w, underA))
	require.Equal(t, []string{"/a/x s1 LOCK_STATUS_CLEANING", "/b s1 LOCK_STATUS_UNLOCKED"}, drain(t, w, s1))
	require.Equal(t, []string{"/b s1 LOCK_STATUS_UNLOCKED"}, drain(t, w, s1b), "a session's watch of a prefix")
	require.Empty(t, drain(t, w, s2), "another session's ends are not for s2")

	w.unsubscribe(s1)
	w.unsubscribe(s1b)
	w.publish(event("/b", "s1", bfspb.LockStatus_LOCK_STATUS_UNLOCKED))
	require.NotContains(t, w.mu.bySession, "s1", "the session's feed goes with its last watcher")
	require.Equal(t, 3, w.streams())
	done()
	require.Contains(t, w.mu.atPath, "/a", "a path waited on")
	otherDone()
	require.Empty(t, w.mu.atPath, "a path no call waits on any more")
}

// TestWatcherWakesOnlyWhenItsFeedMoves: a watcher that has read
// everything waits on a channel that only a transition it sees closes.
func TestWatcherWakesOnlyWhenItsFeedMoves(t *testing.T) {
	w := newWatchers(16, 8, 8, 100)
	underA := subscribe(t, w, "/a", "", "client/a")
	_, ready, _ := w.next(underA, nil)
	w.publish(event("/b/x", "s1", bfspb.LockStatus_LOCK_STATUS_LOCKED))
	select {
	case <-ready:
		t.Fatal("woken by a transition outside its prefix")
	default:
	}
	w.publish(event("/a/b/c", "s1", bfspb.LockStatus_LOCK_STATUS_LOCKED))
	select {
	case <-ready:
	default:
		t.Fatal("not woken by a transition under its prefix")
	}
	require.Equal(t, []string{"/a/b/c s1 LOCK_STATUS_LOCKED"}, drain(t, w, underA))
}

// TestWatcherThatLagsIsCutOff: a feed keeps buffer transitions for its
// slowest watcher, and none once every watcher has read them; a watcher
// further behind is cut off when it reads, the others are not.
func TestWatcherThatLagsIsCutOff(t *testing.T) {
	const buffer = 4
	w := newWatchers(buffer, 8, 8, 100)
	slow := subscribe(t, w, "/", "", "client/a")
	other := subscribe(t, w, "/", "", "client/b")
	for range buffer {
		w.publish(event("/d", "s1", bfspb.LockStatus_LOCK_STATUS_UNLOCKED))
	}
	require.Len(t, drain(t, w, other), buffer)
	require.Len(t, w.mu.byPrefix["/"].events, buffer, "kept for the slow watcher")
	w.publish(event("/d", "s1", bfspb.LockStatus_LOCK_STATUS_UNLOCKED))
	require.Len(t, w.mu.byPrefix["/"].events, buffer, "never more than the buffer")
	_, _, lagged := w.next(slow, nil)
	require.True(t, lagged, "the slow watcher was not cut off")
	require.Len(t, drain(t, w, other), 1, "the others still get the transition")
	w.unsubscribe(slow)
	require.Empty(t, w.mu.byPrefix["/"].events, "nothing kept once every watcher read it")

	// A watcher that reads within the buffer is never cut off, however
	// many transitions pass.
	for range 10 * buffer {
		w.publish(event("/d", "s1", bfspb.LockStatus_LOCK_STATUS_UNLOCKED))
		require.Len(t, drain(t, w, other), 1)
	}
}

// TestWatchLimits: an identity has at most perIdentity watches of a
// prefix, all identities at most total, a session at most perSession
// watches, whoever opens them; a stream that ends gives its place back.
func TestWatchLimits(t *testing.T) {
	w := newWatchers(16, 2, 1, 4)
	a1 := subscribe(t, w, "/", "", "client/a")
	subscribe(t, w, "/x", "", "client/a")
	_, err := w.subscribe("/y", "", "client/a")
	var le *watchLimitError
	require.ErrorAs(t, err, &le)
	require.True(t, errors.Is(err, errWatchLimit))
	require.Empty(t, le.session)
	subscribe(t, w, "/", "", "client/b")
	subscribe(t, w, "/", "s1", "client/a") // a session's watch counts against the session
	_, err = w.subscribe("/", "s1", "admin/ops")
	require.ErrorAs(t, err, &le)
	require.Equal(t, "s1", le.session)
	w.unsubscribe(a1)
	subscribe(t, w, "/y", "", "client/a")
	require.Equal(t, 4, w.streams())
	subscribe(t, w, "/", "", "client/c")
	_, err = w.subscribe("/", "", "client/d")
	require.ErrorAs(t, err, &le)
	require.True(t, le.total, "four watches of a prefix in all")
	subscribe(t, w, "/", "s2", "client/d") // a session's watch is not one
}
