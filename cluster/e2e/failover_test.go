package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/e2e/tablet"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/sdk"
)

// TestFailoverFencesFrozenTabletServer is the failover the lock exists for
// (SPEC §1, §6), with real processes. Tablet server A locks /tera/t1 and
// /tera/t1/lg0 and keeps appending (write + sync) to a file in each. A is
// frozen with SIGSTOP, as a server that is partitioned or stalled. The
// master force-unlocks /tera/t1 and waits for UNLOCKED; tablet server B
// locks the tablet, reads A's files at their closed length (every byte A
// reported synced is there) and writes its own. A is resumed: it goes on
// appending, sends packets straight to the chunkservers of its blocks,
// creates, renames, deletes, locks. Every one of those attempts must be
// refused, A's lock handles must report the loss, and no chunkserver may
// hold a byte past the closed length (I3, I4, I5).
func TestFailoverFencesFrozenTabletServer(t *testing.T) {
	c := startCluster(t, 3)
	master := c.client(sdk.WithHolder("master"), sdk.WithCertsDir(certsDir, certs.AdminUser)) // forces unlocks
	b := c.client(sdk.WithHolder("tablet-b"))
	a := startTablet(t, c, "tablet-a", "--holder", "tablet-a", "--tablet", "/tera/t1", "--lg", "lg0",
		"--mode", "serve", "--ttl", "30s", "--initial", "100000", "--max-append", "48000", "--stale-rounds", "2")

	// A serves for a while.
	const appends = 8
	evs := a.waitEvents(60*time.Second, fmt.Sprintf("%d synced appends per file", appends), func(evs []tablet.Event) bool {
		opened := openedFiles(evs)
		n := appendsPerFile(evs)
		for _, f := range opened {
			if n[f.Path] < appends {
				return false
			}
		}
		return len(opened) == 2
	})
	epochs := lockEpochs(evs)
	files := openedFiles(evs)
	for _, e := range kindOf(evs, tablet.KindOp) {
		require.True(t, e.OK, "A's operation before the failover refused: %+v", e)
	}

	// A stops dead; the master declares it gone.
	a.stop(t)
	frozenAt := time.Now()
	start := time.Now()
	d, err := master.UnlockDir(ctxT(t, 30*time.Second), "/tera/t1", sdk.Force(), sdk.WaitUnlocked(), sdk.AtEpoch(epochs["/tera/t1"]))
	require.NoError(t, err)
	unlockTook := time.Since(start)
	require.Equal(t, sdk.Unlocked, d.Status)
	seen := replicaStates(t, files, nil) // as they are when UNLOCKED is observed
	t.Logf("forced unlock of /tera/t1 (A at epoch %d) returned UNLOCKED after %v", epochs["/tera/t1"], unlockTook)
	for _, dir := range []string{"/tera/t1", "/tera/t1/lg0"} {
		l, err := master.GetDirLock(ctxT(t, 10*time.Second), dir)
		require.NoError(t, err)
		require.Equal(t, sdk.Unlocked, l.Status, "%s after the unlock", dir)
	}

	// Every file A had open is closed; its length keeps every byte A was
	// told was synced (the reports that reached us before the freeze).
	closed := map[string]int64{}
	synced := syncedBytes(a.events())
	for _, f := range files {
		fi, err := master.Stat(ctxT(t, 10*time.Second), f.Path)
		require.NoError(t, err)
		require.Empty(t, fi.WriterSession, "%s still open after UNLOCKED", f.Path)
		require.GreaterOrEqual(t, fi.Size, synced[f.Path], "%s lost synced bytes", f.Path)
		closed[f.Path] = fi.Size
	}

	// B takes the tablet over, at newer epochs.
	lb, err := b.LockDir(ctxT(t, 10*time.Second), "/tera/t1")
	require.NoError(t, err)
	lbg, err := b.LockDir(ctxT(t, 10*time.Second), "/tera/t1/lg0")
	require.NoError(t, err)
	require.Greater(t, lb.Epoch(), max(epochs["/tera/t1"], epochs["/tera/t1/lg0"]))
	require.Greater(t, lbg.Epoch(), lb.Epoch())
	for _, f := range files {
		got := readFile(t, b, f.Path)
		require.Equal(t, closed[f.Path], int64(len(got)), "B reads %s at its closed length", f.Path)
		requireBytes(t, tablet.Pattern(f.Path, 0, len(got)), got, "B's read of %s (what A wrote)", f.Path)
	}
	// Every replica agreed with the closed length at the moment UNLOCKED
	// was observed (I5): the cleaning ends only after the truncations.
	requireAgreed(t, seen, closed)
	bFiles := map[string][]byte{
		"/tera/t1/b-log":       []byte(strings.Repeat("B's log record. ", 5000)),
		"/tera/t1/lg0/b-sst-0": []byte(strings.Repeat("B's sst. ", 7000)),
	}
	for p, data := range bFiles {
		writeFile(t, b, p, data)
	}

	// A comes back and carries on as if nothing happened.
	a.cont(t)
	a.wait(t, 90*time.Second)
	require.True(t, a.cmd.ProcessState.Success(), "A exited with %v", a.cmd.ProcessState)
	evs = a.events()
	require.NotEmpty(t, kindOf(evs, tablet.KindFinished), "A did not finish its run")
	lost := map[string]bool{}
	for _, e := range kindOf(evs, tablet.KindLockLost) {
		lost[e.Path] = true
		t.Logf("A noticed the loss of %s (epoch %d): %s", e.Path, e.Epoch, e.Err)
	}
	require.True(t, lost["/tera/t1"] && lost["/tera/t1/lg0"], "A's lock handles did not both report the loss: %v", lost)

	staleOps := countStaleOps(t, evs, frozenAt, closed)
	staleBytes := countStaleBytes(t, c.nsAddr, files, closed)

	// The namespace is as B left it.
	for _, f := range files {
		fi, err := b.Stat(ctxT(t, 10*time.Second), f.Path)
		require.NoError(t, err)
		require.Empty(t, fi.WriterSession)
		require.Equal(t, closed[f.Path], fi.Size, "%s changed length", f.Path)
	}
	require.Equal(t, []string{"b-log", "lg0", "log"}, listNames(t, b, "/tera/t1"))
	require.Equal(t, []string{"b-sst-0", "sst-0"}, listNames(t, b, "/tera/t1/lg0"))
	for p, data := range bFiles {
		requireBytes(t, data, readFile(t, b, p), "B's file %s", p)
	}
	l, err := b.GetDirLock(ctxT(t, 10*time.Second), "/tera/t1")
	require.NoError(t, err)
	require.Equal(t, sdk.Locked, l.Status)
	require.Equal(t, lb.Epoch(), l.Epoch)
	require.Equal(t, "tablet-b", l.Holder)
	hist, err := b.LockHistory(ctxT(t, 10*time.Second), "/tera/t1")
	require.NoError(t, err)
	require.NotEmpty(t, hist)
	h := hist[len(hist)-1]
	require.Equal(t, epochs["/tera/t1"], h.Epoch)
	require.Equal(t, "force", h.Reason)
	t.Logf("lock history of /tera/t1: epoch %d, holder %s, reason %s, %d files sealed, %d bytes truncated",
		h.Epoch, h.Holder, h.Reason, h.FilesSealed, h.BytesTruncated)
	require.EqualValues(t, len(files), h.FilesSealed)

	t.Logf("stale operations accepted: %d, stale bytes accepted: %d", staleOps, staleBytes)
	require.Zero(t, staleOps, "stale operations accepted")
	require.Zero(t, staleBytes, "stale bytes accepted")
}

