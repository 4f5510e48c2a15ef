package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/e2e/tablet"
	"github.com/bfs-go/bfs/sdk"
)

// syncWriter appends to a file and syncs after every append until
// stopped, recording what was synced.
type syncWriter struct {
	w     *sdk.Writer
	path  string
	stopc chan struct{}
	done  chan struct{}
	mu    struct {
		sync.Mutex
		synced  int64
		err     error
		changed chan struct{}
	}
}

func startSyncWriter(t *testing.T, c *sdk.Client, path string) *syncWriter {
	t.Helper()
	w, err := c.Create(ctxT(t, time.Minute), path)
	require.NoError(t, err)
	sw := &syncWriter{w: w, path: path, stopc: make(chan struct{}), done: make(chan struct{})}
	sw.mu.changed = make(chan struct{})
	go sw.run()
	return sw
}

const appendSize = 16 << 10

func (sw *syncWriter) run() {
	defer close(sw.done)
	var off int64
	for {
		select {
		case <-sw.stopc:
			return
		default:
		}
		_, err := sw.w.Write(tablet.Pattern(sw.path, off, appendSize))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err = sw.w.Sync(ctx)
			cancel()
		}
		sw.mu.Lock()
		if err != nil {
			sw.mu.err = err
			sw.mu.Unlock()
			return
		}
		off += appendSize
		sw.mu.synced = off
		close(sw.mu.changed)
		sw.mu.changed = make(chan struct{})
		sw.mu.Unlock()
	}
}

// waitSynced waits until more than n bytes are synced, and returns how
// many are.
func (sw *syncWriter) waitSynced(t *testing.T, n int64) int64 {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		sw.mu.Lock()
		synced, err, changed := sw.mu.synced, sw.mu.err, sw.mu.changed
		sw.mu.Unlock()
		require.NoError(t, err, "the writer of %s failed", sw.path)
		if synced > n {
			return synced
		}
		select {
		case <-changed:
		case <-sw.done:
		case <-deadline.C:
			t.Fatalf("the writer of %s synced nothing past %d bytes in a minute", sw.path, n)
		}
	}
}

// finish stops the writer and closes its file; it returns the bytes
// synced.
func (sw *syncWriter) finish(t *testing.T) int64 {
	t.Helper()
	close(sw.stopc)
	<-sw.done
	sw.mu.Lock()
	synced, err := sw.mu.synced, sw.mu.err
	sw.mu.Unlock()
	require.NoError(t, err, "the writer of %s failed", sw.path)
	require.NoError(t, sw.w.Close())
	return synced
}

// TestGroupHolderKeepsLockThroughFailovers: a lock holder (a session of
// 10s TTL) keeps its lock and its session across 10 failovers in a row
// ($BFS_HA_TRIALS caps them), each a kill -9 of the leader and its
// restart: Done never fires, and every failover it still mutates inside
// its lock. Its writer appends and syncs a file in the locked directory
// throughout: the writes go on after each failover, and the file closes
// with every byte it wrote.
func TestGroupHolderKeepsLockThroughFailovers(t *testing.T) {
	g := startGroup(t, 3)
	n := trials(t, 10)
	holder := g.client(sdk.WithHolder("tablet"), sdk.WithSessionTTL(10*time.Second))
	require.NoError(t, holder.MkdirAll(ctxT(t, time.Minute), "/hold/t1", 0))
	l, err := holder.LockDir(ctxT(t, time.Minute), "/hold/t1")
	require.NoError(t, err)
	sw := startSyncWriter(t, holder, "/hold/t1/log")
	synced := sw.waitSynced(t, 0)
	var worst time.Duration
	for i := range n {
		old := g.waitLeader(-1)
		killed := time.Now()
		g.kill(old)
		next := g.waitLeader(old)
		// The holder mutates inside its lock through the new leader.
		require.NoError(t, holder.Mkdir(ctxT(t, time.Minute), fmt.Sprintf("/hold/t1/after-%d", i), 0))
		took := time.Since(killed)
		worst = max(worst, took)
		now := sw.waitSynced(t, synced)
		t.Logf("failover %d: killed %s, %s leads; the holder's mkdir acknowledged %v after the kill; %d bytes synced (%d after the failover before)",
			i, g.names[old], g.names[next], took.Round(time.Millisecond), now, synced)
		synced = now
		select {
		case <-l.Done():
			t.Fatalf("failover %d cost the holder its lock: %v", i, l.Err())
		default:
		}
		g.restart(old)
		g.waitFollowing(old)
	}
	total := sw.finish(t)
	select {
	case <-l.Done():
		t.Fatalf("the lock ended: %v", l.Err())
	default:
	}
	d, err := holder.GetDirLock(ctxT(t, time.Minute), "/hold/t1")
	require.NoError(t, err)
	require.Equal(t, sdk.Locked, d.Status)
	require.Equal(t, l.Epoch(), d.Epoch)
	require.Equal(t, l.SessionID(), d.SessionID, "the holder's session changed")
	data := readFile(t, holder, "/hold/t1/log")
	requireBytes(t, tablet.Pattern("/hold/t1/log", 0, int(total)), data, "/hold/t1/log after %d failovers", n)
	names := listNames(t, holder, "/hold/t1")
	require.Len(t, names, n+1, "the holder's mkdirs: %v", names)
	t.Logf("%d failovers: the lock (epoch %d) and session %s held throughout, Done never fired; %d bytes written and synced across them, all read back; slowest failover %v",
		n, l.Epoch(), l.SessionID(), total, worst.Round(time.Millisecond))
	require.NoError(t, l.Unlock(ctxT(t, time.Minute)))
}
