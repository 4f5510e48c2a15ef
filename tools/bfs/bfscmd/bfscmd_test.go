package bfscmd_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/tools/bfs/bfscmd"
)

// unreachable is an address nothing listens on.
const unreachable = "127.0.0.1:1"

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := bfscmd.Main(context.Background(), args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// bfs runs a command against the cluster c, with its certificates.
func bfs(t *testing.T, c *testcluster.Cluster, args ...string) result {
	t.Helper()
	return run(t, append([]string{"--nameserver", c.NameServerAddr, "--certs-dir", c.CertsDir()}, args...)...)
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "bfs: no command given"},
		{[]string{"frobnicate"}, `bfs: unknown command "frobnicate" for "bfs"`},
		{[]string{"ls", "--bogus"}, "bfs ls: unknown flag: --bogus"},
		{[]string{"ls", "-x"}, "bfs ls: unknown shorthand flag: 'x' in -x"},
		{[]string{"--nameserver"}, "flag needs an argument: --nameserver"},
		{[]string{"stat"}, "bfs stat: requires at least 1 arg(s), only received 0"},
		{[]string{"mkdir"}, "bfs mkdir: requires at least 1 arg(s)"},
		{[]string{"mkdir", "-m", "8", "/a"}, `bfs mkdir: invalid mode "8"`},
		{[]string{"touchz"}, "bfs touchz: requires at least 1 arg(s)"},
		{[]string{"touchz", "-r", "-1", "/a"}, "bfs touchz: replication -1 is negative"},
		{[]string{"touchz", "-r", "three", "/a"}, `invalid argument "three"`},
		{[]string{"rm"}, "bfs rm: requires at least 1 arg(s)"},
		{[]string{"rmr"}, "bfs rmr: requires at least 1 arg(s)"},
		{[]string{"mv", "/a"}, "bfs mv: accepts 2 arg(s), received 1"},
		{[]string{"mv", "/a", "/b", "/c"}, "bfs mv: accepts 2 arg(s), received 3"},
		{[]string{"du"}, "bfs du: requires at least 1 arg(s)"},
		{[]string{"chmod", "755"}, "bfs chmod: requires at least 2 arg(s)"},
		{[]string{"chmod", "999", "/a"}, `bfs chmod: invalid mode "999": want an octal mode, 0 to 7777`},
		{[]string{"chmod", "u+x", "/a"}, `bfs chmod: invalid mode "u+x"`},
		{[]string{"chmod", "17777", "/a"}, `bfs chmod: invalid mode "17777"`},
		{[]string{"chmod", "--", "-1", "/a"}, `bfs chmod: invalid mode "-1"`},
		{[]string{"chmod", "", "/a"}, `bfs chmod: invalid mode ""`},
		{[]string{"nameserver", "extra"}, `bfs nameserver: unknown command "extra" for "bfs nameserver"`},
		{[]string{"nameserver", "--data"}, "flag needs an argument: --data"},
		{[]string{"chunkserver", "--data", "/a,,/b"}, `bfs chunkserver: --data "/a,,/b" names an empty directory`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := run(t, append([]string{"--nameserver", unreachable, "--insecure"}, tc.args...)...)
			assert.Equal(t, 2, r.code)
			assert.Contains(t, r.stderr, tc.want)
			assert.Contains(t, r.stderr, "--help' for usage.")
			assert.Empty(t, r.stdout)
		})
	}
}