// countStaleOps counts A's operations the file system accepted although
// they came after the unlock: those that started once A was frozen (it
// was resumed only after the unlock), and any append whose synced length
// is past the closed one (it was accepted after the close). Every kind of
// operation must have been tried; each raw packet must have been refused
// because its block is sealed.
func countStaleOps(t *testing.T, evs []tablet.Event, frozenAt time.Time, closed map[string]int64) int {
	t.Helper()
	stale := 0
	tried := map[string]int{}
	refusals := map[string]int{}
	for _, e := range kindOf(evs, tablet.KindOp) {
		after := e.StartNs > frozenAt.UnixNano()
		if e.Op == tablet.OpAppend && e.OK && e.Synced > closed[e.Path] {
			t.Errorf("A's append to %s was accepted up to %d, past the closed length %d", e.Path, e.Synced, closed[e.Path])
			stale++
			continue
		}
		if !after {
			if e.EndNs > frozenAt.UnixNano() {
				t.Logf("A's %s of %s was in flight at the freeze: ok=%v %s", e.Op, e.Path, e.OK, e.Err)
			}
			continue
		}
		tried[e.Op]++
		refusals[e.Op+": "+e.Refusal]++
		if e.OK {
			t.Errorf("stale %s of %s accepted: %+v", e.Op, e.Path, e)
			stale++
		}
		if e.Op == tablet.OpRawWrite && !e.OK && e.Refusal != "SEALED" {
			t.Errorf("raw packet to %s on %s refused, but not as sealed: %s", e.Path, e.Replica, e.Err)
		}
	}
	for _, op := range []string{tablet.OpAppend, tablet.OpRawWrite, tablet.OpCreate, tablet.OpMkdir,
		tablet.OpRename, tablet.OpDelete, tablet.OpRmdir, tablet.OpLock} {
		if tried[op] == 0 {
			t.Errorf("A never tried a %s after the unlock", op)
		}
	}
	keys := make([]string, 0, len(refusals))
	for k := range refusals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("A's attempts after the unlock, %s: %d", k, refusals[k])
	}
	return stale
}

// countStaleBytes compares every replica of A's files with the closed
// length and with what A wrote: bytes past the closed length, and bytes
// within it that differ, were accepted after the unlock.
func countStaleBytes(t *testing.T, nsAddr string, files []tablet.Event, closed map[string]int64) int64 {
	t.Helper()
	var stale int64
	for _, f := range files {
		want := tablet.Pattern(f.Path, 0, int(closed[f.Path]))
		for _, addr := range f.Replicas {
			r := readReplica(t, nsAddr, f.Path, addr, f.Block)
			if !r.sealed {
				t.Errorf("replica of %s on %s is not sealed", f.Path, addr)
			}
			if r.size > closed[f.Path] {
				stale += r.size - closed[f.Path]
			}
			for i := range min(len(r.data), len(want)) {
				if r.data[i] != want[i] {
					stale++
				}
			}
			if r.size < closed[f.Path] {
				t.Errorf("replica of %s on %s has %d bytes, fewer than the closed %d", f.Path, addr, r.size, closed[f.Path])
			}
		}
	}
	return stale
}

func writeFile(t *testing.T, c *sdk.Client, path string, data []byte) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	w, err := c.Create(ctx, path)
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))
	require.NoError(t, w.CloseContext(ctx))
}

func listNames(t *testing.T, c *sdk.Client, dir string) []string {
	t.Helper()
	entries, err := c.List(ctxT(t, 10*time.Second), dir)
	require.NoError(t, err)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name)
	}
	sort.Strings(names)
	return names
}
