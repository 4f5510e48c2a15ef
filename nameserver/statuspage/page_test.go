package statuspage

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// nameserver answers the page's interfaces with nothing listed, and
// feeds it lock transitions the test sends. The page's tests against a
// real nameserver are in the external test package; these cover what no
// nameserver does yet (a leader, volumes) and the page's own goroutine.
type nameserver struct {
	mu struct {
		sync.Mutex
		events chan *bfspb.DirLockEvent
		lagged chan struct{}
		subs   int
	}
}

func (*nameserver) ListDirLocks(context.Context, *bfspb.ListDirLocksRequest) (*bfspb.ListDirLocksResponse, error) {
	return &bfspb.ListDirLocksResponse{}, nil
}
func (*nameserver) GetDirLock(context.Context, *bfspb.GetDirLockRequest) (*bfspb.GetDirLockResponse, error) {
	return &bfspb.GetDirLockResponse{Lock: &bfspb.DirLock{Path: "/"}}, nil
}
func (*nameserver) GetLockHistory(context.Context, *bfspb.GetLockHistoryRequest) (*bfspb.GetLockHistoryResponse, error) {
	return &bfspb.GetLockHistoryResponse{}, nil
}
func (*nameserver) ListSessions(context.Context, *bfspb.ListSessionsRequest) (*bfspb.ListSessionsResponse, error) {
	return &bfspb.ListSessionsResponse{}, nil
}
func (*nameserver) ListChunkservers(context.Context, *bfspb.ListChunkserversRequest) (*bfspb.ListChunkserversResponse, error) {
	return &bfspb.ListChunkserversResponse{}, nil
}
func (*nameserver) GetSafeMode(context.Context, *bfspb.GetSafeModeRequest) (*bfspb.GetSafeModeResponse, error) {
	return &bfspb.GetSafeModeResponse{}, nil
}

func (n *nameserver) Subscribe() (<-chan *bfspb.DirLockEvent, <-chan struct{}, func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.events, n.mu.lagged = make(chan *bfspb.DirLockEvent), make(chan struct{})
	n.mu.subs++
	return n.mu.events, n.mu.lagged, func() {}
}

// subscription is the current subscriber's channels and how many
// subscriptions there were.
func (n *nameserver) subscription() (chan *bfspb.DirLockEvent, chan struct{}, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.events, n.mu.lagged, n.mu.subs
}

type leader Leader

func (l leader) Leader() Leader { return Leader(l) }

func newTestPage(t *testing.T, mod func(*Config)) (*Page, *nameserver, *prometheus.Registry) {
	ns := &nameserver{}
	reg := prometheus.NewRegistry()
	cfg := Config{ClusterID: func() string { return "c1" }, Locks: ns, Sessions: ns, Chunkservers: ns, SafeMode: ns, Events: ns, Metrics: reg, Public: true}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p, ns, reg
}

func render(t *testing.T, p *Page, path string) string {
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	return rec.Body.String()
}

// TestLeader: a nameserver group's leader and term, once a provider says
// them; "single nameserver" without one.
func TestLeader(t *testing.T) {
	single, _, _ := newTestPage(t, nil)
	require.Contains(t, render(t, single, "/"), "single nameserver")
	require.NotContains(t, render(t, single, "/api/status"), `"leader"`)

	group, _, _ := newTestPage(t, func(c *Config) {
		c.Leadership = leader{Name: "ns-2", Address: "10.0.0.2:8828", Term: 7}
	})
	page := render(t, group, "/locks")
	require.Contains(t, page, "leader <b>ns-2</b> (10.0.0.2:8828), term 7")
	require.NotContains(t, page, "single nameserver")
	require.Contains(t, render(t, group, "/api/status"), `"leader": {
    "name": "ns-2",
    "address": "10.0.0.2:8828",
    "term": 7,
    "self": false
  }`)
	none, _, _ := newTestPage(t, func(c *Config) { c.Leadership = leader{Term: 8} })
	require.Contains(t, render(t, none, "/"), "no leader</b>, term 8")
}

