package benchcmd

import (
	"bytes"
	"context"
	"encoding/csv"
	"image/png"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/bfs-go/bfs/cluster/sandbox"
	"github.com/bfs-go/bfs/internal/cbuild"
	"github.com/bfs-go/bfs/sdk"
)

// These tests run every benchmark with tiny parameters against an
// in-process cluster. They check that the measurements happen and are
// reported (the rows, no errors, figures that are positive), never how
// fast anything is.

// run runs bfsbench with args and --csv, and returns stdout and the CSV
// records by workload and param.
func run(t *testing.T, args ...string) (string, map[string][]string) {
	t.Helper()
	csvPath := filepath.Join(t.TempDir(), "out.csv")
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), append(args, "--csv", csvPath), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("bfsbench %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout.String(), stderr.String())
	}
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) == 0 || strings.Join(records[0], ",") != strings.Join(csvHeader, ",") {
		t.Fatalf("CSV header %v", records)
	}
	rows := map[string][]string{}
	for _, rec := range records[1:] {
		rows[rec[0]+"|"+rec[1]+"|"+rec[9]] = rec
	}
	return stdout.String(), rows
}

// want checks the row of workload name with clients and param: no errors,
// and a positive figure in column col (by CSV header name).
func want(t *testing.T, rows map[string][]string, name, clients, param string, cols ...string) {
	t.Helper()
	rec, ok := rows[name+"|"+clients+"|"+param]
	if !ok {
		t.Errorf("no row %q clients %s param %q; have %v", name, clients, param, keys(rows))
		return
	}
	if rec[3] != "0" {
		t.Errorf("row %s %s %s: %s errors", name, clients, param, rec[3])
	}
	for _, col := range cols {
		i := indexOf(csvHeader, col)
		if v, err := strconv.ParseFloat(rec[i], 64); err != nil || v <= 0 {
			t.Errorf("row %s %s %s: %s = %q, want > 0", name, clients, param, col, rec[i])
		}
	}
}

// checkPNG checks that path is a PNG of the charts' size.
func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if cfg.Width != 960 || cfg.Height != 600 {
		t.Errorf("%s: %dx%d, want 960x600", path, cfg.Width, cfg.Height)
	}
}

func keys(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	panic(x)
}

func TestMeta(t *testing.T) {
	t.Parallel()
	png := filepath.Join(t.TempDir(), "meta.png")
	out, rows := run(t, "meta", "--clients", "1,2", "--duration", "200ms", "--plot", png)
	checkPNG(t, png)
	for _, n := range []string{"1", "2"} {
		for _, name := range []string{"create", "create+delete", "create+delete (locked dir)", "stat"} {
			want(t, rows, name, n, "", "ops_per_s", "p50_ms", "p99_ms")
		}
		want(t, rows, "locked/unlocked create+delete", n, "", "value")
	}
	if !strings.Contains(out, "locked/unlocked create+delete") || !strings.Contains(out, "vs 1 client") {
		t.Errorf("table:\n%s", out)
	}
}

func TestLocks(t *testing.T) {
	t.Parallel()
	png := filepath.Join(t.TempDir(), "locks.png")
	_, rows := run(t, "locks", "--clients", "1,2", "--duration", "200ms", "--plot", png)
	want(t, rows, "lock+unlock", "1", "", "ops_per_s", "p50_ms", "p90_ms", "p99_ms")
	want(t, rows, "lock+unlock", "2", "", "ops_per_s", "p50_ms", "p90_ms", "p99_ms")
	if _, ok := rows["lock+unlock (etcd)|1|"]; ok {
		t.Error("etcd measured without --vs-etcd")
	}
	checkPNG(t, png)
}

func TestIO(t *testing.T) {
	t.Parallel()
	png := filepath.Join(t.TempDir(), "io.png")
	out, rows := run(t, "io", "--size", "2MiB", "--trials", "2", "--plot", png)
	checkPNG(t, png)
	for _, p := range []string{"trial 1", "trial 2", "median"} {
		for _, name := range []string{"raw write", "raw read", "put", "get"} {
			want(t, rows, name, "1", p, "value")
		}
	}
	want(t, rows, "put / (raw write / 3)", "1", "median", "value")
	want(t, rows, "get / raw read", "1", "median", "value")
	if canDropCache && strings.Contains(out, "did not work") {
		t.Errorf("page cache drop failed:\n%s", out)
	}
}