func TestHelp(t *testing.T) {
	r := run(t, "--help")
	assert.Equal(t, 0, r.code)
	for _, c := range []string{"nameserver", "ls", "stat", "mkdir", "touchz", "rm", "rmr", "mv", "du", "chmod"} {
		assert.Regexp(t, `(?m)^  `+c+` `, r.stdout)
	}
	assert.Contains(t, r.stdout, "--nameserver")
	assert.Empty(t, r.stderr)

	r = run(t, "ls", "-h")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "ls [-l] [-R] [PATH...]")

	for _, daemon := range []string{"nameserver", "chunkserver", "sandbox"} {
		r = run(t, daemon, "--help")
		assert.Equal(t, 0, r.code)
		for _, f := range []string{"-v, --v", "--log-dir"} {
			assert.Contains(t, r.stdout, f, daemon)
		}
		// glog's other flags are out of the way, in bfs help logging.
		for _, f := range []string{"--vmodule", "--logtostderr", "--alsologtostderr", "--stderrthreshold",
			"--log_dir", "--log_link", "--logbuflevel", "--log_backtrace_at"} {
			assert.NotContains(t, r.stdout, f, daemon)
		}
	}
	r = run(t, "nameserver", "--help")
	for _, f := range []string{"--listen", "--metrics", "--status-public"} {
		assert.Contains(t, r.stdout, f)
	}

	r = run(t, "help", "logging")
	assert.Equal(t, 0, r.code)
	for _, f := range []string{"-v N", "--log-dir DIR", "--log_dir", "--vmodule", "--logtostderr", "--alsologtostderr",
		"--stderrthreshold", "--log_link", "--logbuflevel", "--log_backtrace_at"} {
		assert.Contains(t, r.stdout, f)
	}
	assert.Contains(t, run(t, "--help").stdout, "logging")
}

// TestHiddenLogFlagsWork: a hidden glog flag is still taken.
func TestHiddenLogFlagsWork(t *testing.T) {
	r := run(t, "nameserver", "--data", t.TempDir(), "--vmodule", "bfscmd=0", "--listen", "nonsense", "--metrics", "", "--insecure")
	assert.Equal(t, 1, r.code, r.stderr) // got past the flags, to the listener
	assert.Contains(t, r.stderr, "nonsense")
}

// TestOddInputNeverPanics feeds malformed paths and arguments; every one
// ends in a message and an exit code.
func TestOddInputNeverPanics(t *testing.T) {
	for _, args := range [][]string{
		{"ls", ""}, {"ls", "\x00"}, {"ls", "-lR", "relative"}, {"stat", "/../x"},
		{"mkdir", "-p", ""}, {"touchz", "//"}, {"rm", "/"}, {"rmr", ""},
		{"mv", "", ""}, {"mv", "/", "/"}, {"du", "-"}, {"chmod", "0", "\x00"},
		{"--", "ls"}, {"-"}, {"ls", "--", "-l"},
	} {
		r := run(t, append([]string{"--nameserver", unreachable, "--insecure"}, args...)...)
		assert.Contains(t, []int{1, 2}, r.code, "%q", args)
		assert.True(t, strings.HasPrefix(r.stderr, "bfs"), "%q: stderr %q", args, r.stderr)
	}
}

func TestInvalidPathIsFileSystemError(t *testing.T) {
	r := run(t, "--nameserver", unreachable, "--insecure", "mkdir", "relative")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "bfs: mkdir relative: invalid path: \"relative\" is not absolute\n", r.stderr)
}

func TestUnreachableNameserver(t *testing.T) {
	r := run(t, "--nameserver", unreachable, "--insecure", "ls", "/")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "bfs: stat /: service unavailable")
	assert.Contains(t, r.stderr, "connection refused")
}

var (
	dirLine  = regexp.MustCompile(`^d[rwx-]{9} +- +\d+ \d{4}-\d\d-\d\d \d\d:\d\d (/\S*)$`)
	fileLine = regexp.MustCompile(`^-[rwx-]{9} +(\d+/)?\d+ +\d+ \d{4}-\d\d-\d\d \d\d:\d\d (/\S*)$`)
)

