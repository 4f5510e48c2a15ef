package lockcmd_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/tools/lockctl/lockcmd"
)

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "lockctl: no command given"},
		{[]string{"frobnicate"}, `lockctl: unknown command "frobnicate" for "lockctl"`},
		{[]string{"-o", "xml", "list"}, `invalid argument "xml" for "-o, --output" flag: want table or json`},
		{[]string{"--output=yaml", "status", "/a"}, `invalid argument "yaml" for "-o, --output" flag: want table or json`},
		{[]string{"--nameserver"}, "flag needs an argument: --nameserver"},
		{[]string{"lock"}, "lockctl lock: accepts 1 arg(s), received 0"},
		{[]string{"lock", "/a", "/b"}, "lockctl lock: accepts 1 arg(s), received 2"},
		{[]string{"lock", "relative"}, `lockctl lock: invalid path: "relative" is not absolute`},
		{[]string{"lock", ""}, "lockctl lock: invalid path: empty path"},
		{[]string{"lock", "/a/../b"}, `lockctl lock: invalid path: "/a/../b" contains ".."`},
		{[]string{"lock", "/a\x00"}, "lockctl lock: invalid path: contains a NUL byte"},
		{[]string{"lock", "--bogus", "/a"}, "lockctl lock: unknown flag: --bogus"},
		{[]string{"lock", "--timeout", "1s", "/a"}, "lockctl lock: --timeout bounds --wait; give --wait too"},
		{[]string{"lock", "--wait", "--timeout", "-1s", "/a"}, "lockctl lock: --timeout -1s is negative"},
		{[]string{"lock", "--wait", "--timeout", "soon", "/a"}, `invalid argument "soon" for "--timeout" flag`},
		{[]string{"lock", "--operator", "/a"}, "lockctl lock: --operator needs --holder NAME"},
		{[]string{"lock", "--operator", "--holder", "x", "--wait", "/a"}, "lockctl lock: --wait is not supported with --operator"},
		{[]string{"lock", "--operator", "--holder", "x", "--ttl", "5s", "/a"}, "lockctl lock: --ttl makes no sense with --operator"},
		{[]string{"lock", "--ttl", "0", "/a"}, "lockctl lock: --ttl 0s: want at least 1ms"},
		{[]string{"unlock"}, "lockctl unlock: accepts 1 arg(s), received 0"},
		{[]string{"unlock", "--epoch", "-1", "/a"}, `invalid argument "-1" for "--epoch" flag: an epoch is not negative`},
		{[]string{"unlock", "--epoch", "0", "/a"}, `invalid argument "0" for "--epoch" flag: epochs start at 1`},
		{[]string{"unlock", "--epoch", "seven", "/a"}, `invalid argument "seven" for "--epoch" flag: want a lock epoch`},
		{[]string{"unlock", "--epoch", "99999999999999999999", "/a"}, `invalid argument "99999999999999999999" for "--epoch" flag`},
		{[]string{"unlock", "--timeout", "1s", "/a"}, "lockctl unlock: --timeout bounds --wait; give --wait too"},
		{[]string{"unlock", "--wait", "--timeout", "-5ms", "/a"}, "lockctl unlock: --timeout -5ms is negative"},
		{[]string{"unlock", "x"}, `lockctl unlock: invalid path: "x" is not absolute`},
		{[]string{"status"}, "lockctl status: accepts 1 arg(s), received 0"},
		{[]string{"status", "a/b"}, `lockctl status: invalid path: "a/b" is not absolute`},
		{[]string{"list", "--state", "open", "/"}, `invalid argument "open" for "--state" flag: want locked or cleaning`},
		{[]string{"list", "--state", "unlocked"}, `invalid argument "unlocked" for "--state" flag: want locked or cleaning`},
		{[]string{"list", "/a", "/b"}, "lockctl list: accepts at most 1 arg(s), received 2"},
		{[]string{"list", "rel"}, `lockctl list: invalid path: "rel" is not absolute`},
		{[]string{"watch", "rel"}, `lockctl watch: invalid path: "rel" is not absolute`},
		{[]string{"watch", "/a", "/b"}, "lockctl watch: accepts at most 1 arg(s), received 2"},
		{[]string{"history"}, "lockctl history: accepts 1 arg(s), received 0"},
		{[]string{"history", "/.."}, `lockctl history: invalid path: "/.." contains ".."`},
		{[]string{"sessions", "/a"}, `lockctl sessions: unknown command "/a" for "lockctl sessions"`},
		{[]string{"list", "--limit", "-1"}, "lockctl list: --limit must not be negative, got -1"},
		{[]string{"list", "--page-size", "-3"}, "lockctl list: --page-size must not be negative, got -3"},
		{[]string{"sessions", "--limit", "-2"}, "lockctl sessions: --limit must not be negative, got -2"},
		{[]string{"history", "--page-size", "-1", "/a"}, "lockctl history: --page-size must not be negative, got -1"},
		{[]string{"list", "--limit", "ten"}, `invalid argument "ten" for "--limit" flag`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := plain(t, unreachable, tc.args...)
			assert.Equal(t, lockcmd.ExitUsage, r.code)
			assert.Contains(t, r.stderr, tc.want)
			assert.Contains(t, r.stderr, "--help' for usage.")
			assert.Empty(t, r.stdout)
		})
	}
}

