package nameserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// The watch flood (the security issue's "bounds"): one identity opens
// many WatchDirLocks streams of "/" and never reads them, while another
// client locks and unlocks a directory. BFS_WATCH_FLOOD sets how many
// streams the attacker tries (default a CI-sized count),
// BFS_WATCH_FLOOD_OPS how many lock+unlock the other client times, and
// BFS_WATCH_FLOOD_CAP, if set, the attacker's cap
// (--max-watches-per-identity, and --max-watches if above it), to see
// what that many streams open cost.
const (
	floodEnv      = "BFS_WATCH_FLOOD"
	floodOpsEnv   = "BFS_WATCH_FLOOD_OPS"
	floodCapEnv   = "BFS_WATCH_FLOOD_CAP"
	floodChildEnv = "BFS_WATCH_FLOOD_CHILD" // addr,certsDir,user,n: the attacker's process
)

// TestWatchFlood prints another client's lock+unlock latency (p50, p99)
// before and while an attacker holds its idle watch streams open, and
// the growth of this process's heap and RSS (the nameserver and the
// timed client: the attacker runs in a process of its own, so its
// receive buffers are not counted). It asserts only what must hold
// whatever the machine: the attacker gets no more streams than its cap,
// and every other lock+unlock succeeds. Timings are printed, not
// asserted.
func TestWatchFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("the flood takes a while")
	}
	n, ops := envInt(t, floodEnv, 200), envInt(t, floodOpsEnv, 200)
	watchCap := envInt(t, floodCapEnv, 0) // 0: the default
	c := testcluster.Start(t, testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
		cfg.Limits.MaxWatchesPerIdentity = watchCap
		cfg.Limits.MaxWatches = max(watchCap, nameserver.DefaultLimits().MaxWatches)
	}))
	attacker := c.NewClient("flood", false)
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	// A session that outlives the flood without keep-alives.
	open, err := ns.OpenSession(context.Background(), &bfspb.OpenSessionRequest{Holder: "victim", TtlMs: 600_000})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, open.Status, open.Message)
	sess := open.SessionId
	mkdirAll(t, ns, "/flood/d")

	before := lockUnlockLatencies(t, ns, sess, ops)
	heap0, rss0 := memNow()
	accepted, refused, stop := startAttacker(t, c.NameServerAddr, c.CertsDir(), attacker, n)
	defer stop()
	heap1, rss1 := memNow()
	during := lockUnlockLatencies(t, ns, sess, ops)
	heap2, rss2 := memNow()
	if path := os.Getenv("BFS_WATCH_FLOOD_HEAP"); path != "" {
		f, err := os.Create(path)
		require.NoError(t, err)
		require.NoError(t, pprof.WriteHeapProfile(f))
		require.NoError(t, f.Close())
	}

	t.Logf("watch flood: %d streams tried by one identity: %d open, %d refused", n, accepted, refused)
	t.Logf("another client's lock+unlock, %d each: before p50 %v p99 %v; with the streams open p50 %v p99 %v (the later half alone, once streams that are not read stopped taking transitions: p50 %v p99 %v)",
		ops, pct(before, 50), pct(before, 99), pct(during, 50), pct(during, 99), pct(during[ops/2:], 50), pct(during[ops/2:], 99))
	t.Logf("this process (nameserver and the timed client): heap in use %d MiB → %d MiB after opening → %d MiB after the lock+unlocks; RSS %d MiB → %d MiB → %d MiB",
		heap0>>20, heap1>>20, heap2>>20, rss0>>20, rss1>>20, rss2>>20)
	require.Equal(t, n, accepted+refused)
	if watchCap == 0 {
		watchCap = nameserver.DefaultLimits().MaxWatchesPerIdentity
	}
	require.Equal(t, min(n, watchCap), accepted, "the streams one identity may hold")
}