func TestSeal(t *testing.T) {
	t.Parallel()
	png := filepath.Join(t.TempDir(), "seal.png")
	_, rows := run(t, "seal", "--blocks", "3", "--plot", png)
	checkPNG(t, png)
	want(t, rows, "seal→closed", "1", "", "p50_ms", "p99_ms")
	want(t, rows, "seal RPC", "1", "", "p50_ms", "p99_ms")
	if n := rows["seal RPC|1|"][2]; n != "9" {
		t.Errorf("%s seal RPCs for 3 blocks of 3 replicas", n)
	}
}

func TestFence(t *testing.T) {
	t.Parallel()
	png := filepath.Join(t.TempDir(), "fence.png")
	_, rows := run(t, "fence", "--files", "1,3", "--trials", "2", "--parallel", "2", "--plot", png)
	checkPNG(t, png)
	for _, p := range []string{"files=1", "files=3"} {
		want(t, rows, "fence", "1", p, "p50_ms", "p99_ms")
		want(t, rows, "holder told", "1", p, "p50_ms")
		if n := rows["fence|1|"+p][2]; n != "2" {
			t.Errorf("%s: %s fences, want 2", p, n)
		}
	}
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	png := filepath.Join(t.TempDir(), "expiry.png")
	out, rows := run(t, "expiry", "--ttl", "1s", "--trials", "1", "--plot", png)
	checkPNG(t, png)
	want(t, rows, "expiry hand-over", "1", "ttl=1s", "p50_ms")
	// The hand-over cannot come before the TTL: the overshoot is positive.
	want(t, rows, "expiry overshoot", "1", "ttl=1s", "p50_ms")
	if !strings.Contains(out, "target ≤ 1s") {
		t.Errorf("no verdict against the target:\n%s", out)
	}
}

// TestCAPI runs the Go side in this test binary started again (see
// TestMain) and the C side through libbfs.so, built with gcc. It is not
// parallel: it builds libbfs while no other test measures anything, and
// TestAll then finds it in the build cache.
func TestCAPI(t *testing.T) {
	if err := cbuild.Compilers(); err != nil {
		t.Skipf("capi needs gcc and g++: %v", err)
	}
	png := filepath.Join(t.TempDir(), "capi.png")
	out, rows := run(t, "capi", "--duration", "400ms", "--size", "2MiB", "--trials", "2", "--plot", png)
	checkPNG(t, png)
	want(t, rows, "lock+unlock (sdk)", "1", "", "ops_per_s", "p50_ms", "p99_ms")
	want(t, rows, "lock+unlock (libbfs)", "1", "", "ops_per_s", "p50_ms", "p99_ms")
	want(t, rows, "libbfs/sdk lock+unlock", "1", "", "value")
	for _, p := range []string{"trial 1", "trial 2", "median"} {
		want(t, rows, "write (sdk)", "1", p, "value")
		want(t, rows, "write (libbfs)", "1", p, "value")
	}
	want(t, rows, "libbfs/sdk write", "1", "median", "value")
	if !strings.Contains(out, "capi libbfs/sdk write") || !strings.Contains(out, "≥ 0.80x") {
		t.Errorf("no verdict against the target:\n%s", out)
	}
}

// TestTera runs the Go side in this test binary started again (see
// TestMain) and the plugin side through libbfs_dfs.so, built with g++ and
// loaded as Tera loads it. Not parallel, as TestCAPI.
func TestTera(t *testing.T) {
	if err := cbuild.Compilers(); err != nil {
		t.Skipf("tera needs gcc and g++: %v", err)
	}
	png := filepath.Join(t.TempDir(), "tera.png")
	out, rows := run(t, "tera", "--size", "3MiB", "--chunk", "100000", "--trials", "2", "--plot", png)
	checkPNG(t, png)
	for _, p := range []string{"trial 1", "trial 2", "median"} {
		for _, name := range []string{"tera write (sdk)", "tera write (plugin)", "tera read (sdk)", "tera read (plugin)"} {
			want(t, rows, name, "1", p, "value")
		}
	}
	want(t, rows, "tera plugin/sdk write", "1", "median", "value")
	want(t, rows, "tera plugin/sdk read", "1", "median", "value")
	if !strings.Contains(out, "tera plugin/sdk read") || !strings.Contains(out, "≥ 0.80x") {
		t.Errorf("no verdict against the target:\n%s", out)
	}
}

