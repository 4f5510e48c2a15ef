package lockcmd_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/lockfill"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/tools/lockctl/lockcmd"
)

// scaleLocks is how many directories TestListingsAtScale locks: 100,000,
// a Tera cluster's ordinary count. The race detector makes every RPC
// several times slower (filling 20,000 locks took 31 s under -race, 4 s
// without, on 2 cores), so under it the test locks 10,000, in the same
// 100 groups and pages: it exercises the same paths and page boundaries
// in well under a minute. bfsbench scale lists 100,000 (BUILD.md).
var scaleLocks = map[bool]int{false: 100_000, true: 10_000}[raceDetector]

// scaleSessions hold the locks, a group of directories each, as tablet
// servers would.
const scaleSessions = 100

// TestListingsAtScale: with scaleLocks locks held by 100 sessions, lockctl
// list (table and JSON, whole, filtered, limited, and a page at a time),
// sessions and history succeed, through pages of 1, exact multiples of
// the page size and odd sizes, with a lock granted and one released
// between pages.
func TestListingsAtScale(t *testing.T) {
	c := testcluster.Start(t)
	ns := c
	raw := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	ctx := context.Background()

	start := time.Now()
	f, err := lockfill.Fill(ctx, raw, lockfill.Spec{Root: "/tera", Locks: scaleLocks, Sessions: scaleSessions, Workers: 64})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Stop()) })
	t.Logf("%d directories made and locked in %v", scaleLocks, time.Since(start).Round(time.Millisecond))
	perGroup := scaleLocks / scaleSessions
	want := make([]string, scaleLocks)
	for i := range want {
		want[i] = f.Path(i)
	}

	timed := func(args ...string) result {
		t.Helper()
		start := time.Now()
		r := lockctl(t, ns, args...)
		require.Equal(t, 0, r.code, "lockctl %v: %s", args, r.stderr)
		t.Logf("lockctl %s: %v, %d bytes", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), len(r.stdout))
		return r
	}

	// The whole table: one header, every lock once, in path order.
	r := timed("list")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, scaleLocks+1)
	assert.Regexp(t, `^PATH +STATE +HOLDER +EPOCH +SESSION +SINCE +PENDING$`, lines[0])
	require.Equal(t, want, firstColumn(lines[1:]))
	assert.Regexp(t, `^/tera/g000/t0000000 +locked +tablet-server-000 +\d+ +\S+ `, lines[1])

	r = timed("list", "--state", "locked", "--limit", "10")
	lines = strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 11)
	require.Equal(t, want[:10], firstColumn(lines[1:]))
	r = timed("-o", "json", "list", "--state", "locked", "--limit", "10", "--holder", lockfill.Holder(7))
	require.Equal(t, want[7*perGroup:7*perGroup+10], jsonPaths(t, r.stdout))

	// No lock is cleaning: the filter runs on the nameserver, which looks
	// at a bounded number of locks per page and sends empty pages until
	// it has looked at them all.
	r = timed("list", "--state", "cleaning")
	require.Equal(t, "no cleaning directory locks at or under /\n", r.stdout)

	// One group a lock at a time, in exact multiples and in odd pages.
	group := f.GroupDir(42)
	for _, size := range []string{"1", fmt.Sprint(perGroup / 4), fmt.Sprint(perGroup/3 + 1), fmt.Sprint(perGroup)} {
		r = timed("-o", "json", "list", "--page-size", size, group)
		require.Equal(t, want[42*perGroup:43*perGroup], jsonPaths(t, r.stdout), "page size %s", size)
	}
	r = timed("-o", "json", "list", "--session", f.SessionIDs[99], "--page-size", "7")
	require.Equal(t, want[99*perGroup:], jsonPaths(t, r.stdout))

	// Sessions: each holds its group. The table names them; JSON pages of
	// 7 (100 is no multiple of 7) count every lock.
	r = timed("sessions")
	lines = strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, scaleSessions+1)
	assert.Regexp(t, `^ID +HOLDER +TTL +REMAINING +OPEN-FILES +LOCKS$`, lines[0])
	r = timed("-o", "json", "sessions", "--page-size", "7")
	sessions := decodeLines[struct {
		ID        string   `json:"id"`
		Holder    string   `json:"holder"`
		Locks     []string `json:"locks"`
		LockCount int      `json:"lock_count"`
	}](t, r.stdout)
	require.Len(t, sessions, scaleSessions)
	for _, s := range sessions {
		g := slices.Index(f.SessionIDs, s.ID)
		require.GreaterOrEqual(t, g, 0, "session %s", s.ID)
		require.Equal(t, lockfill.Holder(g), s.Holder)
		require.Equal(t, perGroup, s.LockCount)
		require.Equal(t, want[g*perGroup : (g+1)*perGroup][:len(s.Locks)], s.Locks)
	}
	r = timed("sessions", "--limit", "3")
	require.Len(t, strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"), 4)

	// History, among all those locks.
	hist := f.GroupDir(0) + "/history"
	mk, err := raw.Mkdir(ctx, &bfspb.MkdirRequest{Path: hist})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, mk.Status)
	for range 5 {
		lk, err := raw.LockDir(ctx, &bfspb.LockDirRequest{Path: hist, SessionId: f.SessionIDs[0]})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_OK, lk.Status, lk.Message)
		un, err := raw.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: hist, SessionId: f.SessionIDs[0]})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_UNLOCKED, un.Status, un.Message)
	}
	r = timed("history", hist)
	require.Len(t, strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"), 6)
	r = timed("-o", "json", "history", "--page-size", "2", hist)
	require.Len(t, strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"), 5)
	r = timed("-o", "json", "history", "--page-size", "5", "--limit", "4", hist)
	require.Len(t, strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"), 4)

	// Between the first page and the second, a lock is granted behind
	// the listing, one ahead of it, and one ahead is released.
	behind, ahead, released := want[5]+"-new", want[scaleLocks/2]+"-new", want[scaleLocks/2+1]
	out := &hookWriter{at: 1000, hook: func() {
		for _, p := range []string{behind, ahead} {
			mk, err := raw.Mkdir(ctx, &bfspb.MkdirRequest{Path: p})
			require.NoError(t, err)
			require.Equal(t, bfspb.StatusCode_OK, mk.Status, mk.Message)
			lk, err := raw.LockDir(ctx, &bfspb.LockDirRequest{Path: p, SessionId: f.SessionIDs[0]})
			require.NoError(t, err)
			require.Equal(t, bfspb.StatusCode_OK, lk.Status, lk.Message)
		}
		un, err := raw.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: released, SessionId: f.SessionIDs[f.Group(scaleLocks/2+1)]})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_UNLOCKED, un.Status, un.Message)
	}}
	start = time.Now()
	var errb bytes.Buffer
	code := lockcmd.Main(ctx, append(at(c), "-o", "json", "list", "--page-size", "1000"), out, &errb)
	require.Equal(t, 0, code, errb.String())
	t.Logf("lockctl -o json list --page-size 1000, changed after the first page: %v", time.Since(start).Round(time.Millisecond))
	require.True(t, out.hooked)
	got := jsonPaths(t, out.buf.String())
	expected := slices.Insert(slices.Clone(want), scaleLocks/2+1, ahead)
	expected = slices.Delete(expected, scaleLocks/2+2, scaleLocks/2+3) // released
	require.Equal(t, expected, got)
}

// firstColumn is the first field of each table row.
func firstColumn(rows []string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i], _, _ = strings.Cut(r, " ")
	}
	return out
}

func jsonPaths(t *testing.T, s string) []string {
	t.Helper()
	docs := decodeLines[struct {
		Path string `json:"path"`
	}](t, s)
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.Path
	}
	return out
}

// hookWriter collects output and calls hook once, when the line at
// (counting from 1) has been written: lockctl writes a JSON listing a line
// at a time and asks for the next page only after the last line of the
// page before, so with a page size of at, hook runs between pages.
type hookWriter struct {
	buf    bytes.Buffer
	lines  int
	at     int
	hook   func()
	hooked bool
}

func (w *hookWriter) Write(p []byte) (int, error) {
	n, err := w.buf.Write(p)
	w.lines += bytes.Count(p, []byte("\n"))
	if !w.hooked && w.lines >= w.at {
		w.hooked = true
		w.hook()
	}
	return n, err
}