func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func TestFileCommands(t *testing.T) {
	ns := testcluster.Start(t)
	ok := func(args ...string) string {
		t.Helper()
		r := bfs(t, ns, args...)
		require.Equal(t, 0, r.code, "bfs %q: %s", args, r.stderr)
		require.Empty(t, r.stderr)
		return r.stdout
	}
	fail := func(args ...string) string {
		t.Helper()
		r := bfs(t, ns, args...)
		require.Equal(t, 1, r.code, "bfs %q succeeded: %s", args, r.stdout)
		return r.stderr
	}

	assert.Empty(t, ok("mkdir", "-p", "/a/b/c"))
	assert.Empty(t, ok("mkdir", "-p", "/a/b"), "mkdir -p of an existing directory")
	assert.Equal(t, "bfs: mkdir /a: file exists\n", fail("mkdir", "/a"))
	assert.Equal(t, "bfs: mkdir /x/y: no such file or directory\n", fail("mkdir", "/x/y"))
	ok("mkdir", "-m", "700", "/private")

	ok("touchz", "/a/f", "/a/b/g")
	ok("touchz", "/a/f") // an existing empty file is fine
	assert.Equal(t, "bfs: touch /a/b: is a directory\n", fail("touchz", "/a/b"))

	assert.Equal(t, "/a/b\n/a/f\n", ok("ls", "/a"))
	assert.Equal(t, "/a/f\n", ok("ls", "/a/f"), "ls of a file shows the file")
	assert.Equal(t, "/a\n/private\n", ok("ls"), "ls defaults to the root")
	assert.Equal(t, "/a\n/a/b\n/a/b/c\n/a/b/g\n/a/f\n/private\n", ok("ls", "-R", "/"))

	long := lines(ok("ls", "-l", "/a"))
	require.Len(t, long, 2)
	assert.Regexp(t, dirLine, long[0])
	assert.True(t, strings.HasPrefix(long[0], "drwxr-xr-x "), long[0])
	assert.True(t, strings.HasSuffix(long[0], " /a/b"), long[0])
	assert.Regexp(t, fileLine, long[1])
	assert.True(t, strings.HasPrefix(long[1], "-rw-r--r-- "), long[1])
	assert.True(t, strings.HasSuffix(long[1], " /a/f"), long[1])

	recursive := lines(ok("ls", "-lR", "/a"))
	require.Len(t, recursive, 4)
	assert.Regexp(t, dirLine, recursive[1])
	assert.True(t, strings.HasSuffix(recursive[1], " /a/b/c"), recursive[1])

	st := ok("stat", "/a/f")
	assert.Regexp(t, `(?m)^Path: +/a/f$`, st)
	assert.Regexp(t, `(?m)^Type: +file$`, st)
	assert.Regexp(t, `(?m)^Mode: +-rw-r--r-- \(0644\)$`, st)
	assert.Regexp(t, `(?m)^Size: +0$`, st)
	st = ok("stat", "/private")
	assert.Regexp(t, `(?m)^Type: +directory$`, st)
	assert.Regexp(t, `(?m)^Mode: +drwx------ \(0700\)$`, st)
	assert.Regexp(t, `(?m)^Lock: +unlocked$`, st)

	// mv: a rename, or a move into an existing directory.
	ok("mv", "/a/f", "/a/h")
	ok("mv", "/a/h", "/a/b")
	assert.Equal(t, "/a/b/c\n/a/b/g\n/a/b/h\n", ok("ls", "/a/b"))
	assert.Equal(t, "bfs: rename /a /a/b/c/a: invalid argument: cannot move /a into its own subtree\n",
		fail("mv", "/a", "/a/b/c"))
	assert.Contains(t, fail("mv", "/nope", "/x"), "bfs: rename /nope /x: no such file or directory")

	du := lines(ok("du", "/a", "/"))
	require.Len(t, du, 3)
	assert.Regexp(t, `^ *BYTES +FILES +DIRS +PATH$`, du[0])
	assert.Regexp(t, `^ *0 +2 +3 +/a$`, du[1])
	assert.Regexp(t, `^ *0 +2 +5 +/$`, du[2])

	ok("chmod", "750", "/a", "/a/b/g")
	assert.True(t, strings.HasPrefix(ok("ls", "-l", "/"), "drwxr-x--- "))
	assert.Regexp(t, `(?m)^Mode: +-rwxr-x--- \(0750\)$`, ok("stat", "/a/b/g"))
	assert.Equal(t, "bfs: chmod /nope: no such file or directory\n", fail("chmod", "644", "/nope"))
	ok("chmod", "1777", "/private")
	assert.Regexp(t, `(?m)^Mode: +dtrwxrwxrwx \(1777\)$`, ok("stat", "/private"))

	// rm deletes files only, and carries on past a failed path.
	assert.Equal(t, "bfs: remove /a/b: is a directory\n", fail("rm", "/a/b"))
	assert.Equal(t, "bfs: remove /nope: no such file or directory\n", fail("rm", "/nope", "/a/b/h"))
	assert.Equal(t, "/a/b/c\n/a/b/g\n", ok("ls", "/a/b"))

	// rmr deletes a file too, and whole trees.
	ok("rmr", "/a/b/g")
	ok("rmr", "/a", "/private")
	assert.Empty(t, ok("ls", "/"))
	assert.Equal(t, "bfs: rmdir /a: no such file or directory\n", fail("rmr", "/a"))
	assert.Equal(t, "bfs: stat /a: no such file or directory\n", fail("ls", "/a"))
	assert.Equal(t, "bfs: du /a: no such file or directory\n", fail("du", "/a"))
}

