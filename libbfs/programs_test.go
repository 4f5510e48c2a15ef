package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/cbuild"
)

// The C and C++ test programs (testdata/) run as child processes against
// an in-process cluster, in each build of the library that builds them:
//
//   - asan: libbfs.so, the programs built with -fsanitize=address,undefined
//     (memory errors and leaks on the C side, a misuse of what the library
//     returns, are fatal there);
//   - ubsan: the same with -fsanitize=undefined alone, for the Tera plugin
//     test: ASan refuses dlopen's RTLD_DEEPBIND, which Tera's loader uses,
//     so the plugin is loaded with Tera's flags exactly only here;
//   - race (only when the tests run with -race): the race-checked
//     libbfs.a linked into non-PIE programs, so the library's Go side is
//     checked for data races while C threads call it. The two cannot be
//     combined: Go's race runtime and ASan each want the process's shadow
//     memory. Nor can it be a shared object, so the plugin is not built
//     there.

var programsDir string // where the libraries and programs are built

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "libbfs-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	programsDir = dir
	code := m.Run()
	if code == 0 {
		// glog starts its flush daemon at package init; it is not ours.
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// variant is one build of the library with the programs built against it.
type variant struct {
	name  string
	mode  cbuild.Mode
	flags []string
	env   []string
}

func variants() []variant {
	vs := []variant{{
		name:  "asan",
		mode:  cbuild.Shared,
		flags: []string{"-O1", "-fno-omit-frame-pointer", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"},
		env:   []string{"ASAN_OPTIONS=detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS=print_stacktrace=1"},
	}, {
		name:  "ubsan",
		mode:  cbuild.Shared,
		flags: []string{"-O1", "-fno-omit-frame-pointer", "-fsanitize=undefined", "-fno-sanitize-recover=undefined"},
		env:   []string{"UBSAN_OPTIONS=print_stacktrace=1"},
	}}
	if raceBuild {
		vs = append(vs, variant{
			name:  "race",
			mode:  cbuild.RaceArchive,
			flags: []string{"-O1"},
			env:   []string{"GORACE=halt_on_error=1"},
		})
	}
	return vs
}

// program is a test program, or the plugin one loads.
type program struct {
	name    string
	sources []string // libbfs-relative
	kind    cbuild.Kind
	// variants are the builds it is made in (and run in, unless a plugin).
	variants []string
}

// pluginName is the C++ adapter built as Tera's DFS plugin.
const pluginName = "libbfs_dfs.so"

var programs = []program{
	{name: "api_test", sources: []string{"testdata/api_test.c"}, variants: []string{"asan", "race"}},
	{name: "dfs_test", sources: []string{"testdata/dfs_test.cc", "cpp/bfs_dfs.cc"}, variants: []string{"asan", "race"}},
	{name: pluginName, sources: []string{"cpp/bfs_dfs.cc"}, kind: cbuild.Plugin, variants: []string{"asan", "ubsan"}},
	{name: "tera_plugin_test", sources: []string{"testdata/tera_plugin_test.cc"}, kind: cbuild.Loader, variants: []string{"asan", "ubsan"}},
}

// builds reports whether variant v builds p.
func (p program) builds(v variant) bool { return slices.Contains(p.variants, v.name) }

// built builds each variant's library and programs once per test binary.
var built struct {
	once sync.Once
	err  error
}

// buildPrograms builds every variant, or skips the test when the system
// has no C compiler (.ci/run installs one, so CI never skips).
func buildPrograms(t *testing.T) {
	t.Helper()
	if err := cbuild.Compilers(); err != nil {
		t.Skipf("the C API tests need gcc and g++: %v", err)
	}
	if os.Getenv("CGO_ENABLED") == "0" {
		t.Skip("the C API tests need cgo, and CGO_ENABLED=0")
	}
	built.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		for _, v := range variants() {
			if built.err = buildVariant(ctx, v); built.err != nil {
				return
			}
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
}

func buildVariant(ctx context.Context, v variant) error {
	dir := filepath.Join(programsDir, v.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lib, err := cbuild.Build(ctx, dir, v.mode)
	if err != nil {
		return err
	}
	for _, p := range programs {
		if !p.builds(v) {
			continue
		}
		c := cbuild.Program{Out: filepath.Join(dir, p.name), Sources: p.sources, Flags: v.flags, Kind: p.kind}
		if err := cbuild.Compile(ctx, lib, c); err != nil {
			return err
		}
	}
	return nil
}

// runProgram runs program name in every variant that builds it against a
// new cluster (secure, as a sandbox is, started with opts), each under its
// own root, and fails the test unless it exits 0 having printed PASS. Its
// output goes to the test log. The program finds the cluster in
// BFS_NAMESERVER (every nameserver, the leader last, so that a client
// that did not follow the group would fail), its certificates in
// BFS_CERTS_DIR, and the variant's plugin in BFS_DFS_PLUGIN.
func runProgram(t *testing.T, name string, opts ...testcluster.Option) {
	buildPrograms(t)
	c := testcluster.Start(t, append([]testcluster.Option{testcluster.WithChunkservers(3)}, opts...)...)
	i := slices.IndexFunc(programs, func(p program) bool { return p.name == name })
	for _, v := range variants() {
		if !programs[i].builds(v) {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			dir := filepath.Join(programsDir, v.name)
			cmd := exec.CommandContext(ctx, filepath.Join(dir, name))
			cmd.Env = append(os.Environ(), v.env...)
			cmd.Env = append(cmd.Env, "BFS_NAMESERVER="+nameservers(c), "BFS_TEST_ROOT=/"+name+"-"+v.name,
				"BFS_CERTS_DIR="+c.CertsDir(), "BFS_DFS_PLUGIN="+filepath.Join(dir, pluginName))
			check(t, name+" ("+v.name+")", cmd, "PASS")
		})
	}
}

// nameservers is the cluster's nameserver list, its leader last.
func nameservers(c *testcluster.Cluster) string {
	addrs := c.NameServerAddrs()
	leader := addrs[c.LeaderIndex()]
	addrs = slices.DeleteFunc(addrs, func(a string) bool { return a == leader })
	return strings.Join(append(addrs, leader), ",")
}

// check runs cmd and fails the test unless it exits 0 having printed the
// line pass (on stdout or stderr). Its output goes to the test log.
func check(t *testing.T, name string, cmd *exec.Cmd, pass string) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	passed := false
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		t.Logf("%s: %s", name, sc.Text())
		passed = passed || sc.Text() == pass
		if strings.Contains(sc.Text(), "WARNING: DATA RACE") {
			t.Errorf("%s reports a data race", name)
		}
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Fatalf("%s exited with %d", name, exit.ExitCode())
	case err != nil:
		t.Fatalf("%s: %v", name, err)
	case !passed:
		t.Fatalf("%s exited 0 without printing %s", name, pass)
	}
}

// TestCAPI runs testdata/api_test.c: every call of bfs.h, lock loss and
// fencing, bad calls, many threads.
func TestCAPI(t *testing.T) { runProgram(t, "api_test") }

// TestDfsAdapter runs testdata/dfs_test.cc: the C++ adapter linked in, its
// conf parsing and what it offers beyond Tera's interface (the lost-lock
// handler, lock status), and many threads sharing it.
func TestDfsAdapter(t *testing.T) { runProgram(t, "dfs_test") }

// TestTeraPlugin runs testdata/tera_plugin_test.cc: the adapter built as
// libbfs_dfs.so, loaded and called as Tera loads and calls a DFS plugin
// (its ABI, open flags and errno), and the failover of a tablet between
// tablet-server processes, a holder killed with SIGKILL included. The
// cluster's nameservers are a group of three: the plugin takes their list
// and follows the leader.
func TestTeraPlugin(t *testing.T) {
	runProgram(t, "tera_plugin_test", testcluster.WithNameServers(3))
}

// TestPython runs python/test_bfs.py, the test of the ctypes binding,
// against libbfs.so.
func TestPython(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("the Python binding's test needs python3")
	}
	buildPrograms(t)
	c := testcluster.Start(t, testcluster.WithChunkservers(3))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "-v", "test_bfs")
	cmd.Dir = "python"
	cmd.Env = append(os.Environ(), "LIBBFS="+filepath.Join(programsDir, "asan", "libbfs.so"),
		"PYTHONDONTWRITEBYTECODE=1", "BFS_NAMESERVER="+nameservers(c), "BFS_CERTS_DIR="+c.CertsDir(), "BFS_TEST_ROOT=/python")
	check(t, "test_bfs.py", cmd, "OK")
}
