package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/e2e/tablet"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// cleaningPhases are the points of a cleaning at which
// TestGroupCleaningSurvivesLeaderKills kills the leader: the points of
// bfs nameserver's hidden --testing-pause-file (tools/bfs/bfscmd).
var cleaningPhases = []struct{ point, what string }{
	{"seal 0", "CLEANING committed, no seal sent"},
	{"seal 1", "one replica of each file sealed of three"},
	{"close", "every replica reported sealed, the file's close not committed"},
	{"unlock", "the file closed at the agreed length, UNLOCKED not committed"},
}

// TestGroupCleaningSurvivesLeaderKills kills the leader with SIGKILL in
// each phase of a cleaning. Tablet server A (a process) holds a tablet
// and a locality group below it and appends to a file in each; it is
// frozen (SIGSTOP) and the master
// force-unlocks the tablet; the leader is held at the phase's point
// (bfs nameserver --testing-pause-file) and killed there. The new leader
// must finish the cleaning: when UNLOCKED is observed, the file is closed
// with every byte A synced and every replica is sealed at the closed
// length (I5, I7); the master locks the tablet anew, and A, resumed, gets
// no operation and no byte accepted (I3, I4, I8); the killed member
// rejoins.
func TestGroupCleaningSurvivesLeaderKills(t *testing.T) {
	pause := filepath.Join(t.TempDir(), "pause")
	g := startGroup(t, 3, withNameServerFlags("--testing-pause-file", pause))
	master := g.client(sdk.WithHolder("master"), sdk.WithCertsDir(certsDir, certs.AdminUser)) // forces unlocks
	for i, phase := range cleaningPhases {
		dir := fmt.Sprintf("/clean/t%d", i)
		a := startTablet(t, g, fmt.Sprintf("tablet-%d", i), "--holder", fmt.Sprintf("tablet-%d", i), "--tablet", dir,
			"--lg", "lg0", "--mode", "serve", "--ttl", "30s", "--initial", "100000", "--max-append", "48000", "--stale-rounds", "2")
		evs := a.waitEvents(60*time.Second, "4 synced appends per file", func(evs []tablet.Event) bool {
			opened, n := openedFiles(evs), appendsPerFile(evs)
			for _, f := range opened {
				if n[f.Path] < 4 {
					return false
				}
			}
			return len(opened) == 2
		})
		epoch := lockEpochs(evs)[dir]
		files := openedFiles(evs)
		a.stop(t)
		frozenAt := time.Now()

		require.NoError(t, os.WriteFile(pause, []byte(phase.point), 0o644))
		old := g.waitLeader(-1)
		d, err := master.UnlockDir(ctxT(t, time.Minute), dir, sdk.Force(), sdk.AtEpoch(epoch))
		require.NoError(t, err)
		require.Equal(t, sdk.Cleaning, d.Status, "phase %q: the cleaning did not wait at its point", phase.point)
		waitFor(t, time.Minute, g.names[old]+" to pause at "+phase.point, func() bool {
			return g.ns[old].outCount("testing: paused at "+phase.point) > 0
		})
		if phase.point == "seal 1" {
			waitFor(t, time.Minute, "a replica of each file sealed", func() bool { return sealedReplicas(t, files) == len(files) })
		}
		sealed := sealedReplicas(t, files)
		g.kill(old)
		require.NoError(t, os.Remove(pause))
		killed := time.Now()

		next := g.waitLeader(old)
		seen, how := waitUnlockedOn(t, g, next, dir, files)
		took := time.Since(killed)
		closed := map[string]int64{}
		synced := syncedBytes(a.events())
		for _, f := range files {
			fi, err := master.Stat(ctxT(t, time.Minute), f.Path)
			require.NoError(t, err)
			require.Empty(t, fi.WriterSession, "%s still open after UNLOCKED", f.Path)
			require.GreaterOrEqual(t, fi.Size, synced[f.Path], "%s lost synced bytes", f.Path)
			closed[f.Path] = fi.Size
		}
		requireAgreed(t, seen, closed)
		l, err := master.GetDirLock(ctxT(t, time.Minute), dir+"/lg0")
		require.NoError(t, err)
		require.Equal(t, sdk.Unlocked, l.Status, "%s/lg0", dir)
		// The master hands the tablet to another server (here: holds it),
		// at a newer epoch.
		lb, err := master.LockDir(ctxT(t, time.Minute), dir)
		require.NoError(t, err)
		require.Greater(t, lb.Epoch(), epoch)

		a.cont(t)
		a.wait(t, 90*time.Second)
		require.True(t, a.cmd.ProcessState.Success(), "A exited with %v", a.cmd.ProcessState)
		staleOps := countStaleOps(t, a.events(), frozenAt, closed)
		staleBytes := countStaleBytes(t, g.nsAddrs[g.waitLeader(-1)], files, closed)
		hist, err := master.LockHistory(ctxT(t, time.Minute), dir)
		require.NoError(t, err)
		require.NotEmpty(t, hist)
		h := hist[len(hist)-1]
		require.Equal(t, epoch, h.Epoch)
		require.Equal(t, "force", h.Reason)
		require.EqualValues(t, len(files), h.FilesSealed)
		t.Logf("phase %q (%s): %d of %d replicas sealed at the kill of %s; %s finished the cleaning, UNLOCKED %s %v after the kill; files closed at %v (synced %v), every replica sealed at that length; stale operations accepted %d, stale bytes accepted %d",
			phase.point, phase.what, sealed, 3*len(files), g.names[old], g.names[next], how, took.Round(time.Millisecond), closed, synced, staleOps, staleBytes)
		require.Zero(t, staleOps, "stale operations accepted")
		require.Zero(t, staleBytes, "stale bytes accepted")
		g.restart(old)
		g.waitFollowing(old)
	}
}