func TestAll(t *testing.T) {
	t.Parallel()
	if err := cbuild.Compilers(); err != nil {
		t.Skipf("all runs capi, which needs gcc and g++: %v", err)
	}
	plots := t.TempDir()
	out, rows := run(t, "all", "--clients", "1", "--duration", "100ms", "--io-size", "1MiB", "--io-trials", "1",
		"--seal-blocks", "1", "--fence-files", "2", "--fence-trials", "1", "--expiry-ttl", "1s", "--expiry-trials", "1",
		"--capi-size", "1MiB", "--capi-trials", "1", "--tera-size", "1MiB", "--tera-trials", "1", "--scale-locks", "200", "--scale-sessions", "2", "--vs-etcd",
		"--tls-size", "1MiB", "--tls-trials", "1", "--ha-trials", "1", "--plot-dir", plots)
	for _, s := range []string{"meta", "locks", "io", "seal", "fence", "expiry", "capi", "tera", "scale", "tls", "ha"} {
		if !strings.Contains(out, "== "+s+" (") {
			t.Errorf("no %s table in:\n%s", s, out)
		}
		checkPNG(t, filepath.Join(plots, s+".png"))
	}
	// The summary gathers a figure of every benchmark.
	for _, s := range []string{"== summary", "meta create+delete, 1 client", "locks bfs/etcd, 1 client", "io put / (raw write / 3)",
		"seal sent → BlockReceived", "fence K=2", "expiry hand-over, TTL 1s", "capi libbfs/sdk lock+unlock",
		"tera plugin/sdk write", "scale: list 200 locks through SDK iterator", "tls TLS/plaintext lock+unlock, 1 client", "tls TLS/plaintext put (median)",
		"ha bfs/etcd lock+unlock, 3 voters, 1 client", "ha failover: LockDir (1 trial)"} {
		if !strings.Contains(out, s) {
			t.Errorf("no %q in:\n%s", s, out)
		}
	}
	want(t, rows, "lock+unlock (etcd)", "1", "", "ops_per_s")
	want(t, rows, "bfs/etcd lock+unlock", "1", "", "value")
	want(t, rows, "create+delete", "1", "", "ops_per_s")
	want(t, rows, "lock+unlock", "1", "", "ops_per_s")
	want(t, rows, "put", "1", "median", "value")
	want(t, rows, "seal→closed", "1", "", "p50_ms")
	want(t, rows, "fence", "1", "files=2", "p50_ms")
	want(t, rows, "expiry hand-over", "1", "ttl=1s", "p50_ms")
	want(t, rows, "libbfs/sdk write", "1", "median", "value")
	want(t, rows, "tera plugin/sdk read", "1", "median", "value")
	want(t, rows, "scale list (lockctl -o json)", "1", "locks=200", "value")
	want(t, rows, "TLS/plaintext lock+unlock", "1", "", "value")
	want(t, rows, "TLS/plaintext create", "1", "", "value")
	want(t, rows, "lock+unlock (TLS)", "1", "", "ops_per_s")
	want(t, rows, "put (plaintext)", "1", "median", "value")
	want(t, rows, "TLS/plaintext put", "1", "median", "value")
}

// Bad flags fail with a clear message before any cluster starts.
func TestBadFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"io", "--size", "-1MiB"}, "negative"},
		{[]string{"io", "--size", "12XB"}, "invalid size"},
		{[]string{"io", "--size", "0"}, "--size must be positive"},
		{[]string{"io", "--trials", "-1"}, "--trials must be at least 1"},
		{[]string{"io", "--replication", "0"}, "--replication must be at least 1"},
		{[]string{"seal", "--blocks", "-3"}, "--blocks must be at least 1"},
		{[]string{"fence", "--files", "1,0"}, "--files values must be in"},
		{[]string{"fence", "--trials", "-2"}, "--trials must be at least 1"},
		{[]string{"expiry", "--ttl", "-1s"}, "--ttl must be positive"},
		{[]string{"capi", "--size", "0"}, "--size must be positive"},
		{[]string{"all", "--capi-trials", "0"}, "--capi-trials must be at least 1"},
		{[]string{"tera", "--chunk", "0"}, "--chunk must be in (0, 1GiB]"},
		{[]string{"tera", "--chunk", "2GiB"}, "--chunk must be in (0, 1GiB]"},
		{[]string{"all", "--tera-trials", "0"}, "--tera-trials must be at least 1"},
		{[]string{"locks", "--clients", "0"}, "--clients values must be in"},
		{[]string{"meta", "--duration", "-1s"}, "--duration must be positive"},
		{[]string{"all", "--fence-trials", "-1"}, "--fence-trials must be at least 1"},
		{[]string{"all", "--io-size", "1.5"}, "not a whole number of bytes"},
		{[]string{"locks", "--plot", "locks.gif"}, "must end in .png, .svg or .pdf"},
		{[]string{"all", "--plot", "x.png"}, "unknown flag: --plot"},
		{[]string{"scale", "--locks", "0"}, "--locks values must be in"},
		{[]string{"scale", "--locks", "10", "--sessions", "11"}, "--sessions must be in [1, the fewest --locks]"},
		{[]string{"all", "--scale-workers", "0"}, "--scale-workers must be in [1, 4096]"},
		{[]string{"ha", "--voters", "1,0"}, "--voters values must be in [1, 7]"},
		{[]string{"ha", "--trials", "-1"}, "--trials must be at least 0"},
		{[]string{"all", "--ha-voters", "9"}, "--ha-voters values must be in [1, 7]"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), tc.args, &stdout, &stderr); code == 0 {
			t.Errorf("%v: exit 0", tc.args)
		}
		if !strings.Contains(stderr.String(), tc.msg) || strings.Contains(stderr.String(), "started a cluster") {
			t.Errorf("%v: stderr %q, want %q and no cluster", tc.args, stderr.String(), tc.msg)
		}
	}
}