func TestHelp(t *testing.T) {
	r := run(t, "--help")
	assert.Equal(t, 0, r.code)
	for _, c := range []string{"lock", "unlock", "status", "list", "watch", "history", "sessions"} {
		assert.Regexp(t, `(?m)^  `+c+` `, r.stdout)
	}
	assert.Contains(t, r.stdout, "--nameserver")
	assert.Contains(t, r.stdout, "-o, --output format")
	assert.Contains(t, r.stdout, "6  lock lost while held")
	assert.Empty(t, r.stderr)

	for _, c := range []string{"lock", "unlock"} {
		r = run(t, c, "--help")
		assert.Equal(t, 0, r.code)
		assert.Contains(t, r.stdout, "Exit codes:")
		assert.Contains(t, r.stdout, "3  locked by another holder")
	}
	r = run(t, "unlock", "-h")
	for _, f := range []string{"--force", "--wait", "--timeout", "--epoch N"} {
		assert.Contains(t, r.stdout, f)
	}
}

// TestOddInputNeverPanics: every malformed invocation ends in a message
// and an exit code.
func TestOddInputNeverPanics(t *testing.T) {
	for _, args := range [][]string{
		{"lock", "//"}, {"lock", "--operator", "--holder", "", "/a"}, {"unlock", "--force", "/"},
		{"status", "/"}, {"list", ""}, {"history", "/nope"}, {"watch", "\x00"}, {"-", "x"}, {"--", "lock"},
		{"unlock", "--epoch", "", "/a"}, {"list", "--state", ""}, {"-o", "", "sessions"},
	} {
		r := plain(t, unreachable, args...)
		assert.Contains(t, []int{1, 2}, r.code, "%q: %s", args, r.stderr)
		assert.True(t, strings.HasPrefix(r.stderr, "lockctl"), "%q: stderr %q", args, r.stderr)
	}
}

func TestUnreachableNameserver(t *testing.T) {
	for _, args := range [][]string{
		{"status", "/a"}, {"list"}, {"sessions"}, {"history", "/a"}, {"unlock", "--force", "/a"}, {"lock", "/a"},
	} {
		r := plain(t, unreachable, args...)
		assert.Equal(t, lockcmd.ExitFailure, r.code, "%q", args)
		assert.Contains(t, r.stderr, "service unavailable", "%q", args)
	}
	// sdk.WatchDirLocks cancels its context before it classifies the
	// error, so the reason reads "context canceled" for now; the exit code
	// is right.
	r := plain(t, unreachable, "watch")
	assert.Equal(t, lockcmd.ExitFailure, r.code)
	assert.True(t, strings.HasPrefix(r.stderr, "lockctl: watch locks /: "), r.stderr)
}

func TestNotFound(t *testing.T) {
	ns := testcluster.Start(t)
	require.NoError(t, dial(t, ns).Touch(context.Background(), "/file"))
	for _, args := range [][]string{
		{"status", "/nope"}, {"history", "/nope"}, {"lock", "/nope"}, {"lock", "--operator", "--holder", "x", "/nope"},
	} {
		r := lockctl(t, ns, args...)
		assert.Equal(t, lockcmd.ExitNotFound, r.code, "%q: %s", args, r.stderr)
		assert.Contains(t, r.stderr, "no such file or directory", "%q", args)
	}
	r := lockctl(t, ns, "lock", "/file")
	assert.Equal(t, lockcmd.ExitFailure, r.code)
	assert.Contains(t, r.stderr, "not a directory")
	r = lockctl(t, ns, "status", "/file")
	assert.Equal(t, lockcmd.ExitFailure, r.code)
	assert.Contains(t, r.stderr, "not a directory")
}