// lockUnlockLatencies times ops lock+unlock pairs of /flood/d by sess.
func lockUnlockLatencies(t *testing.T, ns bfspb.NameServerClient, sess string, ops int) []time.Duration {
	t.Helper()
	ctx := context.Background()
	out := make([]time.Duration, 0, ops)
	for range ops {
		start := time.Now()
		l, err := ns.LockDir(ctx, &bfspb.LockDirRequest{Path: "/flood/d", SessionId: sess})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_OK, l.Status, l.Message)
		u, err := ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: "/flood/d", SessionId: sess, Epoch: l.Lock.Epoch})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_UNLOCKED, u.Status, u.Message)
		out = append(out, time.Since(start))
	}
	return out
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(10 * time.Microsecond)
}

// memNow is this process's heap in use (after a collection) and RSS.
func memNow() (heap, rss uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				rss = kb << 10
			}
		}
	}
	return ms.HeapInuse, rss
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "$%s", name)
	return n
}

// startAttacker runs TestWatchFloodAttacker in a child process, which
// opens n streams as user and reports how many the nameserver took; stop
// ends it (its streams go with it).
func startAttacker(t *testing.T, addr, certsDir, user string, n int) (accepted, refused int, stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchFloodAttacker$", "-test.v")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%s,%d", floodChildEnv, addr, certsDir, user, n))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	stop = func() {
		stdin.Close()
		cmd.Wait()
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "flood ready: %d open, %d refused", &accepted, &refused); err == nil {
			go io.Copy(io.Discard, stdout)
			return accepted, refused, stop
		}
	}
	stop()
	t.Fatalf("the attacker ended before it was ready: %v", sc.Err())
	return 0, 0, nil
}

// TestWatchFloodAttacker is the attacker's process (see TestWatchFlood):
// it opens its streams, never reads them, and holds them until its
// standard input closes.
func TestWatchFloodAttacker(t *testing.T) {
	spec := os.Getenv(floodChildEnv)
	if spec == "" {
		t.Skip("run by TestWatchFlood")
	}
	var addr, dir, user string
	var n int
	parts := strings.Split(spec, ",")
	require.Len(t, parts, 4)
	addr, dir, user = parts[0], parts[1], parts[2]
	n, err := strconv.Atoi(parts[3])
	require.NoError(t, err)
	creds, err := certs.LoadClient(dir, user)
	require.NoError(t, err)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(certs.TransportCredentials(creds)))
	require.NoError(t, err)
	defer conn.Close()
	ns := bfspb.NewNameServerClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open, refused := 0, 0
	for range n {
		stream, err := ns.WatchDirLocks(ctx, &bfspb.WatchDirLocksRequest{Prefix: "/"})
		require.NoError(t, err)
		md, err := stream.Header()
		if err == nil && md == nil {
			_, err = stream.Recv()
		}
		switch {
		case err == nil:
			open++
		case status.Code(err) == codes.ResourceExhausted:
			refused++
		default:
			t.Fatalf("watch stream %d: %v", open+refused, err)
		}
	}
	fmt.Printf("flood ready: %d open, %d refused\n", open, refused)
	io.Copy(io.Discard, os.Stdin)
}

// TestSessionFlood: one identity opens BFS_SESSION_FLOOD sessions (16 at
// a time), never kept alive, and prints how many the nameserver granted,
// how many it refused and how long that took. Skipped unless the
// variable is set.
func TestSessionFlood(t *testing.T) {
	n := envInt(t, "BFS_SESSION_FLOOD", 0)
	if n == 0 {
		t.Skip("set BFS_SESSION_FLOOD to the number of sessions to try")
	}
	c := testcluster.Start(t)
	ns := bfspb.NewNameServerClient(c.DialAs(c.NameServerAddr, c.NewClient("flood", false)))
	heap0, rss0 := memNow()
	start := time.Now()
	var granted, refused atomic.Int64
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, 1)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				r, err := ns.OpenSession(context.Background(), &bfspb.OpenSessionRequest{Holder: fmt.Sprintf("flood-%d", i), TtlMs: 600_000})
				switch {
				case err != nil:
					fail(errs, err)
				case r.Status == bfspb.StatusCode_OK:
					granted.Add(1)
				case r.Status == bfspb.StatusCode_RESOURCE_EXHAUSTED:
					refused.Add(1)
				default:
					fail(errs, fmt.Errorf("open session %d: %v %s", i, r.Status, r.Message))
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
	took := time.Since(start)
	heap1, rss1 := memNow()
	t.Logf("session flood: %d tried by one identity in %v: %d granted, %d refused; heap in use %d MiB → %d MiB, RSS %d MiB → %d MiB",
		n, took.Round(time.Millisecond), granted.Load(), refused.Load(), heap0>>20, heap1>>20, rss0>>20, rss1>>20)
	require.EqualValues(t, n, granted.Load()+refused.Load())
}

