package lockcmd_test

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/tools/lockctl/lockcmd"
)

// lockJSON is what -o json prints for one lock.
type lockJSON struct {
	Path    string  `json:"path"`
	State   string  `json:"state"`
	Holder  string  `json:"holder"`
	Session string  `json:"session"`
	Epoch   uint64  `json:"epoch"`
	Since   *string `json:"since"`
	Pending []struct {
		Path     string   `json:"path"`
		BlockID  int64    `json:"block_id"`
		Replicas []string `json:"replicas"`
	} `json:"pending"`
}

type sessionJSON struct {
	ID     string   `json:"id"`
	Holder string   `json:"holder"`
	TTLMs  int64    `json:"ttl_ms"`
	Locks  []string `json:"locks"`
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(s), &v), "not JSON: %q", s)
	return v
}

// decodeLines decodes output of one JSON object per line.
func decodeLines[T any](t *testing.T, s string) []T {
	t.Helper()
	var out []T
	for _, line := range strings.SplitAfter(s, "\n") {
		if line != "" {
			out = append(out, decode[T](t, line))
		}
	}
	return out
}

var grantedLine = regexp.MustCompile(`^locked (/\S*): epoch (\d+), holder (\S+), session (\S+)$`)

// TestLockLifecycle is an operator's session: a lock held by one lockctl,
// seen by the others, refused to a second taker and to a non-forced
// unlock, forced away (the holder exits 6), then recorded in history.
func TestLockLifecycle(t *testing.T) {
	ns := testcluster.Start(t)
	require.NoError(t, dial(t, ns).MkdirAll(context.Background(), "/tera/t1/sub", 0))

	holder := start(t, ns, "lock", "--holder", "alice:1:1", "/tera/t1")
	m := grantedLine.FindStringSubmatch(holder.stdout.next(t, "locked"))
	require.NotNil(t, m, "granted line")
	assert.Equal(t, "/tera/t1", m[1])
	assert.Equal(t, "alice:1:1", m[3])
	epoch := m[2]
	session := m[4]

	// status, as a table and as JSON.
	r := lockctl(t, ns, "status", "/tera/t1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^State: +locked$`, r.stdout)
	assert.Regexp(t, `(?m)^Holder: +alice:1:1$`, r.stdout)
	assert.Regexp(t, `(?m)^Session: +`+regexp.QuoteMeta(session)+`$`, r.stdout)
	assert.Regexp(t, `(?m)^Epoch: +`+epoch+`$`, r.stdout)
	assert.Regexp(t, `(?m)^Since: +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+s ago\)$`, r.stdout)
	r = lockctl(t, ns, "-o", "json", "status", "/tera/t1")
	require.Equal(t, 0, r.code, r.stderr)
	st := decode[lockJSON](t, r.stdout)
	assert.Equal(t, "locked", st.State)
	assert.Equal(t, "alice:1:1", st.Holder)
	assert.Equal(t, session, st.Session)
	assert.Equal(t, epoch, strconv.FormatUint(st.Epoch, 10))
	require.NotNil(t, st.Since)
	assert.Empty(t, st.Pending)

	// list, sessions.
	r = lockctl(t, ns, "list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^PATH +STATE +HOLDER +EPOCH +SESSION +SINCE +PENDING$`, r.stdout)
	assert.Regexp(t, `(?m)^/tera/t1 +locked +alice:1:1 +`+epoch+` +`+regexp.QuoteMeta(session)+` `, r.stdout)
	r = lockctl(t, ns, "-o", "json", "list", "--state", "locked", "/tera")
	require.Equal(t, 0, r.code, r.stderr)
	list := decodeLines[lockJSON](t, r.stdout)
	require.Len(t, list, 1)
	assert.Equal(t, "/tera/t1", list[0].Path)
	r = lockctl(t, ns, "list", "--state", "cleaning")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "no cleaning directory locks at or under /\n", r.stdout)
	r = lockctl(t, ns, "-o", "json", "list", "/other")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stdout, "no lock, no line")

	r = lockctl(t, ns, "sessions")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^ID +HOLDER +TTL +REMAINING +OPEN-FILES +LOCKS$`, r.stdout)
	assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(session)+` +alice:1:1 +10s +\S+ +0 +/tera/t1$`, r.stdout)
	r = lockctl(t, ns, "-o", "json", "sessions")
	require.Equal(t, 0, r.code, r.stderr)
	sessions := decodeLines[sessionJSON](t, r.stdout)
	// The holder's and the test client's (mkdir): lockctl's queries open none.
	require.Len(t, sessions, 2)
	i := slices.IndexFunc(sessions, func(s sessionJSON) bool { return s.ID == session })
	require.GreaterOrEqual(t, i, 0, "the holder's session is listed")
	assert.Equal(t, "alice:1:1", sessions[i].Holder)
	assert.Equal(t, int64(10000), sessions[i].TTLMs)
	assert.Equal(t, []string{"/tera/t1"}, sessions[i].Locks)
	assert.Equal(t, []string{}, sessions[1-i].Locks)

	// A second taker is refused with the holder (exit 3), also under a
	// bounded wait; so is an unlock without --force.
	r = lockctl(t, ns, "lock", "--holder", "bob:1:1", "/tera/t1")
	assert.Equal(t, lockcmd.ExitLocked, r.code)
	assert.Contains(t, r.stderr, "locked by alice:1:1 (epoch "+epoch+")")
	assert.Empty(t, r.stdout)
	r = lockctl(t, ns, "lock", "--wait", "--timeout", "200ms", "/tera/t1/sub")
	assert.Equal(t, lockcmd.ExitLocked, r.code)
	assert.Contains(t, r.stderr, "timed out after 200ms waiting for the lock /tera/t1/sub: /tera/t1 locked by alice:1:1 (epoch "+epoch+")")
	r = lockctl(t, ns, "unlock", "/tera/t1")
	assert.Equal(t, lockcmd.ExitLocked, r.code)
	assert.Contains(t, r.stderr, "locked by alice:1:1")
	assert.Contains(t, r.stderr, "refused without --force, since lockctl's own session does not hold it; 'lockctl unlock --force /tera/t1' takes it away from alice:1:1")
	r = lockctl(t, ns, "unlock", "--force", "--epoch", "999999", "/tera/t1")
	assert.Equal(t, lockcmd.ExitLost, r.code, "an unlock naming an old epoch: %s", r.stderr)
	assert.Contains(t, r.stderr, "is at epoch "+epoch+", not 999999")

	// The forced unlock returns once UNLOCKED; the holder learns it lost
	// the lock and exits 6.
	r = lockctl(t, ns, "unlock", "--force", "--wait", "--epoch", epoch, "/tera/t1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "unlocked /tera/t1 (epoch "+epoch+")\n", r.stdout)
	assert.Equal(t, lockcmd.ExitLost, holder.wait(t))
	assert.Contains(t, holder.stderr.text(), "lockctl: lock on /tera/t1 (epoch "+epoch+") lost while held")

	r = lockctl(t, ns, "status", "/tera/t1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "Path:  /tera/t1\nState: unlocked\n", r.stdout)
	r = lockctl(t, ns, "unlock", "/tera/t1")
	assert.Equal(t, 0, r.code, "unlocking an unlocked directory is an answer, not an error: %s", r.stderr)
	assert.Equal(t, "unlocked /tera/t1\n", r.stdout)

	r = lockctl(t, ns, "history", "/tera/t1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^HOLDER +EPOCH +LOCKED-AT +UNLOCKED-AT +DURATION +REASON +FILES-SEALED +BYTES-TRUNCATED$`, r.stdout)
	assert.Regexp(t, `(?m)^alice:1:1 +`+epoch+` +\d{4}-\S+ \S+ +\d{4}-\S+ \S+ +\S+ +force +0 +0$`, r.stdout)
	r = lockctl(t, ns, "-o", "json", "history", "/tera/t1")
	require.Equal(t, 0, r.code, r.stderr)
	hist := decodeLines[struct {
		Holder     string  `json:"holder"`
		Epoch      uint64  `json:"epoch"`
		LockedAt   *string `json:"locked_at"`
		UnlockedAt *string `json:"unlocked_at"`
		DurationMs int64   `json:"duration_ms"`
		Reason     string  `json:"reason"`
	}](t, r.stdout)
	require.Len(t, hist, 1)
	assert.Equal(t, "alice:1:1", hist[0].Holder)
	assert.Equal(t, epoch, strconv.FormatUint(hist[0].Epoch, 10))
	assert.Equal(t, "force", hist[0].Reason)
	assert.NotNil(t, hist[0].LockedAt)
	assert.NotNil(t, hist[0].UnlockedAt)
	assert.GreaterOrEqual(t, hist[0].DurationMs, int64(0))
}