// With --nameserver every benchmark that measures a cluster runs against
// one it did not start (in plaintext), says that the raw disk is not the
// cluster's, and leaves nothing behind. (repair, tls and ha start clusters
// of their own whatever --nameserver says: TestAll runs them.)
func TestAgainstRunningCluster(t *testing.T) {
	t.Parallel()
	sb, err := sandbox.Start(sandbox.Config{Dir: t.TempDir(), Chunkservers: 3, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := waitChunkservers(context.Background(), sb, 3); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	var out strings.Builder
	for _, args := range [][]string{
		{"meta", "--clients", "1", "--duration", "100ms"},
		{"locks", "--clients", "1", "--duration", "100ms"},
		{"io", "--size", "1MiB", "--trials", "1"},
		{"seal", "--blocks", "1"},
		{"fence", "--files", "1", "--trials", "1"},
		{"expiry", "--ttl", "1s", "--trials", "1"},
		{"capi", "--clients", "1", "--duration", "100ms", "--size", "1MiB", "--trials", "1"},
		{"tera", "--size", "1MiB", "--trials", "1"},
		{"scale", "--locks", "100", "--sessions", "2"},
	} {
		o, r := run(t, append(args, "--nameserver", sb.NameServerAddr, "--insecure")...)
		out.WriteString(o)
		maps.Copy(rows, r)
	}
	want(t, rows, "lock+unlock", "1", "", "ops_per_s")
	want(t, rows, "put", "1", "median", "value")
	want(t, rows, "libbfs/sdk write", "1", "median", "value")
	want(t, rows, "tera plugin/sdk read", "1", "median", "value")
	want(t, rows, "scale list (SDK iterator)", "1", "locks=100", "value")
	if _, ok := rows["scale nameserver RSS|1|locks=100"]; ok {
		t.Error("the memory of a nameserver bfsbench did not start was measured")
	}
	want(t, rows, "fence", "1", "files=1", "p50_ms")
	if !strings.Contains(out.String(), "not the cluster's disks") || strings.Contains(out.String(), "started a cluster") {
		t.Errorf("the io notes should say the raw figures are of this host:\n%s", out.String())
	}
	ctx := context.Background()
	cl, err := sdk.Dial(ctx, sb.NameServerAddr, sb.AsClient())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	left, err := cl.List(ctx, "/bfsbench")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("left behind: %v", left[0].Path)
	}
}

func TestScale(t *testing.T) {
	t.Parallel()
	png := filepath.Join(t.TempDir(), "scale.png")
	profile := filepath.Join(t.TempDir(), "heap")
	out, rows := run(t, "scale", "--locks", "300,500", "--sessions", "3", "--workers", "8", "--heap-profile", profile, "--plot", png)
	checkPNG(t, png)
	for _, p := range []string{"locks=300", "locks=500"} {
		want(t, rows, "scale fill", "8", p, "ops_per_s")
		want(t, rows, "scale list (SDK iterator)", "1", p, "value")
		want(t, rows, "scale list (lockctl -o json)", "1", p, "value")
		if runtime.GOOS == "linux" { // the nameserver's memory is read from /proc
			want(t, rows, "scale nameserver RSS", "1", p, "value")
		}
		if fi, err := os.Stat(profile + "." + p); err != nil || fi.Size() == 0 {
			t.Errorf("no heap profile of the nameserver for %s: %v", p, err)
		}
	}
	for _, s := range []string{"scale: list 500 locks through SDK iterator", "scale: list 300 locks through lockctl -o json"} {
		if !strings.Contains(out, s) {
			t.Errorf("no %q in the summary:\n%s", s, out)
		}
	}
}

func TestRepair(t *testing.T) {
	t.Parallel()
	png := filepath.Join(t.TempDir(), "repair.png")
	out, rows := run(t, "repair", "--size", "12MiB", "--file-size", "1MiB", "--putters", "2", "--put-size", "64KiB", "--put-time", "300ms", "--plot", png)
	checkPNG(t, png)
	for _, name := range []string{"raw write", "raw read", "repair", "repair / (raw write / 2)", "repair during puts", "put p99 during / without repair"} {
		want(t, rows, name, "1", "", "value")
	}
	for _, name := range []string{"put, no repair", "put, during repair"} {
		want(t, rows, name, "2", "", "ops", "p99_ms")
	}
	for _, s := range []string{"repair / (raw write / 2)", "put p99 during a repair (without one)"} {
		if !strings.Contains(out, s) {
			t.Errorf("no %q in:\n%s", s, out)
		}
	}
}

// A running cluster with TLS is measured with its certificates, and
// refuses a run in plaintext.
func TestAgainstRunningSecureCluster(t *testing.T) {
	t.Parallel()
	sb, err := sandbox.Start(sandbox.Config{Dir: t.TempDir(), Chunkservers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Error(err)
		}
	})
	_, rows := run(t, "locks", "--nameserver", sb.NameServerAddr, "--certs-dir", sb.CertsDir(), "--clients", "1", "--duration", "100ms")
	want(t, rows, "lock+unlock", "1", "", "ops_per_s")
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"locks", "--nameserver", sb.NameServerAddr, "--insecure", "--clients", "1", "--duration", "100ms"}, &stdout, &stderr); code == 0 {
		t.Errorf("a plaintext run against a cluster with TLS succeeded:\n%s", stdout.String())
	}
}