// fail keeps the first of the errors sent to errs (buffered(1)).
func fail(errs chan error, err error) {
	select {
	case errs <- err:
	default:
	}
}

// TestLockWaitFlood: one identity has BFS_LOCK_WAIT_FLOOD LockDir calls
// with wait blocked on a directory another session holds, while another
// client locks and unlocks a directory of its own. It prints that
// client's lock+unlock latency and the Raft entries applied per
// lock+unlock. Skipped unless the variable is set.
func TestLockWaitFlood(t *testing.T) {
	n := envInt(t, "BFS_LOCK_WAIT_FLOOD", 0)
	if n == 0 {
		t.Skip("set BFS_LOCK_WAIT_FLOOD to the number of waiting LockDir calls")
	}
	ops := envInt(t, floodOpsEnv, 100)
	c := testcluster.Start(t, testcluster.WithHTTP())
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	open, err := ns.OpenSession(context.Background(), &bfspb.OpenSessionRequest{Holder: "victim", TtlMs: 600_000})
	require.NoError(t, err)
	sess := open.SessionId
	mkdirAll(t, ns, "/flood/d")
	mkdirAll(t, ns, "/flood/held")
	lockAs(t, ns, "/flood/held", sess)

	attacker := bfspb.NewNameServerClient(c.DialAs(c.NameServerAddr, c.NewClient("flood", false)))
	fo, err := attacker.OpenSession(context.Background(), &bfspb.OpenSessionRequest{Holder: "flood", TtlMs: 600_000})
	require.NoError(t, err)
	applied := func() float64 {
		return metricValue(t, c.Metrics(c.NameServerHTTPAddr()), "bfs_nameserver_raft_applied_entries_total")
	}
	base := applied()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var refused atomic.Int64
	for range n {
		wg.Go(func() {
			r, err := attacker.LockDir(ctx, &bfspb.LockDirRequest{Path: "/flood/held", SessionId: fo.SessionId, Wait: true})
			if err == nil && r.Status == bfspb.StatusCode_RESOURCE_EXHAUSTED {
				refused.Add(1)
			}
		})
	}
	// Every wait has made its first attempt (a refused one none).
	require.Eventually(t, func() bool { return applied()-base+float64(refused.Load()) >= float64(n) }, time.Minute, 50*time.Millisecond)
	before := applied()
	lat := lockUnlockLatencies(t, ns, sess, ops)
	perOp := (applied() - before) / float64(ops)
	t.Logf("lock-wait flood: %d waiting LockDir calls of one identity (%d refused); another client's lock+unlock, %d: p50 %v p99 %v, %.1f Raft entries applied per lock+unlock",
		n, refused.Load(), ops, pct(lat, 50), pct(lat, 99), perOp)
}

// metricValue is the value of the sample named name (with its labels,
// as /metrics writes them) in a scrape.
func metricValue(t *testing.T, body, name string) float64 {
	t.Helper()
	for line := range strings.Lines(body) {
		rest, ok := strings.CutPrefix(line, name+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		require.NoError(t, err, line)
		return v
	}
	return 0
}
