package nameserver

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
)

func event(path, session string, st bfspb.LockStatus) *bfspb.DirLockEvent {
	return &bfspb.DirLockEvent{Lock: &bfspb.DirLock{Path: path, SessionId: session, Status: st}}
}

// drain returns the events queued for sub.
func drain(sub *watcher) []string {
	var out []string
	for {
		select {
		case ev := <-sub.events:
			out = append(out, ev.Lock.Path+" "+ev.Lock.SessionId+" "+ev.Lock.Status.String())
		default:
			return out
		}
	}
}

func TestWatchersDeliverToWhomItConcerns(t *testing.T) {
	w := newWatchers()
	all := w.subscribe("/", "")
	underA := w.subscribe("/a", "")
	s1 := w.subscribe("/", "s1")
	s2 := w.subscribe("/", "s2")
	changed := w.changes()

	w.publish(event("/a/x", "s1", bfspb.LockStatus_LOCK_STATUS_LOCKED))
	require.Equal(t, []string{"/a/x s1 LOCK_STATUS_LOCKED"}, drain(all))
	require.Equal(t, []string{"/a/x s1 LOCK_STATUS_LOCKED"}, drain(underA))
	require.Empty(t, drain(s1), "a session watch gets only the ends of its locks")
	require.Empty(t, drain(s2))
	select {
	case <-changed:
	default:
		t.Fatal("a waiter was not woken")
	}

	w.publish(event("/a/x", "s1", bfspb.LockStatus_LOCK_STATUS_CLEANING), event("/b", "s1", bfspb.LockStatus_LOCK_STATUS_UNLOCKED))
	require.Equal(t, []string{"/a/x s1 LOCK_STATUS_CLEANING", "/b s1 LOCK_STATUS_UNLOCKED"}, drain(all))
	require.Equal(t, []string{"/a/x s1 LOCK_STATUS_CLEANING"}, drain(underA))
	require.Equal(t, []string{"/a/x s1 LOCK_STATUS_CLEANING", "/b s1 LOCK_STATUS_UNLOCKED"}, drain(s1))
	require.Empty(t, drain(s2), "another session's ends are not for s2")

	w.unsubscribe(s1)
	w.publish(event("/b", "s1", bfspb.LockStatus_LOCK_STATUS_UNLOCKED))
	require.Empty(t, drain(s1))
	require.Empty(t, w.mu.bySession["s1"], "the session's index entry goes with its last watcher")
}

func TestWatcherThatLagsIsCutOff(t *testing.T) {
	w := newWatchers()
	slow := w.subscribe("/", "s1")
	other := w.subscribe("/", "s1")
	for range watchBuffer {
		w.publish(event("/d", "s1", bfspb.LockStatus_LOCK_STATUS_UNLOCKED))
	}
	drain(other)
	w.publish(event("/d", "s1", bfspb.LockStatus_LOCK_STATUS_UNLOCKED))
	select {
	case <-slow.lagged:
	default:
		t.Fatal("the full watcher was not cut off")
	}
	require.Len(t, drain(other), 1, "the others still get the event")
	require.NotContains(t, w.mu.bySession["s1"], slow)
}