// sealedReplicas counts the sealed replicas of files.
func sealedReplicas(t *testing.T, files []tablet.Event) int {
	n := 0
	for _, reps := range replicaStates(t, files, nil) {
		for _, r := range reps {
			if r.sealed {
				n++
			}
		}
	}
	return n
}

// waitUnlockedOn waits until dir is UNLOCKED, watching its locks on
// member i (once its term serves the watch), and returns the replicas of
// files as they were when UNLOCKED was observed, and how it was: seen by
// the watch, or found already (the cleaning ended before the watch was
// up; the replicas are then those of a moment later).
func waitUnlockedOn(t *testing.T, g *group, i int, dir string, files []tablet.Event) (map[string][]replica, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := dialNameServer(t, g.nsAddrs[i])
	var stream bfspb.NameServer_WatchDirLocksClient
	waitFor(t, time.Minute, g.names[i]+" to serve a lock watch", func() bool {
		var err error
		stream, err = ns.WatchDirLocks(ctx, &bfspb.WatchDirLocksRequest{Prefix: dir})
		if err != nil {
			return false
		}
		// Headers come once the watch is registered; a member that does
		// not lead ends the stream without any.
		md, err := stream.Header()
		return err == nil && md != nil
	})
	// The first event may be the UNLOCKED itself; look at the lock too.
	l, err := ns.GetDirLock(ctx, &bfspb.GetDirLockRequest{Path: dir})
	require.NoError(t, err)
	if l.Lock.GetStatus() == bfspb.LockStatus_LOCK_STATUS_UNLOCKED {
		return replicaStates(t, files, nil), "found"
	}
	for {
		ev, err := stream.Recv()
		require.NoError(t, err, "watching %s on %s", dir, g.names[i])
		if ev.Lock.GetPath() == dir && ev.Lock.GetStatus() == bfspb.LockStatus_LOCK_STATUS_UNLOCKED {
			return replicaStates(t, files, nil), "seen by a watch"
		}
	}
}
