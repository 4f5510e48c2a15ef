package lockcmd_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/tools/lockctl/lockcmd"
)

// TestUnlockMissingDirectory: unlocking a path that does not exist is not
// "unlocked": it exits 5 and says the path is not there, forced or not.
func TestUnlockMissingDirectory(t *testing.T) {
	ns := testcluster.Start(t)
	require.NoError(t, dial(t, ns).Mkdir(context.Background(), "/present", 0))
	for _, args := range [][]string{
		{"unlock", "--force", "/nonexistent"},
		{"unlock", "/nonexistent"},
		{"unlock", "--force", "--wait", "/nonexistent"},
		{"unlock", "--force", "/present/nonexistent"},
	} {
		r := lockctl(t, ns, args...)
		assert.Equal(t, lockcmd.ExitNotFound, r.code, "%q: stdout %q", args, r.stdout)
		assert.Empty(t, r.stdout, "%q", args)
		assert.Regexp(t, `^lockctl: unlock /\S*nonexistent: .*no such file or directory.*\n$`, r.stderr, "%q", args)
	}
	r := lockctl(t, ns, "unlock", "--force", "/present")
	assert.Equal(t, lockcmd.ExitOK, r.code, r.stderr)
	assert.Equal(t, "unlocked /present\n", r.stdout, "an existing unlocked directory is reported as such")
}

// noControl fails the test if s holds a control character other than the
// newlines lockctl prints itself.
func noControl(t *testing.T, what, s string) {
	t.Helper()
	for _, r := range s {
		if r != '\n' && (r < 0x20 || r == 0x7f) {
			t.Errorf("%s prints the control character %U raw: %q", what, r, s)
			return
		}
	}
}

// TestHolderWithTerminalEscapesIsRefused: the holder of the issue, which
// would make a listing show a locked directory as unlocked, is refused
// for an operator lock and for a session, and nothing gets locked.
func TestHolderWithTerminalEscapesIsRefused(t *testing.T) {
	ns := testcluster.Start(t)
	require.NoError(t, dial(t, ns).Mkdir(context.Background(), "/tablet9", 0))
	const evil = "evil\x1b[2K\r/tablet9 unlocked"
	for _, args := range [][]string{
		{"lock", "--operator", "--holder", evil, "/tablet9"},
		{"lock", "--holder", evil, "/tablet9"},
	} {
		r := lockctl(t, ns, args...)
		assert.Equal(t, lockcmd.ExitUsage, r.code, "%q: stdout %q", args, r.stdout)
		noControl(t, "the refusal", r.stderr)
		assert.Contains(t, r.stderr, "holder")
	}
	r := lockctl(t, ns, "list")
	require.Equal(t, lockcmd.ExitOK, r.code, r.stderr)
	assert.Equal(t, "no directory locks at or under /\n", r.stdout)
}

// TestLockOutputEscapesNames: a directory whose name carries terminal
// escapes (the namespace takes any character but NUL) shows escaped in
// every line lockctl prints about it.
func TestLockOutputEscapesNames(t *testing.T) {
	ns := testcluster.Start(t)
	const dir = "/tablet9\x1b[2K\rtablet8"
	const escaped = `/tablet9\x1b[2K\rtablet8`
	require.NoError(t, dial(t, ns).Mkdir(context.Background(), dir, 0))
	check := func(what string, r result, code int) string {
		t.Helper()
		assert.Equal(t, code, r.code, "%s: %s", what, r.stderr)
		noControl(t, what, r.stdout)
		noControl(t, what, r.stderr)
		return r.stdout + r.stderr
	}

	out := check("history before any lock", lockctl(t, ns, "history", dir), lockcmd.ExitOK)
	assert.Equal(t, "no past locks of "+escaped+"\n", out)

	watch := start(t, ns, "watch", "/")
	watch.stderr.next(t, "watching")
	holder := start(t, ns, "lock", "--holder", "tablet server 9", dir)
	granted := holder.stdout.next(t, "locked")
	noControl(t, "the granted line", granted)
	assert.Contains(t, granted, "locked "+escaped+": epoch")
	line := watch.stdout.next(t, "-> locked")
	noControl(t, "watch", line)
	assert.Contains(t, line, escaped+"  unlocked -> locked")

	assert.Contains(t, check("list", lockctl(t, ns, "list"), lockcmd.ExitOK), escaped+"  locked")
	assert.Regexp(t, `(?m)^Path: +`+regexp.QuoteMeta(escaped)+`$`, check("status", lockctl(t, ns, "status", dir), lockcmd.ExitOK))
	assert.Contains(t, check("sessions", lockctl(t, ns, "sessions"), lockcmd.ExitOK), escaped)
	refused := check("a refused unlock", lockctl(t, ns, "unlock", dir), lockcmd.ExitLocked)
	assert.Contains(t, refused, escaped+" locked by tablet server 9")

	out = check("forced unlock", lockctl(t, ns, "unlock", "--force", dir), lockcmd.ExitOK)
	assert.Regexp(t, `^unlocked `+regexp.QuoteMeta(escaped)+` \(epoch \d+\)\n$`, out)
	assert.Equal(t, lockcmd.ExitLost, holder.wait(t))
	noControl(t, "the lost lock", holder.stderr.text())
	assert.Contains(t, holder.stderr.text(), "lock on "+escaped)
	line = watch.stdout.next(t, "-> unlocked")
	noControl(t, "watch", line)
	assert.Contains(t, line, escaped)

	out = check("history", lockctl(t, ns, "history", dir), lockcmd.ExitOK)
	assert.Contains(t, out, "tablet server 9")
}
