// Package grafana holds the Grafana dashboard of BFS-Go (bfs.json) and
// its test: every metric the dashboard names is exported by the real
// daemons.
package grafana

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/sdk"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// glog starts its flush daemon at package init.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
	)
}

// dashboard is the part of Grafana's dashboard model the test reads.
type dashboard struct {
	Title  string  `json:"title"`
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func load(t *testing.T) dashboard {
	b, err := os.ReadFile("bfs.json")
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(b, &d))
	return d
}

var metricName = regexp.MustCompile(`\bbfs_[a-z0-9_]+`)

// named returns the metrics the dashboard's queries name.
func named(d dashboard) []string {
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range metricName.FindAllString(tg.Expr, -1) {
				if !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestDashboardShape: the dashboard is a valid Grafana model of panels,
// each with queries on the Prometheus data source variable, and it draws
// what an operator watches.
func TestDashboardShape(t *testing.T) {
	d := load(t)
	require.Equal(t, "bfs-go", d.UID)
	ids := map[int]bool{}
	for _, p := range d.Panels {
		require.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		require.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, p.Title)
		if p.Type == "row" {
			continue
		}
		require.NotEmpty(t, p.Targets, p.Title)
		require.Equal(t, "${datasource}", p.Datasource.UID, p.Title)
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, p.Title)
			require.Equal(t, strings.Count(tg.Expr, "("), strings.Count(tg.Expr, ")"), tg.Expr)
		}
	}
	for _, m := range []string{
		"bfs_nameserver_rpc_duration_seconds_bucket", "bfs_nameserver_dir_locks", "bfs_nameserver_lock_cleanings",
		"bfs_nameserver_lock_cleaning_duration_seconds_bucket", "bfs_nameserver_lock_refusals_total",
		"bfs_nameserver_session_expiries_total", "bfs_nameserver_under_replicated_blocks", "bfs_nameserver_missing_blocks",
		"bfs_nameserver_repair_bytes_total", "bfs_nameserver_repair_queue_length", "bfs_nameserver_chunkserver_capacity_bytes",
	} {
		require.Contains(t, named(d), m)
	}
}

// TestDashboardMetricsExported runs a cluster whose daemons serve their
// HTTP ports, does what makes every labelled metric appear (a grant, a
// refusal, a cleaning, a write and a read, a repair copy after a
// decommission), scrapes every daemon, and finds each metric the
// dashboard names among what they export.
func TestDashboardMetricsExported(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Insecure(), testcluster.WithChunkservers(4), testcluster.WithHTTP(),
		testcluster.WithNameServerConfig(func(c *nameserver.Config) { c.RepairInterval = 100 * time.Millisecond }))
	ctx := context.Background()
	dial := func(holder string) *sdk.Client {
		c, err := sdk.Dial(ctx, cl.NameServerAddr, sdk.WithHolder(holder))
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := dial("a"), dial("b")
	require.NoError(t, a.MkdirAll(ctx, "/d", 0))
	l, err := a.LockDir(ctx, "/d")
	require.NoError(t, err)
	_, err = b.LockDir(ctx, "/d")
	require.ErrorIs(t, err, sdk.ErrLocked)
	require.NoError(t, l.Unlock(ctx))
	w, err := a.Create(ctx, "/f")
	require.NoError(t, err)
	_, err = w.Write(make([]byte, 64<<10))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	r, err := a.Open(ctx, "/f")
	require.NoError(t, err)
	_, err = r.Read(make([]byte, 4096))
	require.NoError(t, err)
	require.NoError(t, r.Close())
	loc, err := a.Locate(ctx, "/f")
	require.NoError(t, err)
	_, err = a.Decommission(ctx, loc.Blocks[0].Replicas[0])
	require.NoError(t, err)

	var exported map[string]bool
	require.Eventually(t, func() bool {
		exported = map[string]bool{}
		scrape(t, cl.NameServerHTTPAddr(), exported)
		for _, addr := range cl.ChunkserverHTTPAddrs() {
			scrape(t, addr, exported)
		}
		return exported["bfs_nameserver_repair_copies_total"]
	}, 30*time.Second, 50*time.Millisecond, "the decommission's repair copy")
	d := load(t)
	for _, m := range named(d) {
		require.True(t, exported[m], "the dashboard names %s, which no daemon exports", m)
	}
	t.Logf("%d metrics named by %d panels, all exported", len(named(d)), len(d.Panels))
}

// scrape adds the names of the samples a daemon's /metrics serves.
func scrape(t *testing.T, addr string, names map[string]bool) {
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		names[line[:strings.IndexAny(line, "{ ")]] = true
	}
	require.NoError(t, sc.Err())
}
