package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/sdk"
)

// TestGroupFollowerCatchesUpFromSnapshot stops a follower, writes enough
// that the leader snapshots its state and drops the log entries the
// follower lacks (a snapshot every 100 entries, 10 kept after it), and
// restarts the follower: it must install the leader's snapshot, catch up
// (bfs cluster status: its applied index reaches the leader's commit
// index), and, once leadership is transferred to it (bfs cluster
// transfer), serve every file written while it was down.
func TestGroupFollowerCatchesUpFromSnapshot(t *testing.T) {
	g := startGroup(t, 0, withNameServerFlags("--raft-snapshot-threshold", "100", "--raft-snapshot-interval", "100ms",
		"--raft-trailing-logs", "10"))
	c := g.client(sdk.WithHolder("writer"))
	require.NoError(t, c.MkdirAll(ctxT(t, time.Minute), "/snap", 0))
	l := g.waitLeader(-1)
	f := (l + 1) % groupSize
	st, err := g.memberStatus(f)
	require.NoError(t, err)
	behind := st.AppliedIndex
	g.kill(f)

	const files = 600
	for i := range files {
		require.NoError(t, c.Touch(ctxT(t, time.Minute), fmt.Sprintf("/snap/f%04d", i)))
	}
	l = g.waitLeader(f)
	var snapIndex uint64
	waitFor(t, time.Minute, g.names[l]+" to snapshot past what "+g.names[f]+" has", func() bool {
		snapIndex = newestSnapshot(t, filepath.Join(g.dir, g.names[l], "raft", "snapshots", "snapshots"))
		return snapIndex > behind+10
	})

	g.restart(f)
	var js groupJSON
	waitFor(t, 2*time.Minute, g.names[f]+" to catch up (bfs cluster status)", func() bool {
		st, code := g.status()
		js = st
		if code != 0 {
			return false
		}
		var leaderCommit, applied uint64
		for _, m := range st.Members {
			if m.Name == st.Leader {
				leaderCommit = m.CommitIndex
			}
			if m.Name == g.names[f] {
				applied = m.AppliedIndex
			}
		}
		return applied > 0 && applied >= leaderCommit
	})
	installed := g.ns[f].logCount("Installed remote snapshot")
	require.Positive(t, installed, "%s caught up without installing a snapshot", g.names[f])

	_, code := g.bfs("cluster", "transfer", g.names[f])
	require.Zero(t, code, "bfs cluster transfer %s", g.names[f])
	waitFor(t, time.Minute, g.names[f]+" to lead", func() bool { l, _ := g.leader(); return l == f })
	names := listNames(t, c, "/snap")
	require.Len(t, names, files, "files read from %s after the transfer", g.names[f])
	for i, m := range js.Members {
		t.Logf("bfs cluster status, member %d: %+v", i, m)
	}
	t.Logf("%s was at index %d when stopped; %s snapshotted at index %d; restarted, %s installed %d snapshot(s), caught up, led after a transfer and listed all %d files written while it was down",
		g.names[f], behind, g.names[l], snapIndex, g.names[f], installed, len(names))
}

var snapshotNameRE = regexp.MustCompile(`^\d+-(\d+)-\d+$`)

// newestSnapshot is the index of the newest snapshot in a Raft snapshot
// directory (0 if none).
func newestSnapshot(t *testing.T, dir string) uint64 {
	paths, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	var top uint64
	for _, p := range paths {
		if m := snapshotNameRE.FindStringSubmatch(filepath.Base(p)); m != nil {
			n, _ := strconv.ParseUint(m[1], 10, 64)
			top = max(top, n)
		}
	}
	return top
}

// TestGroupMembershipChangesUnderLoad adds a fourth nameserver (bfs
// cluster add), hands it the leadership (bfs cluster transfer) and
// removes a founding member (bfs cluster remove) while a storm of creates
// and locks runs from six clients, which were given the founding members'
// addresses only: they follow the leader to the new member. Every change
// must succeed, the storm must go on, and every create it was
// acknowledged must exist; the calls that failed (outcome unknown) are
// counted.
func TestGroupMembershipChangesUnderLoad(t *testing.T) {
	g := startGroup(t, 0)
	s := newStorm(t, g, 6)
	s.start(0)
	s.waitAcks(100)

	n := g.join()
	out, code := g.bfs("cluster", "add", g.names[n], g.fronts[n])
	require.Zero(t, code, "bfs cluster add: %s", out)
	s.waitAcks(100)
	st, code := g.status()
	require.Zero(t, code)
	require.Len(t, st.Members, 4)
	for _, m := range st.Members {
		require.True(t, m.Voter, "%s is not a voter: %+v", m.Name, st)
	}
	g.waitFollowing(n)

	out, code = g.bfs("cluster", "transfer", g.names[n])
	require.Zero(t, code, "bfs cluster transfer: %s", out)
	waitFor(t, time.Minute, g.names[n]+" to lead", func() bool { l, _ := g.leader(); return l == n })
	s.waitAcks(100)

	out, code = g.bfs("cluster", "remove", g.names[0])
	require.Zero(t, code, "bfs cluster remove: %s", out)
	g.kill(0)
	s.waitAcks(100)
	st, code = g.status()
	require.Zero(t, code)
	require.Len(t, st.Members, 3)
	for _, m := range st.Members {
		require.NotEqual(t, g.names[0], m.Name)
	}
	require.Equal(t, g.names[n], st.Leader)
	s.stop()

	checked, lost := s.checkCreates(g.client(sdk.WithHolder("reader")))
	s.mu.Lock()
	acks, errs, grants := s.mu.acks, s.mu.errs, slices.Clone(s.mu.grants)
	s.mu.Unlock()
	_, bad := checkEpochs(t, [][]grant{grants})
	t.Logf("added %s, transferred the leadership to it, removed %s, under a storm: %d operations acknowledged (%d creates checked, %d lost; %d lock grants, %d epochs out of order), %d failed (outcome unknown)",
		g.names[n], g.names[0], acks, checked, lost, len(grants), bad, errs)
	require.Zero(t, lost)
}
