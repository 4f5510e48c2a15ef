package benchcmd

import (
	"context"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/bfs-go/bfs/internal/bench"
)

// Every etcd lock+unlock cycle the loop counts is one put and one delete
// in etcd (two revisions), and leaves no key behind.
func TestEtcdLockCyclesAreWhatTheLoopCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := startEtcd(ctx, filepath.Join(t.TempDir(), "etcd"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	lockers, err := newEtcdLockers(ctx, s.endpoint, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer lockers.close()
	cli := lockers.clients[0]
	before := revision(t, cli)
	const ops = 50
	r, err := bench.Run(ctx, "etcd", 2, time.Minute, ops, lockers.op("/t"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != ops || r.Errors != 0 {
		t.Fatalf("ops %d errors %d, want %d and 0", r.Ops, r.Errors, ops)
	}
	if got := revision(t, cli) - before; got != 2*ops {
		t.Errorf("etcd revision advanced by %d for %d cycles, want %d", got, ops, 2*ops)
	}
	left, err := cli.Get(ctx, "/t/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if left.Count != 0 {
		t.Errorf("%d lock keys left after the cycles", left.Count)
	}
}

func revision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), "revision-probe")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// locks --vs-etcd reports bfs and etcd with the same clients, and their
// ratio, in the table, the CSV and the chart.
func TestLocksVsEtcd(t *testing.T) {
	t.Parallel()
	png := filepath.Join(t.TempDir(), "locks.png")
	out, rows := run(t, "locks", "--vs-etcd", "--clients", "1,2", "--duration", "400ms", "--plot", png)
	for _, n := range []string{"1", "2"} {
		want(t, rows, "lock+unlock", n, "", "ops_per_s", "p50_ms", "p90_ms", "p99_ms")
		want(t, rows, "lock+unlock (etcd)", n, "", "ops_per_s", "p50_ms", "p90_ms", "p99_ms")
		want(t, rows, "bfs/etcd lock+unlock", n, "", "value")
		bfs := csvFloat(t, rows["lock+unlock|"+n+"|"], "ops_per_s")
		etcd := csvFloat(t, rows["lock+unlock (etcd)|"+n+"|"], "ops_per_s")
		ratio := csvFloat(t, rows["bfs/etcd lock+unlock|"+n+"|"], "value")
		if math.Abs(ratio-bfs/etcd) > 0.01*ratio+0.001 {
			t.Errorf("%s clients: ratio %v, want %v / %v", n, ratio, bfs, etcd)
		}
		// Both ran for the same time: two halves of --duration each (the
		// bounds are loose: this is a loaded machine's clock, not a speed).
		for _, name := range []string{"lock+unlock", "lock+unlock (etcd)"} {
			if e := csvFloat(t, rows[name+"|"+n+"|"], "elapsed_s"); e < 0.3 || e > 2 {
				t.Errorf("%s, %s clients: ran %vs, want about 0.4s", name, n, e)
			}
		}
	}
	for _, s := range []string{"bfs/etcd lock+unlock", "locks bfs/etcd, 2 clients"} {
		if !strings.Contains(out, s) {
			t.Errorf("no %q in:\n%s", s, out)
		}
	}
	checkPNG(t, png)
}

func csvFloat(t *testing.T, rec []string, col string) float64 {
	t.Helper()
	if rec == nil {
		t.Fatalf("no row for %s", col)
	}
	v, err := strconv.ParseFloat(rec[indexOf(csvHeader, col)], 64)
	if err != nil {
		t.Fatalf("%s: %v", col, err)
	}
	return v
}