// TestVolumesNested: a chunkserver's volumes are rows under its own.
func TestVolumesNested(t *testing.T) {
	p, _, _ := newTestPage(t, nil)
	var buf bytes.Buffer
	require.NoError(t, p.templates["chunkservers"].ExecuteTemplate(&buf, "layout", pageData{Name: "chunkservers", Data: ChunkserverPage{
		Chunkservers: []Chunkserver{{Address: "10.0.0.7:8830", State: "LIVE", CapacityBytes: 2 << 40, FreeBytes: 1 << 40,
			Volumes: []Volume{
				{Path: "/data/1", State: "HEALTHY", CapacityBytes: 1 << 40, FreeBytes: 1 << 39, Blocks: 10},
				{Path: "/data/2", State: "FAILED", CapacityBytes: 1 << 40},
			}}},
	}}))
	html := buf.String()
	cs := strings.Index(html, "10.0.0.7:8830")
	v1, v2 := strings.Index(html, "↳ /data/1"), strings.Index(html, "↳ /data/2")
	require.True(t, cs >= 0 && cs < v1 && v1 < v2, "volumes after their chunkserver, in order:\n%s", html)
	require.Contains(t, html, `<tr class="volume">`)
	require.Contains(t, html, `<span class="state FAILED">FAILED</span>`)
}

// TestRun: the page samples on its clock, records transitions, marks a
// gap and subscribes again when it fell behind, and stops on Close.
func TestRun(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	grants := prometheus.NewCounter(prometheus.CounterOpts{Name: metricGrants, Help: "g"})
	p, ns, reg := newTestPage(t, func(c *Config) { c.Clock, c.SampleInterval, c.Samples = fake, time.Second, 4 })
	reg.MustRegister(grants)
	require.Len(t, p.samples.all(), 1, "one sample at start")
	for i := range 6 {
		grants.Add(float64(i))
		require.NoError(t, fake.BlockUntil(context.Background(), 1))
		fake.Advance(time.Second)
		eventually(t, func() bool { all := p.samples.all(); return all[len(all)-1].at.Equal(fake.Now()) })
	}
	rs := rates(p.samples.all())
	require.Len(t, rs, 3, "the ring keeps 4 samples")
	require.Equal(t, []float64{3, 4, 5}, []float64{rs[0].GrantsPerSecond, rs[1].GrantsPerSecond, rs[2].GrantsPerSecond})

	events, lagged, _ := ns.subscription()
	events <- &bfspb.DirLockEvent{Lock: &bfspb.DirLock{Path: "/t", Status: bfspb.LockStatus_LOCK_STATUS_LOCKED,
		Holder: "h", SessionId: "0123456789abcdef", Epoch: 3, SinceNs: 5e9}, Reason: "lock"}
	close(lagged)
	eventually(t, func() bool { _, _, subs := ns.subscription(); return subs == 2 })
	events, _, _ = ns.subscription()
	events <- &bfspb.DirLockEvent{Lock: &bfspb.DirLock{Path: "/t", Status: bfspb.LockStatus_LOCK_STATUS_CLEANING},
		Previous: bfspb.LockStatus_LOCK_STATUS_LOCKED, Reason: "force"}
	eventually(t, func() bool { ts, _ := p.history.before(0, 10); return len(ts) == 3 })
	ts, next := p.history.before(0, 10)
	require.Zero(t, next)
	require.Equal(t, "force", ts[0].Reason)
	require.True(t, ts[1].Gap)
	require.Equal(t, Transition{Seq: 1, Time: time.Unix(5, 0), Path: "/t", From: "UNLOCKED", To: "LOCKED", Reason: "lock",
		Holder: "h", Session: "01234567…", Epoch: 3}, ts[2])

	p.Close()
	p.Close() // twice is harmless
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond)
}

