package nameserver_test

import (
	"bufio"
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// scrape reads the nameserver's /metrics: each sample's value by its
// name and labels as printed ("name{label=\"v\"}").
func scrape(t *testing.T, cl *testcluster.Cluster, addr string) map[string]float64 {
	t.Helper()
	samples := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(cl.Metrics(addr)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		samples[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return samples
}

// requireMetric waits (a scrape being cheap) for a sample to reach want:
// some are recorded just after the event the test waited on.
func requireMetric(t *testing.T, cl *testcluster.Cluster, addr, sample string, want float64) {
	t.Helper()
	var got float64
	require.Eventually(t, func() bool {
		got = scrape(t, cl, addr)[sample]
		return got == want
	}, 10*time.Second, 10*time.Millisecond, "%s = %v, want %v", sample, got, want)
}

// TestLockMetrics: a tablet server holds /tablet with a file open; a
// chunkserver with one of its replicas is down; the master forces the
// lock away. /metrics shows the grant, the refusals, the cleaning in
// progress with its pending file, the holder told, then the cleaning's
// duration once it ends, and an expired session.
func TestLockMetrics(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	maddr := lis.Addr().String()
	lis.Close()
	cl := testcluster.Start(t, testcluster.WithChunkservers(3), testcluster.WithNameServerConfig(func(c *nameserver.Config) {
		c.MetricsAddr = maddr
		c.DeadTimeout = time.Minute // the down chunkserver stays pending until it is back
	}))
	ctx := context.Background()
	dialSDK := func(holder string, as sdk.Option) *sdk.Client {
		c, err := sdk.Dial(ctx, cl.NameServerAddr, as, sdk.WithHolder(holder))
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	tablet, master := dialSDK("tablet-a", cl.AsClient()), dialSDK("master", cl.AsAdmin())
	require.NoError(t, tablet.MkdirAll(ctx, "/tablet", 0))
	held, err := tablet.LockDir(ctx, "/tablet")
	require.NoError(t, err)
	w, err := tablet.Create(ctx, "/tablet/log")
	require.NoError(t, err)
	_, err = w.Write(make([]byte, 1000))
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))
	loc, err := tablet.Locate(ctx, "/tablet/log")
	require.NoError(t, err)
	down := slices.Index(cl.ChunkserverAddrs(), loc.Blocks[0].Replicas[0])
	require.GreaterOrEqual(t, down, 0)
	cl.StopChunkserver(down)

	_, err = master.LockDir(ctx, "/tablet")
	require.ErrorIs(t, err, sdk.ErrLocked)
	_, err = master.UnlockDir(ctx, "/tablet", sdk.Force())
	require.NoError(t, err)
	select {
	case <-held.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the holder was never told")
	}
	_, err = master.LockDir(ctx, "/tablet")
	require.ErrorIs(t, err, sdk.ErrCleaning)
	err = tablet.Mkdir(ctx, "/tablet/more", 0)
	require.ErrorIs(t, err, sdk.ErrStaleEpoch)

	requireMetric(t, cl, maddr, "bfs_nameserver_forced_unlock_notify_seconds_count", 1)
	m := scrape(t, cl, maddr)
	for sample, want := range map[string]float64{
		`bfs_nameserver_dir_locks{state="locked"}`:                                0,
		`bfs_nameserver_dir_locks{state="cleaning"}`:                              1,
		`bfs_nameserver_lock_cleanings`:                                           1,
		`bfs_nameserver_lock_cleaning_pending_files`:                              1,
		`bfs_nameserver_lock_grants_total{kind="session"}`:                        1,
		`bfs_nameserver_lock_refusals_total{method="LockDir",status="LOCKED"}`:    1,
		`bfs_nameserver_lock_refusals_total{method="LockDir",status="CLEANING"}`:  1,
		`bfs_nameserver_lock_refusals_total{method="Mkdir",status="STALE_EPOCH"}`: 1,
	} {
		require.Equal(t, want, m[sample], sample)
	}
	_, cleaning := m[`bfs_nameserver_lock_cleaning_duration_seconds_count{reason="force"}`]
	require.False(t, cleaning, "no cleaning has ended yet")

	cl.RestartChunkserver(down)
	un, err := master.UnlockDir(ctx, "/tablet", sdk.Force(), sdk.WaitUnlocked())
	require.NoError(t, err)
	require.Equal(t, sdk.Unlocked, un.Status)
	requireMetric(t, cl, maddr, `bfs_nameserver_lock_cleaning_duration_seconds_count{reason="force"}`, 1)
	m = scrape(t, cl, maddr)
	require.Greater(t, m[`bfs_nameserver_lock_cleaning_duration_seconds_sum{reason="force"}`], 0.0)
	require.Zero(t, m[`bfs_nameserver_dir_locks{state="cleaning"}`])
	require.Zero(t, m[`bfs_nameserver_lock_cleanings`])
	require.Zero(t, m[`bfs_nameserver_lock_cleaning_pending_files`])

	// A session that is never kept alive expires.
	ns := bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr))
	open, err := ns.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: "gone", TtlMs: 100})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, open.Status)
	requireMetric(t, cl, maddr, "bfs_nameserver_session_expiries_total", 1)
	_ = w.Close() // fenced: refused, but its goroutines end
}
