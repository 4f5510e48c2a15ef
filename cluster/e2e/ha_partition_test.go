package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/e2e/tablet"
	"github.com/bfs-go/bfs/cluster/faultnet"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// TestGroupPartitionedLeaderAcknowledgesNothing cuts the leader off from
// its peers (its Raft links black-holed) while its clients and the
// chunkservers still reach it.
//
// Before the cut, tablet server A (a process, 2s session TTL) holds a
// tablet with a file open, and is killed: its session expires on the
// leader, whose cleaning sends Seal to the file's replicas. Those seals
// are held in the network (the connections between the leader and the
// chunkservers stall in their proxies), the leader pauses (SIGSTOP) and
// is cut off. The others elect a new leader, which finishes the cleaning,
// and the chunkservers learn its term. Then the old leader's seals
// arrive, and the old leader resumes, believing it leads until it finds
// out otherwise, asked directly, again and again, for mutations, grants,
// sessions and keep-alives: it acknowledges none, and every chunkserver
// refuses its seals (its log says so, naming the old term) and accepts
// nothing of the old term.
func TestGroupPartitionedLeaderAcknowledgesNothing(t *testing.T) {
	g := startGroup(t, 3, withChunkserverProxies(), withChunkserverFlags("--vmodule", "data=1"))
	a := startTablet(t, g, "tablet-a", "--holder", "tablet-a", "--tablet", "/part/t1",
		"--mode", "hold", "--ttl", "2s", "--initial", "100000")
	evs := a.waitEvents(60*time.Second, "ready", func(evs []tablet.Event) bool { return len(kindOf(evs, tablet.KindReady)) > 0 })
	files := openedFiles(evs)
	require.Len(t, files, 1)
	synced := syncedBytes(evs)[files[0].Path]

	old, oldTerm := g.leader()
	require.GreaterOrEqual(t, old, 0)
	direct := dialNameServer(t, g.nsAddrs[old])
	sess, err := direct.OpenSession(ctxT(t, time.Minute), &bfspb.OpenSessionRequest{Holder: "probe", TtlMs: 60_000})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, sess.Status, sess.Message)

	// The leader's connections to the chunkservers stall; A dies, and
	// its session expires on the leader, which starts the cleaning and
	// sends its seals into the stalled connections.
	for i, p := range g.csFronts {
		require.Positive(t, p.hold(), "the leader has no connection to chunkserver %d", i)
	}
	a.kill()
	waitFor(t, time.Minute, "the leader's seals to reach every chunkserver's proxy", func() bool {
		for _, p := range g.csFronts {
			if p.heldBytes() == 0 {
				return false
			}
		}
		return true
	})
	for i, p := range g.csFronts {
		t.Logf("held on the way to chunkserver %d: %d bytes", i, p.heldBytes())
	}
	lock, err := direct.GetDirLock(ctxT(t, time.Minute), &bfspb.GetDirLockRequest{Path: "/part/t1"})
	require.NoError(t, err)
	require.Equal(t, bfspb.LockStatus_LOCK_STATUS_CLEANING, lock.Lock.GetStatus(), "A's lock after its session expired")

	// The leader pauses (a long GC, a stalled VM) and, meanwhile, is cut
	// off from its peers.
	g.ns[old].stop(t)
	g.net.Isolate(g.names[old], faultnet.Fault{Blackhole: true})
	cut := time.Now()
	next := g.waitLeader(old)
	_, newTerm := g.leader()
	t.Logf("%s (term %d) paused and cut off from its peers; %s leads in term %d, %v later", g.names[old], oldTerm, g.names[next], newTerm,
		time.Since(cut).Round(time.Millisecond))

	// The new leader finishes the cleaning; every chunkserver knows its
	// term.
	master := g.client(sdk.WithHolder("master"))
	waitFor(t, 2*time.Minute, "the new leader to finish A's cleaning", func() bool {
		l, err := master.GetDirLock(ctxT(t, time.Minute), "/part/t1")
		return err == nil && l.Status == sdk.Unlocked
	})
	for i := range g.cs {
		waitFor(t, time.Minute, fmt.Sprintf("chunkserver %d to learn term %d", i, newTerm), func() bool {
			return g.chunkserverTerm(i) >= newTerm
		})
	}
	fi, err := master.Stat(ctxT(t, time.Minute), files[0].Path)
	require.NoError(t, err)
	require.Empty(t, fi.WriterSession)
	require.GreaterOrEqual(t, fi.Size, synced)

	// The old leader's seals arrive now; then it resumes, believing it
	// leads until it finds out, and is asked directly, again and again,
	// from the moment it resumes.
	marks := make([]int, len(g.cs))
	for i, cs := range g.cs {
		marks[i] = len(cs.logLines())
	}
	for _, p := range g.csFronts {
		p.release()
	}
	// Each chunkserver has the seal, still paused, to judge before the
	// old leader could take it back (it would reset the call on waking).
	refusedRE := regexp.MustCompile(fmt.Sprintf(`refused: stale leader term: from a nameserver leader of term %d;`, oldTerm))
	acceptedRE := regexp.MustCompile(fmt.Sprintf(`accepted from the nameserver leader of term %d$`, oldTerm))
	for i, cs := range g.cs {
		waitFor(t, time.Minute, fmt.Sprintf("chunkserver %d to refuse the old leader's seal", i), func() bool {
			return countLines(cs.logLines()[marks[i]:], refusedRE) > 0
		})
	}
	type asking struct {
		acks, asked int
		answers     map[string]int
	}
	askedc := make(chan asking, 1)
	go func() {
		var r asking
		r.acks, r.asked, r.answers = askDeposed(t, direct, sess.SessionId, 20)
		askedc <- r
	}()
	g.ns[old].cont(t)
	r := <-askedc
	t.Logf("the deposed leader was asked %d times (mkdir, create, lock, open session, keep-alive) from the moment it resumed: %d acknowledged; answers %v",
		r.asked, r.acks, r.answers)
	require.Zero(t, r.acks, "the deposed leader acknowledged %d requests", r.acks)
	// It has stepped down: it sends nothing more.
	waitFor(t, time.Minute, g.names[old]+" to step down", func() bool {
		st, err := g.memberStatus(old)
		return err == nil && st.Role != "leader"
	})
	refused := 0
	for i, cs := range g.cs {
		refused += countLines(cs.logLines()[marks[i]:], refusedRE)
	}
	accepted := 0
	for i, cs := range g.cs {
		accepted += countLines(cs.logLines()[marks[i]:], acceptedRE)
	}
	t.Logf("after the new election: the old leader's destructive commands refused by the chunkservers: %d, accepted: %d", refused, accepted)
	require.Zero(t, accepted, "a chunkserver accepted a command of the deposed leader's term")
	for _, reps := range replicaStates(t, files, nil) {
		for _, r := range reps {
			require.True(t, r.sealed && r.size == fi.Size, "replica on %s: %d bytes, sealed %v; closed at %d", r.addr, r.size, r.sealed, fi.Size)
		}
	}

	g.net.HealAll()
	g.waitFollowing(old)
	_, err = master.Stat(ctxT(t, time.Minute), "/part/stale")
	require.ErrorIs(t, err, sdk.ErrNotFound, "a mutation asked of the deposed leader was applied")
}

