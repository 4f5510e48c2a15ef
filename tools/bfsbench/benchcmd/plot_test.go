package benchcmd

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/bfs-go/bfs/internal/bench"
)

// Every chart refuses to draw nothing, rather than write an empty or
// misleading file.
func TestChartsWithoutDataFail(t *testing.T) {
	unrelated := []bench.Result{{Name: "other", Clients: 1, Ops: 1, Elapsed: time.Second, P50: 1, P90: 1, P99: 1}}
	for name, chart := range map[string]chartFunc{
		"locks": locksChart, "fence": fenceChart, "meta": metaChart, "io": ioChart, "seal": sealChart, "expiry": expiryChart,
		"capi": capiChart, "tera": teraChart, "ha": haChart,
	} {
		if _, err := chart(unrelated); err == nil {
			t.Errorf("%s: drew a chart of no data", name)
		}
	}
}

// A sweep of one point (one client count, one K) still draws.
func TestChartsOfOnePoint(t *testing.T) {
	lat := bench.Result{Clients: 1, Ops: 3, Elapsed: time.Second, P50: time.Millisecond, P90: 2 * time.Millisecond, P99: 3 * time.Millisecond}
	locks, fence := lat, lat
	locks.Name = "lock+unlock"
	fence.Name, fence.Param = "fence", "files=1000"
	for name, tc := range map[string]struct {
		chart chartFunc
		r     bench.Result
	}{"locks": {locksChart, locks}, "fence": {fenceChart, fence}} {
		path := filepath.Join(t.TempDir(), name+".png")
		if err := drawChart(tc.chart, []bench.Result{tc.r}, path); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		checkPNG(t, path)
	}
}

func TestFenceFiles(t *testing.T) {
	for param, want := range map[string]float64{"files=1": 1, "files=1000": 1000, "trial 1": -1, "files=x": -1, "": -1} {
		k, ok := fenceFiles(bench.Result{Param: param})
		if ok != (want >= 0) || (ok && k != want) {
			t.Errorf("fenceFiles(%q) = %v, %v", param, k, ok)
		}
	}
}

func TestValidatePlotPath(t *testing.T) {
	for path, ok := range map[string]bool{"": true, "a.png": true, "a.PNG": true, "d/a.svg": true, "a.pdf": true, "a.gif": false, "png": false} {
		if err := validatePlotPath("--plot", path); (err == nil) != ok {
			t.Errorf("validatePlotPath(%q) = %v", path, err)
		}
	}
}

func TestZeroAxisTicks(t *testing.T) {
	for max, want := range map[float64]float64{27000: 5000, 13500: 2000, 9.5: 1, 1000: 100, 1999: 200} {
		var p = newChart("", "", "")
		zeroAxis(&p.Y, max)
		ticks := p.Y.Tick.Marker.Ticks(0, max)
		if len(ticks) < 2 || ticks[1].Value-ticks[0].Value != want || len(ticks) > 11 {
			t.Errorf("zeroAxis(%v): ticks %v, want a step of %v", max, ticks, want)
		}
	}
}

// ha draws its failovers, or without them (--trials 0) the lock
// throughputs beside etcd's.
func TestHAChartWithoutFailover(t *testing.T) {
	var rs []bench.Result
	for _, v := range []string{"voters=1", "voters=3"} {
		rs = append(rs,
			bench.Result{Name: haLocksRow, Clients: 64, Param: v, Ops: 2000, Elapsed: time.Second},
			bench.Result{Name: haEtcdLocksRow, Clients: 64, Param: v, Ops: 1000, Elapsed: time.Second},
			bench.Result{Name: haRatioRow, Clients: 64, Param: v, Value: 2, Unit: "x"})
	}
	path := filepath.Join(t.TempDir(), "ha.png")
	if err := drawChart(haChart, rs, path); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path)
}