// TestLockReleasedOnInterrupt: SIGINT (the cancelled context) releases
// the lock and exits 0; a waiting lockctl gets it then.
func TestLockReleasedOnInterrupt(t *testing.T) {
	ns := testcluster.Start(t)
	require.NoError(t, dial(t, ns).MkdirAll(context.Background(), "/d", 0))

	first := start(t, ns, "-o", "json", "lock", "--holder", "first:1:1", "/d")
	granted := decode[lockJSON](t, first.stdout.document(t))
	assert.Equal(t, lockJSON{Path: "/d", State: "locked", Holder: "first:1:1", Session: granted.Session, Epoch: granted.Epoch,
		Pending: granted.Pending}, granted)
	assert.NotEmpty(t, granted.Session)
	assert.NotZero(t, granted.Epoch)
	second := start(t, ns, "lock", "--wait", "--holder", "second:1:1", "/d")

	r := lockctl(t, ns, "status", "/d")
	assert.Regexp(t, `(?m)^Holder: +first:1:1$`, r.stdout)
	assert.Equal(t, 0, first.stop(t))
	second.stdout.next(t, "holder second:1:1")
	assert.Equal(t, 0, second.stop(t))
	assert.Contains(t, second.stdout.text(), "released /d (epoch ")

	r = lockctl(t, ns, "-o", "json", "history", "/d")
	require.Equal(t, 0, r.code, r.stderr)
	hist := decodeLines[struct {
		Holder string `json:"holder"`
		Reason string `json:"reason"`
	}](t, r.stdout)
	require.Len(t, hist, 2)
	assert.Equal(t, "first:1:1", hist[0].Holder)
	assert.Equal(t, "holder", hist[0].Reason, "released by its holder, not expired")
	assert.Equal(t, "second:1:1", hist[1].Holder)
}