// askDeposed asks a deposed leader n rounds of mutations, a grant, a new
// session and a keep-alive of session, and returns how many it
// acknowledged (OK), how many it was asked, and the answers by kind.
func askDeposed(t *testing.T, ns bfspb.NameServerClient, session string, n int) (acks, asked int, answers map[string]int) {
	t.Helper()
	answers = map[string]int{}
	note := func(status bfspb.StatusCode, err error) {
		asked++
		switch {
		case err != nil:
			answers["rpc error"]++
		case status == bfspb.StatusCode_OK:
			acks++
			answers["OK"]++
		default:
			answers[status.String()]++
		}
	}
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		mk, err := ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: "/part/stale"})
		note(mk.GetStatus(), err)
		cr, err := ns.Create(ctx, &bfspb.CreateRequest{Path: fmt.Sprintf("/part/stale-%d", i)})
		note(cr.GetStatus(), err)
		lk, err := ns.LockDir(ctx, &bfspb.LockDirRequest{Path: "/part", SessionId: session})
		note(lk.GetStatus(), err)
		op, err := ns.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: "late", TtlMs: 10_000})
		note(op.GetStatus(), err)
		ka, err := ns.KeepAlive(ctx, &bfspb.KeepAliveRequest{SessionId: session})
		note(ka.GetStatus(), err)
		cancel()
	}
	return acks, asked, answers
}

// chunkserverTerm is the newest leader term chunkserver i has recorded
// (LEADER_TERM in its data directory).
func (g *group) chunkserverTerm(i int) uint64 {
	b, err := os.ReadFile(filepath.Join(g.dir, fmt.Sprintf("chunkserver-%d", i), "LEADER_TERM"))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// logLines returns the process's stderr lines so far.
func (p *process) logLines() []string {
	p.stderr.Lock()
	defer p.stderr.Unlock()
	return append([]string(nil), p.stderr.lines...)
}

// countLines counts the lines re matches.
func countLines(lines []string, re *regexp.Regexp) int {
	n := 0
	for _, line := range lines {
		if re.MatchString(line) {
			n++
		}
	}
	return n
}