// ha measures groups of one and three voters beside etcds of as many
// members, and failovers of a group of three nameserver processes (this
// test binary started again as bfs; see TestMain).
func TestHA(t *testing.T) {
	t.Parallel()
	png := filepath.Join(t.TempDir(), "ha.png")
	out, rows := run(t, "ha", "--voters", "1,3", "--clients", "1,2", "--duration", "400ms", "--trials", "2", "--plot", png)
	checkPNG(t, png)
	for _, v := range []string{"voters=1", "voters=3"} {
		for _, n := range []string{"1", "2"} {
			for _, name := range []string{haLocksRow, haEtcdLocksRow, haCreateRow} {
				want(t, rows, name, n, v, "ops_per_s", "p50_ms", "p99_ms")
			}
			want(t, rows, haRatioRow, n, v, "value")
			want(t, rows, haCPURow, n, v, "value")
		}
		want(t, rows, haStatRow, "2", v, "ops_per_s")
		// The leader changes are counted (how many is the machine's
		// business: a starved one may see some).
		for _, name := range []string{haLeaderRow, haEtcdLeaderRow} {
			rec, ok := rows[name+"|2|"+v]
			if !ok || rec[indexOf(csvHeader, "unit")] != countUnit {
				t.Errorf("%s, %s: %v", name, v, rec)
			} else if n, err := strconv.ParseFloat(rec[indexOf(csvHeader, "value")], 64); err != nil || n < 0 {
				t.Errorf("%s, %s: %q", name, v, rec[indexOf(csvHeader, "value")])
			}
		}
	}
	for _, name := range append([]string{failoverElectionRow}, failoverProbeRows...) {
		want(t, rows, name, "1", "voters=3", "p50_ms", "p99_ms")
		if n := rows[name+"|1|voters=3"][2]; n != "2" {
			t.Errorf("%s: %s trials, want 2", name, n)
		}
	}
	for _, s := range []string{"ha bfs/etcd lock+unlock, 1 voter, 2 clients", "ha leader changes during the closed loops, 3 voters",
		"ha failover: AddBlock (2 trials)", "p99 ≤ 2s"} {
		if !strings.Contains(out, s) {
			t.Errorf("no %q in:\n%s", s, out)
		}
	}
}
