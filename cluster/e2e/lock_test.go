package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/e2e/tablet"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// TestDeadHolderReleasesLock: tablet server A (a process) locks a
// directory under a session with a 1s TTL, writes and syncs a file in it,
// and is killed with SIGKILL. Nobody unlocks: the nameserver expires A's
// session, cleans the directory (seals the file) and B, waiting in
// LockDir, gets the lock within the TTL and a few seconds, and finds every
// byte A synced.
func TestDeadHolderReleasesLock(t *testing.T) {
	c := startCluster(t, 3)
	const ttl = time.Second
	a := startTablet(t, c, "tablet-a", "--holder", "tablet-a", "--tablet", "/tera/t2", "--mode", "hold",
		"--ttl", ttl.String(), "--initial", "200000")
	evs := a.waitEvents(60*time.Second, "ready", func(evs []tablet.Event) bool { return len(kindOf(evs, tablet.KindReady)) > 0 })
	epoch := lockEpochs(evs)["/tera/t2"]
	synced := syncedBytes(evs)["/tera/t2/log"]
	require.Positive(t, synced)

	b := c.client(sdk.WithHolder("tablet-b"))
	// B waits for the lock (from before A dies, as a rule).
	type result struct {
		l   *sdk.Lock
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	lockCtx := ctxT(t, 60*time.Second)
	go func() {
		l, err := b.LockDir(lockCtx, "/tera/t2", sdk.WaitForLock())
		got <- result{l, err, time.Now()}
	}()

	a.kill()
	killedAt := time.Now()
	var res result
	select {
	case res = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("B did not get the lock within 30s of A's death")
	}
	require.NoError(t, res.err)
	took := res.at.Sub(killedAt)
	t.Logf("B got /tera/t2 at epoch %d (A had %d), %v after A was killed (session TTL %v)", res.l.Epoch(), epoch, took, ttl)
	require.Less(t, took, ttl+5*time.Second, "B waited too long for a dead holder's lock")
	require.Greater(t, res.l.Epoch(), epoch)

	fi, err := b.Stat(ctxT(t, 10*time.Second), "/tera/t2/log")
	require.NoError(t, err)
	require.Empty(t, fi.WriterSession, "A's file is still open")
	require.GreaterOrEqual(t, fi.Size, synced)
	data := readFile(t, b, "/tera/t2/log")
	requireBytes(t, tablet.Pattern("/tera/t2/log", 0, len(data)), data, "A's /tera/t2/log read by B")
	hist, err := b.LockHistory(ctxT(t, 10*time.Second), "/tera/t2")
	require.NoError(t, err)
	require.NotEmpty(t, hist)
	h := hist[len(hist)-1]
	require.Equal(t, epoch, h.Epoch)
	require.Equal(t, "expiry", h.Reason)
	require.EqualValues(t, 1, h.FilesSealed)
}

// TestNameServerKill9WhileCleaning kills the nameserver with SIGKILL while
// a directory is CLEANING and cannot finish: tablet server A holds
// /tera/t3 and /tera/t3/lg0 with a file open in each, every chunkserver is
// frozen (SIGSTOP) so no seal can be confirmed, and the master
// force-unlocks without waiting. The nameserver restarts on the same data
// and address, the chunkservers resume and register again, and the
// cleaning completes: both directories UNLOCKED, A's files closed with
// every synced byte, the replicas agreeing, the history recording the
// forced unlock, and a new lock gets a newer epoch (I2, I6, I7).
func TestNameServerKill9WhileCleaning(t *testing.T) {
	killNameServerWhileCleaning(t, startCluster(t, 3), 0)
}

// TestCleaningEndsWhenChunkserversReturnLate is the same story, except
// that the chunkservers stay frozen well past the restarted nameserver's
// dead-chunkserver timeout, and one comes back before the others. SPEC
// §6: "Cleaning always ends while at least one replica of each open block
// is reachable; a dead chunkserver delays it by at most the
// dead-chunkserver timeout, never forever" (I7): the seals wait for the
// dead chunkservers to register again, and go out as soon as one does;
// the cleaning ends with that one's replicas at the agreed length, and
// the others are brought to it when they come back.
func TestCleaningEndsWhenChunkserversReturnLate(t *testing.T) {
	killNameServerWhileCleaning(t, startCluster(t, 3, "--dead-timeout", "2s"), 9*time.Second)
}

// killNameServerWhileCleaning runs the story of
// TestNameServerKill9WhileCleaning on c, keeping the chunkservers frozen
// for outage after the nameserver restarted.
func killNameServerWhileCleaning(t *testing.T, c *cluster, outage time.Duration) {
	a := startTablet(t, c, "tablet-a", "--holder", "tablet-a", "--tablet", "/tera/t3", "--lg", "lg0",
		"--mode", "hold", "--ttl", "30s", "--initial", "300000")
	evs := a.waitEvents(60*time.Second, "ready", func(evs []tablet.Event) bool { return len(kindOf(evs, tablet.KindReady)) > 0 })
	epochs := lockEpochs(evs)
	synced := syncedBytes(evs)
	files := openedFiles(evs)
	require.Len(t, files, 2)

	for _, cs := range c.cs {
		cs.stop(t)
	}
	master := c.client(sdk.WithHolder("master"), sdk.WithCertsDir(certsDir, certs.AdminUser)) // forces unlocks
	d, err := master.UnlockDir(ctxT(t, 10*time.Second), "/tera/t3", sdk.Force(), sdk.AtEpoch(epochs["/tera/t3"]))
	require.NoError(t, err)
	require.Equal(t, sdk.Cleaning, d.Status, "the unlock could not seal anything, yet did not leave the directory CLEANING")
	l, err := master.GetDirLock(ctxT(t, 10*time.Second), "/tera/t3")
	require.NoError(t, err)
	require.Equal(t, sdk.Cleaning, l.Status)
	require.Equal(t, epochs["/tera/t3"], l.Epoch)

	c.killNameServer()
	c.restartNameServer()
	restartedAt := time.Now()
	unlocked := watchUnlocked(t, c.nsAddr, "/tera/t3")
	// The outage itself, not a wait for something: the chunkservers stay
	// away this long.
	time.Sleep(outage)
	// After an outage past the dead timeout, one chunkserver comes back
	// first: the cleaning must end with it alone (I7), and the others,
	// frozen, are left out of what is checked at UNLOCKED.
	back := c.cs
	if outage > 0 {
		back = c.cs[:1]
	}
	for _, cs := range back {
		cs.cont(t)
	}

	// The restarted nameserver finds /tera/t3 CLEANING and finishes it
	// once the chunkservers are back. The replicas are looked at as soon
	// as UNLOCKED is observed (I5): no time for late truncations.
	require.NoError(t, unlocked(60*time.Second), "/tera/t3 did not become UNLOCKED after the restart")
	seen := replicaStates(t, files, func(addr string) bool { return c.index(addr) < len(back) })
	t.Logf("cleaning of /tera/t3 completed %v after the nameserver restarted", time.Since(restartedAt))
	closed := map[string]int64{}
	for _, f := range files {
		fi, err := master.Stat(ctxT(t, 10*time.Second), f.Path)
		require.NoError(t, err)
		closed[f.Path] = fi.Size
	}
	requireAgreed(t, seen, closed)
	for _, cs := range c.cs[len(back):] {
		cs.cont(t)
	}
	l, err = master.GetDirLock(ctxT(t, 10*time.Second), "/tera/t3/lg0")
	require.NoError(t, err)
	require.Equal(t, sdk.Unlocked, l.Status, "/tera/t3/lg0")

	for _, f := range files {
		fi, err := master.Stat(ctxT(t, 10*time.Second), f.Path)
		require.NoError(t, err)
		require.Empty(t, fi.WriterSession, "%s still open after UNLOCKED", f.Path)
		require.GreaterOrEqual(t, fi.Size, synced[f.Path], "%s lost synced bytes", f.Path)
		data := readFile(t, master, f.Path)
		requireBytes(t, tablet.Pattern(f.Path, 0, len(data)), data, "%s (what A wrote)", f.Path)
		// The chunkservers that came back after the cleaning gave up on
		// them have their replicas brought to the agreed length by their
		// reports.
		for _, addr := range f.Replicas {
			if c.index(addr) < len(back) {
				continue
			}
			waitFor(t, 30*time.Second, "replica of "+f.Path+" on "+addr+", back late, to agree", func() bool {
				r := readReplica(t, c.nsAddr, f.Path, addr, f.Block)
				return r.sealed && r.size == fi.Size
			})
		}
	}
	hist, err := master.LockHistory(ctxT(t, 10*time.Second), "/tera/t3")
	require.NoError(t, err)
	require.NotEmpty(t, hist)
	h := hist[len(hist)-1]
	require.Equal(t, epochs["/tera/t3"], h.Epoch)
	require.Equal(t, "force", h.Reason)
	require.EqualValues(t, len(files), h.FilesSealed)
	t.Logf("lock history of /tera/t3: epoch %d, reason %s, %d files sealed, %d bytes truncated",
		h.Epoch, h.Reason, h.FilesSealed, h.BytesTruncated)

	b := c.client(sdk.WithHolder("tablet-b"))
	lb, err := b.LockDir(ctxT(t, 10*time.Second), "/tera/t3")
	require.NoError(t, err)
	require.Greater(t, lb.Epoch(), max(epochs["/tera/t3"], epochs["/tera/t3/lg0"]), "epochs went back after the restart")
}

// watchUnlocked watches the locks under dir on the nameserver at addr,
// from now on, and returns a wait for dir's UNLOCKED event: it returns as
// soon as the event arrives, or an error at the deadline.
func watchUnlocked(t *testing.T, addr, dir string) func(time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := dialNameServer(t, addr).WatchDirLocks(ctx, &bfspb.WatchDirLocksRequest{Prefix: dir})
	require.NoError(t, err)
	_, err = stream.Header() // registered: no later transition is missed
	require.NoError(t, err)
	return func(d time.Duration) error {
		timer := time.AfterFunc(d, cancel)
		defer timer.Stop()
		for {
			ev, err := stream.Recv()
			if err != nil {
				return fmt.Errorf("watching %s: %w", dir, err)
			}
			if ev.Lock.GetPath() == dir && ev.Lock.GetStatus() == bfspb.LockStatus_LOCK_STATUS_UNLOCKED {
				return nil
			}
		}
	}
}

// replicaStates asks every replica of files (on the chunkservers only
// accepts, if not nil) what it holds: one GetBlockInfo each and no
// waiting, so that it sees the replicas as they are when it is called.
// The replicas are keyed by path.
func replicaStates(t *testing.T, files []tablet.Event, only func(addr string) bool) map[string][]replica {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	out := map[string][]replica{}
	for _, f := range files {
		for _, addr := range f.Replicas {
			if only != nil && !only(addr) {
				continue
			}
			info, err := dialChunkserver(t, addr).GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: f.Block})
			require.NoError(t, err, "block %d on %s", f.Block, addr)
			require.Equal(t, bfspb.StatusCode_OK, info.Status, "block %d on %s: %s", f.Block, addr, info.Message)
			out[f.Path] = append(out[f.Path], replica{addr: addr, size: info.Size, sealed: info.Sealed})
		}
	}
	return out
}

// requireAgreed checks that every replica replicaStates saw was sealed at
// its file's closed length (I5).
func requireAgreed(t *testing.T, seen map[string][]replica, closed map[string]int64) {
	t.Helper()
	for path, reps := range seen {
		for _, r := range reps {
			require.True(t, r.sealed && r.size == closed[path],
				"when UNLOCKED was observed, the replica of %s on %s held %d bytes (sealed: %v); the file was closed at %d",
				path, r.addr, r.size, r.sealed, closed[path])
		}
	}
}
