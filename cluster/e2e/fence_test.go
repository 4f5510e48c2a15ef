package e2e

import (
	"fmt"
	"io"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/e2e/tablet"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/sdk"
)

// TestLostLockStaysFenced is SPEC §6's "a lost lock fences its client for
// good" (I8) with real processes. Tablet server A locks /tera/t2 and
// /tera/t2/lg0 and appends; it is frozen with SIGSTOP; the master
// force-unlocks the tablet and the cleaning ends (UNLOCKED). A is resumed
// with its session still alive and told to try everything again (append,
// raw packets to its replicas, create, mkdir, rename, delete, rmdir)
// while the directory is UNLOCKED, then once B locked it (a lock attempt
// too), then, after A was frozen past its session's TTL and came back
// with a new session, while the directory is UNLOCKED again and once B
// locked it again. Not one attempt may be accepted.
func TestLostLockStaysFenced(t *testing.T) {
	c := startCluster(t, 3)
	master := c.client(sdk.WithHolder("master"), sdk.WithCertsDir(certsDir, certs.AdminUser)) // forces unlocks
	b := c.client(sdk.WithHolder("tablet-b"))
	const ttl = 3 * time.Second
	a := startTablet(t, c, "tablet-a", "--holder", "tablet-a", "--tablet", "/tera/t2", "--lg", "lg0",
		"--mode", "rounds", "--ttl", ttl.String(), "--initial", "50000", "--max-append", "20000")
	evs := a.waitEvents(60*time.Second, "4 synced appends per file", func(evs []tablet.Event) bool {
		n := appendsPerFile(evs)
		opened := openedFiles(evs)
		for _, f := range opened {
			if n[f.Path] < 4 {
				return false
			}
		}
		return len(opened) == 2
	})
	epochs := lockEpochs(evs)
	firstSession := kindOf(evs, tablet.KindLocked)[0].Session
	require.NotEmpty(t, firstSession)

	a.stop(t)
	d, err := master.UnlockDir(ctxT(t, 30*time.Second), "/tera/t2", sdk.Force(), sdk.WaitUnlocked(), sdk.AtEpoch(epochs["/tera/t2"]))
	require.NoError(t, err)
	require.Equal(t, sdk.Unlocked, d.Status)
	a.cont(t)

	requireState := func(status sdk.LockStatus, holder string) {
		t.Helper()
		for _, dir := range []string{"/tera/t2", "/tera/t2/lg0"} {
			l, err := master.GetDirLock(ctxT(t, 10*time.Second), dir)
			require.NoError(t, err)
			require.Equal(t, status, l.Status, dir)
			require.Equal(t, holder, l.Holder, dir)
		}
	}
	accepted := map[string]int{}
	round := func(label string, lock bool) (session string) {
		t.Helper()
		cmd := "round " + label
		if lock {
			cmd += " lock"
		}
		_, err := io.WriteString(a.stdin, cmd+"\n")
		require.NoError(t, err)
		evs := a.waitEvents(60*time.Second, "the end of round "+label, func(evs []tablet.Event) bool {
			for _, e := range evs {
				if e.Kind == tablet.KindRoundDone && e.Path == label {
					return true
				}
			}
			return false
		})
		ops, done := roundOps(evs, label)
		tried, refused := map[string]int{}, map[string]int{}
		for _, e := range ops {
			tried[e.Op]++
			if e.OK {
				accepted[label]++
				t.Errorf("round %s: A's %s of %s accepted: %+v", label, e.Op, e.Path, e)
			} else {
				refused[e.Op+" "+e.Refusal]++
			}
		}
		want := []string{tablet.OpAppend, tablet.OpRawWrite, tablet.OpCreate, tablet.OpMkdir, tablet.OpRename, tablet.OpDelete, tablet.OpRmdir}
		if lock {
			want = append(want, tablet.OpLock)
		}
		for _, op := range want {
			require.NotZero(t, tried[op], "round %s: A never tried a %s", label, op)
		}
		keys := make([]string, 0, len(refused))
		for k := range refused {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		summary := ""
		for _, k := range keys {
			summary += fmt.Sprintf(" %s=%d", k, refused[k])
		}
		t.Logf("round %s (session %s): %d attempts, accepted %d; refused:%s", label, done.Session, len(ops), accepted[label], summary)
		return done.Session
	}

	requireState(sdk.Unlocked, "")
	require.Equal(t, firstSession, round("unlocked", false), "A's session outlived its lock")
	requireState(sdk.Unlocked, "")

	lb, err := b.LockDir(ctxT(t, 10*time.Second), "/tera/t2")
	require.NoError(t, err)
	_, err = b.LockDir(ctxT(t, 10*time.Second), "/tera/t2/lg0")
	require.NoError(t, err)
	require.Equal(t, firstSession, round("locked-by-b", true))
	requireState(sdk.Locked, "tablet-b")

	// B lets the tablet go; A loses its session too.
	_, err = b.UnlockDir(ctxT(t, 30*time.Second), "/tera/t2", sdk.WaitUnlocked(), sdk.AtEpoch(lb.Epoch()))
	require.NoError(t, err)
	a.stop(t)
	waitFor(t, 30*time.Second, "A's session to expire", func() bool {
		for _, s := range listSessions(t, master) {
			if s == firstSession {
				return false
			}
		}
		return true
	})
	a.cont(t)
	s2 := round("unlocked-new-session", false)
	require.NotEqual(t, firstSession, s2, "A came back with a new session")
	requireState(sdk.Unlocked, "")

	_, err = b.LockDir(ctxT(t, 10*time.Second), "/tera/t2")
	require.NoError(t, err)
	_, err = b.LockDir(ctxT(t, 10*time.Second), "/tera/t2/lg0")
	require.NoError(t, err)
	require.Equal(t, s2, round("locked-by-b-new-session", true))
	requireState(sdk.Locked, "tablet-b")

	_, err = io.WriteString(a.stdin, "finish\n")
	require.NoError(t, err)
	a.wait(t, 30*time.Second)
	require.True(t, a.cmd.ProcessState.Success(), "A exited with %v", a.cmd.ProcessState)
	total := 0
	for _, n := range accepted {
		total += n
	}
	t.Logf("stale operations accepted over the four rounds: %d", total)
	require.Zero(t, total)
}

// roundOps returns the operations of the round labelled label and its
// KindRoundDone event.
func roundOps(evs []tablet.Event, label string) (ops []tablet.Event, done tablet.Event) {
	in := false
	for _, e := range evs {
		switch {
		case e.Kind == tablet.KindRoundStart && e.Path == label:
			in = true
		case e.Kind == tablet.KindRoundDone && e.Path == label:
			return ops, e
		case in && e.Kind == tablet.KindOp:
			ops = append(ops, e)
		}
	}
	return ops, done
}

// listSessions returns the ids of the sessions the nameserver has.
func listSessions(t *testing.T, c *sdk.Client) []string {
	t.Helper()
	ss, err := c.Sessions(ctxT(t, 10*time.Second))
	require.NoError(t, err)
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}