// TestOperatorLock: an operator lock outlives lockctl, is refused to a
// non-forced unlock and released by a forced one.
func TestOperatorLock(t *testing.T) {
	ns := testcluster.Start(t)
	require.NoError(t, dial(t, ns).MkdirAll(context.Background(), "/maint/x", 0))

	r := lockctl(t, ns, "lock", "--operator", "--holder", "ops-jane", "/maint")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^locked /maint: epoch \d+, holder ops-jane, operator lock \(release with: lockctl unlock --force /maint\)\n$`, r.stdout)

	r = lockctl(t, ns, "-o", "json", "status", "/maint")
	require.Equal(t, 0, r.code, r.stderr)
	st := decode[lockJSON](t, r.stdout)
	assert.Equal(t, "locked", st.State)
	assert.Equal(t, "ops-jane", st.Holder)

	r = lockctl(t, ns, "lock", "/maint/x")
	assert.Equal(t, lockcmd.ExitLocked, r.code)
	assert.Contains(t, r.stderr, "/maint locked by ops-jane")
	r = lockctl(t, ns, "lock", "--operator", "--holder", "ops-joe", "/maint")
	assert.Equal(t, lockcmd.ExitLocked, r.code)
	assert.Contains(t, r.stderr, "locked by ops-jane")

	r = lockctl(t, ns, "unlock", "/maint")
	assert.Equal(t, lockcmd.ExitLocked, r.code)
	assert.Contains(t, r.stderr, "/maint locked by ops-jane (epoch ")
	assert.Contains(t, r.stderr, "refused without --force")
	r = lockctl(t, ns, "-o", "json", "unlock", "--force", "/maint")
	require.Equal(t, 0, r.code, r.stderr)
	st = decode[lockJSON](t, r.stdout)
	assert.Equal(t, "unlocked", st.State)
	assert.Equal(t, "/maint", st.Path)

	r = lockctl(t, ns, "status", "/maint")
	assert.Regexp(t, `(?m)^State: +unlocked$`, r.stdout)
}

// TestWatch: watch prints every transition under its prefix until
// interrupted, as lines for people or JSON objects for scripts.
func TestWatch(t *testing.T) {
	ns := testcluster.Start(t)
	require.NoError(t, dial(t, ns).MkdirAll(context.Background(), "/w/a", 0))
	require.NoError(t, dial(t, ns).MkdirAll(context.Background(), "/elsewhere", 0))

	table := start(t, ns, "watch", "/w")
	jsonw := start(t, ns, "-o", "json", "watch")
	// The watch is live once it reports a transition: lock and unlock a
	// probe until both have seen one.
	for i := 0; ; i++ {
		require.Less(t, i, 50, "the watches never saw the probe")
		require.Equal(t, 0, lockctl(t, ns, "lock", "--operator", "--holder", "probe", "/w").code)
		require.Equal(t, 0, lockctl(t, ns, "unlock", "--force", "/w").code)
		if table.stdout.nextWithin(t, "/w ", 200*time.Millisecond, false) != "" &&
			jsonw.stdout.nextWithin(t, `"path":"/w"`, 200*time.Millisecond, false) != "" {
			break
		}
	}
	drain(table.stdout)
	drain(jsonw.stdout)

	require.Equal(t, 0, lockctl(t, ns, "lock", "--operator", "--holder", "ops", "/elsewhere").code)
	r := lockctl(t, ns, "lock", "--operator", "--holder", "ops", "/w/a")
	require.Equal(t, 0, r.code, r.stderr)
	epoch := regexp.MustCompile(`epoch (\d+)`).FindStringSubmatch(r.stdout)[1]
	require.Equal(t, 0, lockctl(t, ns, "unlock", "--force", "/w/a").code)

	assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3}  /w/a  unlocked -> locked  epoch `+epoch+`  holder ops  \(lock\)$`,
		table.stdout.next(t, "/w/a"))
	assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3}  /w/a  (locked|cleaning) -> unlocked.*\(force\)$`,
		table.stdout.next(t, "/w/a"))
	assert.Equal(t, 0, table.stop(t))
	t.Logf("watch /w printed:\n%s", table.stdout.text())
	assert.NotContains(t, table.stdout.text(), "/elsewhere", "transitions outside the prefix are not shown")

	type event struct {
		lockJSON
		Previous string `json:"previous"`
		Reason   string `json:"reason"`
		Time     string `json:"time"`
	}
	var seen []event
	for len(seen) < 3 {
		if ev := decode[event](t, jsonw.stdout.next(t, "{")); ev.Path != "/w" { // not a late probe
			seen = append(seen, ev)
		}
	}
	assert.Equal(t, "/elsewhere", seen[0].Path)
	assert.Equal(t, "/w/a", seen[1].Path)
	assert.Equal(t, "unlocked", seen[1].Previous)
	assert.Equal(t, "locked", seen[1].State)
	assert.Equal(t, "ops", seen[1].Holder)
	assert.Equal(t, "lock", seen[1].Reason)
	assert.Equal(t, epoch, strconv.FormatUint(seen[1].Epoch, 10))
	assert.NotEmpty(t, seen[1].Time)
	assert.Equal(t, "/w/a", seen[2].Path)
	assert.Equal(t, "unlocked", seen[2].State)
	assert.Equal(t, "force", seen[2].Reason)
	assert.Equal(t, 0, jsonw.stop(t))
}

// drain drops the lines read so far.
func drain(l *lines) {
	for {
		select {
		case <-l.ch:
		default:
			return
		}
	}
}

// TestNonAdmin: lockctl presents the admin certificate by default; with
// another (--user), its tables show a prefix of the sessions that are not
// that identity's, and forced unlocks and operator locks are refused.
func TestNonAdmin(t *testing.T) {
	ns := testcluster.Start(t)
	require.NoError(t, dial(t, ns).MkdirAll(context.Background(), "/tera/t1", 0))
	holder := start(t, ns, "lock", "--holder", "alice:1:1", "/tera/t1")
	m := grantedLine.FindStringSubmatch(holder.stdout.next(t, "locked"))
	require.NotNil(t, m, "granted line")
	session := m[4]
	shown := session[:8] + "…"

	r := lockctl(t, ns, "--user", "bfs", "list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^/tera/t1 +locked +alice:1:1 +\d+ +`+regexp.QuoteMeta(shown)+` `, r.stdout)
	assert.NotContains(t, r.stdout, session)
	r = lockctl(t, ns, "--user", "bfs", "sessions")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(shown)+` +alice:1:1 `, r.stdout)
	assert.NotContains(t, r.stdout, session)
	r = lockctl(t, ns, "list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, session, "an admin sees it whole")

	r = lockctl(t, ns, "--user", "bfs", "unlock", "--force", "/tera/t1")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "permission denied: client/bfs may not force a directory's unlock")
	r = lockctl(t, ns, "--user", "bfs", "lock", "--operator", "--holder", "ops", "/tera")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "may not take an operator lock")
	r = lockctl(t, ns, "status", "/tera/t1")
	assert.Regexp(t, `(?m)^State: +locked$`, r.stdout)
}