func TestHistoryPages(t *testing.T) {
	h := newHistory(5)
	ts, next := h.before(0, 3)
	require.Empty(t, ts)
	require.Zero(t, next)
	for i := range 8 {
		h.put(Transition{Path: string(rune('a' + i))})
	}
	seqs := func(ts []Transition) (out []uint64) {
		for _, t := range ts {
			out = append(out, t.Seq)
		}
		return out
	}
	ts, next = h.before(0, 3)
	require.Equal(t, []uint64{8, 7, 6}, seqs(ts))
	require.EqualValues(t, 6, next)
	ts, next = h.before(next, 3)
	require.Equal(t, []uint64{5, 4}, seqs(ts), "only five are kept")
	require.Zero(t, next)
	ts, _ = h.before(2, 3)
	require.Empty(t, ts, "forgotten")
	ts, next = h.before(100, 2)
	require.Equal(t, []uint64{8, 7}, seqs(ts))
	require.EqualValues(t, 7, next)
	ts, next = h.before(0, 5)
	require.Equal(t, []uint64{8, 7, 6, 5, 4}, seqs(ts))
	require.Zero(t, next)
}

func TestRates(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	rs := rates([]sample{
		{at: at(0), values: [3]float64{0, 0, 0}},
		{at: at(2), values: [3]float64{10, 4, 2048}},
		{at: at(2), values: [3]float64{10, 4, 2048}}, // no time passed: no rate
		{at: at(4), values: [3]float64{5, 4, 4096}},  // a counter that went down: 0, not negative
	})
	require.Equal(t, []Rate{
		{Time: at(2), GrantsPerSecond: 5, RefusalsPerSecond: 2, RepairBytesPerSecond: 1024},
		{Time: at(4), GrantsPerSecond: 0, RefusalsPerSecond: 0, RepairBytesPerSecond: 1024},
	}, rs)
	require.Empty(t, rates(nil))
}

func TestChartScale(t *testing.T) {
	for v, want := range map[float64]float64{0.3: 0.5, 1: 1, 1.1: 2, 3: 5, 7: 10, 42: 50, 1000: 1000, 1001: 2000} {
		require.InDelta(t, want, roundUp(v), 1e-9, "%v", v)
	}
	require.EqualValues(t, 1024, roundUpBytes(1024))
	require.EqualValues(t, 1000, roundUpBytes(999))
	require.EqualValues(t, 2048, roundUpBytes(1500))
	require.EqualValues(t, 5<<20, roundUpBytes(3<<20))
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 20 << 30: "20 GiB", 3 << 40: "3.0 TiB"} {
		require.Equal(t, want, humanBytes(n))
	}
	require.Equal(t, "10m", shortDuration(10*time.Minute))
	require.Equal(t, "2.4s", shortDuration(2400*time.Millisecond))
	require.Equal(t, "1h30m", shortDuration(90*time.Minute))
	require.Equal(t, "2h", shortDuration(2*time.Hour))
}

func TestDrawChart(t *testing.T) {
	ss := []series{{"grants", "#000", "", func(r Rate) float64 { return r.GrantsPerSecond }}}
	require.Contains(t, string(drawChart(nil, time.Minute, perSecondAxis, ss)), "collecting samples")
	end := time.Unix(600, 0)
	svg := string(drawChart([]Rate{
		{Time: end.Add(-2 * time.Minute), GrantsPerSecond: 99}, // before the window: not drawn
		{Time: end.Add(-30 * time.Second), GrantsPerSecond: 3},
		{Time: end, GrantsPerSecond: 1.5},
	}, time.Minute, perSecondAxis, ss))
	// The window is a minute: x from 64 to 552; y from 0 (148) to 100/s
	// (10): the point at 99/s is left out, but it sets the scale.
	require.Contains(t, svg, `points="308.0,143.9 552.0,145.9"`)
	require.Contains(t, svg, `>100/s</text>`)
	require.Contains(t, svg, `>-1m</text>`)
	require.Contains(t, svg, `grants 1.5/s`)
}

func TestConfig(t *testing.T) {
	ns := &nameserver{}
	_, err := New(Config{Locks: ns})
	require.ErrorContains(t, err, "are required")
	_, err = New(Config{Locks: ns, Sessions: ns, Chunkservers: ns, SafeMode: ns, Events: ns, Metrics: prometheus.NewRegistry(), Samples: 1})
	require.ErrorContains(t, err, "a rate takes two")
}
