package benchcmd

import (
	"strings"
	"testing"
	"time"

	"github.com/bfs-go/bfs/internal/bench"
)

func TestVerdicts(t *testing.T) {
	ops := func(name string, clients int, perSec float64) bench.Result {
		return bench.Result{Name: name, Clients: clients, Ops: int64(perSec), Elapsed: time.Second, P50: time.Millisecond, P99: 2 * time.Millisecond}
	}
	ratio := func(name string, clients int, param string, v float64) bench.Result {
		return bench.Result{Name: name, Clients: clients, Param: param, Value: v, Unit: "x"}
	}
	expiry := bench.Summarize("expiry hand-over", 1, []time.Duration{2500 * time.Millisecond, 3100 * time.Millisecond}, 0)
	expiry.Param = "ttl=2s"
	results := []bench.Result{
		ops("create", 1, 1000), ops("create", 64, 12000),
		ops("create+delete", 1, 500), ops("create+delete", 64, 4000),
		ops("stat", 1, 2000), ops("stat", 64, 30000),
		ratio("locked/unlocked create+delete", 1, "", 0.99), ratio("locked/unlocked create+delete", 64, "", 0.9),
		ops("lock+unlock", 1, 600), ops("lock+unlock (etcd)", 1, 800), ratio("bfs/etcd lock+unlock", 1, "", 0.75),
		ops("lock+unlock", 64, 6000), ops("lock+unlock (etcd)", 64, 2000), ratio("bfs/etcd lock+unlock", 64, "", 3),
		{Name: "put", Clients: 1, Param: "median", Value: 100, Unit: "MB/s"},
		ratio("put / (raw write / 3)", 1, "median", 0.8), ratio("get / raw read", 1, "median", 0.5),
		{Name: "seal→closed", Clients: 1, Ops: 1000, P50: time.Millisecond, P99: 5 * time.Millisecond},
		{Name: "fence", Clients: 1, Param: "files=10", Ops: 3, P50: 10 * time.Millisecond, P99: 20 * time.Millisecond},
		{Name: "fence", Clients: 1, Param: "files=1000", Ops: 3, P50: 900 * time.Millisecond, P99: 1200 * time.Millisecond},
		expiry,
	}
	got := map[string]verdict{}
	for _, v := range verdicts(results) {
		got[v.figure] = v
	}
	for _, tc := range []struct {
		figure, measured, target string
		met                      bool
	}{
		{"meta create, 64 clients", "12000 ops/s, p50 1.000ms, p99 2.000ms", "≥ 10000 ops/s", true},
		{"meta create, 1 client", "1000 ops/s, p50 1.000ms, p99 2.000ms", "", false},
		{"meta create, 64/1 clients", "12.00x", "≥ 10x", true},
		{"meta create+delete, 64/1 clients", "8.00x", "≥ 10x", false},
		{"meta stat, 64/1 clients", "15.00x", "", false},
		{"meta ceiling: stat 64 clients / create 1 client", "30.00x", "", false},
		{"meta create+delete locked/unlocked dir, 1 client", "0.99x", "≥ 0.95x", true},
		{"meta create+delete locked/unlocked dir, 64 clients", "0.90x", "≥ 0.95x", false},
		{"locks etcd lock+unlock, 64 clients", "2000 ops/s, p50 1.000ms, p99 2.000ms", "", false},
		{"locks bfs/etcd, 1 client", "0.75x", "", false},
		{"locks bfs/etcd, 64 clients", "3.00x", "≥ 3x", true},
		{"io put (median)", "100.0 MB/s", "", false},
		{"io put / (raw write / 3)", "0.80x", "≥ 0.70x", true},
		{"io get / raw read", "0.50x", "≥ 0.70x", false},
		{"seal sent → BlockReceived from all, 1000 blocks", "p50 1.000ms, p99 5.000ms", "", false},
		{"fence K=10 (3 trials)", "p50 10.000ms, p99 20.000ms", "", false},
		{"fence K=1000 (3 trials)", "p50 900.000ms, p99 1200.000ms", "≤ 1s at K=1000", false},
		{"expiry hand-over, TTL 2s (2 trials)", "p50 2500.000ms, max 3100.000ms", "≤ TTL + 1s", false},
	} {
		v, ok := got[tc.figure]
		if !ok {
			t.Errorf("no figure %q", tc.figure)
			continue
		}
		if v.measured != tc.measured || v.target != tc.target || (v.target != "" && v.met != tc.met) {
			t.Errorf("%s: %q %q met=%v, want %q %q met=%v", tc.figure, v.measured, v.target, v.met, tc.measured, tc.target, tc.met)
		}
	}

	var b strings.Builder
	if err := renderTargets(&b, verdicts(results)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, line := range []string{"meta create, 64/1 clients", "io get / raw read"} {
		if !strings.Contains(out, line) {
			t.Errorf("no %q in:\n%s", line, out)
		}
	}
	if n := strings.Count(out, "MISSED"); n != 5 {
		t.Errorf("%d targets missed, want 5:\n%s", n, out)
	}
}