func TestNameserverFromEnvironment(t *testing.T) {
	c := testcluster.Start(t)
	t.Setenv("BFS_NAMESERVER", c.NameServerAddr)
	t.Setenv("BFS_CERTS_DIR", c.CertsDir())
	r := run(t, "mkdir", "/from-env")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "/from-env\n", run(t, "ls", "/").stdout)

	// The flag beats the environment.
	r = run(t, "--nameserver", unreachable, "ls", "/")
	assert.Equal(t, 1, r.code)
}

// daemonRun is a daemon command (nameserver, sandbox) run in-process.
type daemonRun struct {
	out    *bufio.Reader
	stderr bytes.Buffer
	cancel context.CancelFunc
	exited chan int
}

// startDaemon runs bfs args until stop; out reads what it prints.
func startDaemon(args ...string) *daemonRun {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	d := &daemonRun{out: bufio.NewReader(pr), cancel: cancel, exited: make(chan int, 1)}
	go func() {
		defer pw.Close()
		d.exited <- bfscmd.Main(ctx, args, pw, &d.stderr)
	}()
	return d
}

// stop stops the daemon as a signal would, after the rest of what it
// prints is discarded, and requires it to exit 0.
func (d *daemonRun) stop(t *testing.T) {
	t.Helper()
	go func() { _, _ = io.Copy(io.Discard, d.out) }()
	d.cancel()
	select {
	case code := <-d.exited:
		assert.Equal(t, 0, code)
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not stop")
	}
}

// TestNameserverCommand makes certificates with bfs cert, runs the daemon
// in-process with them, uses it, sees a plaintext client refused, and
// stops it by cancelling its context as a signal would.
func TestNameserverCommand(t *testing.T) {
	certsDir, caKey := filepath.Join(t.TempDir(), "certs"), filepath.Join(t.TempDir(), "ca.key")
	for _, args := range [][]string{
		{"cert", "create-ca"},
		{"cert", "create-node", "127.0.0.1", "localhost", "--role", "nameserver"},
		{"cert", "create-client", "bfs"},
	} {
		r := run(t, append(args, "--certs-dir", certsDir, "--ca-key", caKey)...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stdout, "wrote "+certsDir)
	}
	data := t.TempDir()
	d := startDaemon("nameserver", "--data", data, "--listen", "127.0.0.1:0", "--metrics", "", "--certs-dir", certsDir)
	first, err := d.out.ReadString('\n')
	if err != nil {
		t.Fatalf("no listening line (%v); exit code %d, stderr:\n%s", err, <-d.exited, d.stderr.String())
	}
	m := regexp.MustCompile(`^nameserver listening on (127\.0\.0\.1:\d+) \(data (.*)\)\n$`).FindStringSubmatch(first)
	require.NotNil(t, m, "first line %q", first)
	assert.Equal(t, data, m[2])

	at := []string{"--nameserver", m[1], "--certs-dir", certsDir}
	require.Equal(t, 0, run(t, append(at, "mkdir", "-p", "/x/y")...).code)
	assert.Equal(t, "/x/y\n", run(t, append(at, "ls", "/x")...).stdout)
	r := run(t, "--nameserver", m[1], "--insecure", "ls", "/x")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "unavailable")
	d.stop(t)
}

func TestNameserverCommandBadListenAddress(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := bfscmd.Main(context.Background(), []string{"nameserver", "--data", t.TempDir(), "--listen", "nonsense", "--metrics", "", "--insecure"}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Regexp(t, `^bfs: listen tcp: .*nonsense`, stderr.String())
	assert.Empty(t, stdout.String())
}
