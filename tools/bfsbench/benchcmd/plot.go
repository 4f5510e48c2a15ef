package benchcmd

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/bfs-go/bfs/internal/bench"
)

// Every benchmark draws one chart, the one its question is read from:
// locks the latency percentiles against the client count (beside etcd's),
// fence the fence time against the number of open files, and so on.

// chartFunc draws one benchmark's chart from its results.
type chartFunc func(results []bench.Result) (*plot.Plot, error)

// chartSize is the size of every chart; at PNG's default 96 dpi it is
// 960×600 pixels.
const (
	chartWidth  = 10 * vg.Inch
	chartHeight = 6.25 * vg.Inch
)

// validatePlotPath checks a chart file name flag: empty, or a format the
// charts can be written as.
func validatePlotPath(flag, path string) error {
	if path == "" {
		return nil
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png", ".svg", ".pdf":
		return nil
	}
	return fmt.Errorf("%s %q: the file name must end in .png, .svg or .pdf", flag, path)
}

// drawChart draws chart from results to path, in the format its extension
// names.
func drawChart(chart chartFunc, results []bench.Result, path string) error {
	p, err := chart(results)
	if err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	return p.Save(chartWidth, chartHeight, path)
}

// errNoData is the error of a chart with nothing to draw.
func errNoData(what string) error { return fmt.Errorf("no %s results to draw", what) }

func newChart(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	return p
}

// line is one series of a line chart.
type line struct {
	label string
	xys   plotter.XYs
	// color and shape index plotutil's palettes; dashed draws the line
	// dashed.
	color, shape int
	dashed       bool
}

// addLines adds each series, with its points marked, sorted by x, and
// returns the range of the y values (for a log axis).
func addLines(p *plot.Plot, lines ...line) (lo, hi float64, err error) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range lines {
		if len(s.xys) == 0 {
			continue
		}
		xys := slices.Clone(s.xys)
		slices.SortFunc(xys, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", s.label, err)
		}
		l.Color, pts.Color = plotutil.Color(s.color), plotutil.Color(s.color)
		l.Width = vg.Points(1.5)
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		pts.Shape = plotutil.Shape(s.shape)
		pts.Radius = vg.Points(3)
		p.Add(l, pts)
		p.Legend.Add(s.label, l, pts)
		for _, xy := range xys {
			lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
		}
	}
	if math.IsInf(lo, 1) {
		return 0, 0, fmt.Errorf("every series is empty")
	}
	return lo, hi, nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// addLevel draws a dashed horizontal line at y across [x0, x1], such as a
// target, labelled in the legend.
func addLevel(p *plot.Plot, label string, x0, x1, y float64, c color.Color) error {
	l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: y}, {X: x1, Y: y}})
	if err != nil {
		return err
	}
	l.Color = c
	l.Width = vg.Points(1)
	l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(l)
	p.Legend.Add(label, l)
	return nil
}

var targetColor = color.RGBA{R: 200, A: 255}

// countAxis makes a a log axis over the counts xs (clients, files), ticked
// at exactly those counts; a single count gets a linear axis around it.
func countAxis(a *plot.Axis, xs []float64) {
	xs = slices.Compact(slices.Sorted(slices.Values(xs)))
	ticks := make(plot.ConstantTicks, len(xs))
	for i, x := range xs {
		ticks[i] = plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', -1, 64)}
	}
	a.Tick.Marker = ticks
	if len(xs) < 2 || xs[0] <= 0 {
		return
	}
	a.Scale = plot.LogScale{}
	// A margin of a fifth of the span on each side keeps the end points
	// off the frame.
	span := math.Log10(xs[len(xs)-1] / xs[0])
	a.Min, a.Max = xs[0]/math.Pow(10, span/20), xs[len(xs)-1]*math.Pow(10, span/20)
}

// logAxis makes a a log axis from the decade at or below lo/3 (room for
// the legend under the lowest line) to the decade at or above hi, ticked
// at 1, 2 and 5 times each power of ten.
func logAxis(a *plot.Axis, lo, hi float64) {
	if lo <= 0 || hi <= 0 {
		return // cannot happen for latencies that were measured; stay linear
	}
	a.Scale = plot.LogScale{}
	a.Min = math.Pow(10, math.Floor(math.Log10(lo/3)))
	a.Max = math.Pow(10, math.Ceil(math.Log10(hi)))
	if a.Min == a.Max {
		a.Max *= 10
	}
	var ticks plot.ConstantTicks
	for d := a.Min; d < a.Max*1.001; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := d * m; v <= a.Max*1.001 {
				ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
			}
		}
	}
	a.Tick.Marker = ticks
}

// zeroAxis makes a a linear axis from 0 to max, ticked at round numbers
// (1, 2 or 5 times a power of ten apart, at most ten of them).
func zeroAxis(a *plot.Axis, max float64) {
	a.Min, a.Max = 0, max
	if max <= 0 {
		return
	}
	// max is in [decade, 10*decade): the smallest of these steps that
	// gives at most ten ticks.
	decade := math.Pow(10, math.Floor(math.Log10(max)))
	step := decade
	for _, m := range []float64{0.5, 0.2, 0.1} {
		if max/(decade*m) > 10 {
			break
		}
		step = decade * m
	}
	var ticks plot.ConstantTicks
	for v := 0.0; v <= max; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	a.Tick.Marker = ticks
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentiles are the latency percentiles a chart draws, in the order of
// their colors.
var percentiles = []struct {
	name string
	of   func(bench.Result) time.Duration
}{
	{"p50", func(r bench.Result) time.Duration { return r.P50 }},
	{"p90", func(r bench.Result) time.Duration { return r.P90 }},
	{"p99", func(r bench.Result) time.Duration { return r.P99 }},
}

func named(results []bench.Result, name string) []bench.Result {
	var out []bench.Result
	for _, r := range results {
		if r.Name == name {
			out = append(out, r)
		}
	}
	return out
}

// locksChart draws lock+unlock latency percentiles against the client
// count, bfs solid and etcd (with --vs-etcd) dashed.
func locksChart(results []bench.Result) (*plot.Plot, error) {
	p := newChart("Lock+unlock cycle latency vs clients", "clients", "latency (ms)")
	var lines []line
	var xs []float64
	for si, sys := range []struct{ label, name string }{{"bfs", "lock+unlock"}, {"etcd", "lock+unlock (etcd)"}} {
		rs := named(results, sys.name)
		for pi, pc := range percentiles {
			s := line{label: sys.label + " " + pc.name, color: pi, shape: si, dashed: si == 1}
			for _, r := range rs {
				if r.HasLatency() {
					s.xys = append(s.xys, plotter.XY{X: float64(r.Clients), Y: millis(pc.of(r))})
					xs = append(xs, float64(r.Clients))
				}
			}
			lines = append(lines, s)
		}
	}
	if len(xs) == 0 {
		return nil, errNoData("lock+unlock")
	}
	lo, hi, err := addLines(p, lines...)
	if err != nil {
		return nil, err
	}
	countAxis(&p.X, xs)
	logAxis(&p.Y, lo, hi)
	p.Legend.Top, p.Legend.Left = false, false // latency grows to the right
	return p, nil
}

// fenceFiles is K of a fence result ("files=K").
func fenceFiles(r bench.Result) (float64, bool) {
	k, err := strconv.Atoi(strings.TrimPrefix(r.Param, "files="))
	return float64(k), err == nil && strings.HasPrefix(r.Param, "files=")
}

// fenceTarget is the fence time the directory-lock issue sets for
// fenceTargetFiles open files.
const (
	fenceTarget      = time.Second
	fenceTargetFiles = 1000
)

// fenceChart draws the fence time's p50 and p99 against the number of
// open files, the time until the holder is told, and the target.
func fenceChart(results []bench.Result) (*plot.Plot, error) {
	p := newChart("Fence time vs files open for write (force-unlock → UNLOCKED)", "files open for write (K)", "time (ms)")
	lines := []line{
		{label: "fence p50", color: 0, shape: 0},
		{label: "fence p99", color: 2, shape: 0},
		{label: "holder told p50", color: 1, shape: 1, dashed: true},
	}
	var xs []float64
	for _, r := range results {
		k, ok := fenceFiles(r)
		if !ok || !r.HasLatency() {
			continue
		}
		switch r.Name {
		case "fence":
			lines[0].xys = append(lines[0].xys, plotter.XY{X: k, Y: millis(r.P50)})
			lines[1].xys = append(lines[1].xys, plotter.XY{X: k, Y: millis(r.P99)})
			xs = append(xs, k)
		case "holder told":
			lines[2].xys = append(lines[2].xys, plotter.XY{X: k, Y: millis(r.P50)})
		}
	}
	if len(xs) == 0 {
		return nil, errNoData("fence")
	}
	lo, hi, err := addLines(p, lines...)
	if err != nil {
		return nil, err
	}
	x0, x1 := slices.Min(xs), slices.Max(xs)
	target := millis(fenceTarget)
	if err := addLevel(p, fmt.Sprintf("target at K=%d: ≤ %v", fenceTargetFiles, fenceTarget), x0, x1, target, targetColor); err != nil {
		return nil, err
	}
	countAxis(&p.X, xs)
	logAxis(&p.Y, lo, math.Max(hi, target))
	p.Legend.Top, p.Legend.Left = false, false // time grows to the right
	return p, nil
}

// metaTarget is the create throughput the foundation issue sets for many
// clients.
const metaTarget = 10000

// metaChart draws each namespace operation's throughput against the
// client count.
func metaChart(results []bench.Result) (*plot.Plot, error) {
	p := newChart("Namespace operations: throughput vs clients", "clients", "ops/s")
	var lines []line
	var xs []float64
	for i, name := range []string{"create", "create+delete", "create+delete (locked dir)", "stat"} {
		s := line{label: name, color: i, shape: i, dashed: name == "create+delete (locked dir)"}
		for _, r := range named(results, name) {
			s.xys = append(s.xys, plotter.XY{X: float64(r.Clients), Y: r.OpsPerSec()})
			xs = append(xs, float64(r.Clients))
		}
		lines = append(lines, s)
	}
	if len(xs) == 0 {
		return nil, errNoData("meta")
	}
	_, hi, err := addLines(p, lines...)
	if err != nil {
		return nil, err
	}
	if err := addLevel(p, "target: 10000 creates/s", slices.Min(xs), slices.Max(xs), metaTarget, targetColor); err != nil {
		return nil, err
	}
	countAxis(&p.X, xs)
	zeroAxis(&p.Y, 1.35*math.Max(hi, metaTarget)) // room for the legend
	return p, nil
}

// ioChart draws the median throughputs as bars: the raw disk's beside
// what bfs made of it.
func ioChart(results []bench.Result) (*plot.Plot, error) {
	med := map[string]float64{}
	replication := 0
	for _, r := range results {
		if r.Param != "median" {
			continue
		}
		med[r.Name] = r.Value
		if n, err := fmt.Sscanf(r.Name, "put / (raw write / %d)", &replication); n != 1 || err != nil {
			continue
		}
	}
	for _, n := range []string{"raw write", "raw read", "put", "get"} {
		if _, ok := med[n]; !ok {
			return nil, errNoData("io " + n)
		}
	}
	if replication < 1 {
		return nil, errNoData("io put ratio")
	}
	bars := []struct {
		name string
		v    float64
		raw  bool
	}{
		{"raw write", med["raw write"], true},
		{fmt.Sprintf("raw write / %d", replication), med["raw write"] / float64(replication), true},
		{fmt.Sprintf("put (×%d)", replication), med["put"], false},
		{"raw read", med["raw read"], true},
		{"get", med["get"], false},
	}
	p := newChart("Put and get vs the raw disk (medians)", "", "MB/s")
	raw, bfs := make(plotter.Values, len(bars)), make(plotter.Values, len(bars))
	labels := plotter.XYLabels{}
	var names []string
	for i, b := range bars {
		if b.raw {
			raw[i] = b.v
		} else {
			bfs[i] = b.v
		}
		names = append(names, b.name)
		labels.XYs = append(labels.XYs, plotter.XY{X: float64(i), Y: b.v})
		labels.Labels = append(labels.Labels, strconv.FormatFloat(b.v, 'f', 1, 64))
	}
	for _, s := range []struct {
		label string
		v     plotter.Values
		c     color.Color
	}{{"raw disk (Go loop, fdatasync)", raw, color.Gray{Y: 150}}, {"bfs (SDK)", bfs, plotutil.Color(0)}} {
		b, err := plotter.NewBarChart(s.v, vg.Points(40))
		if err != nil {
			return nil, err
		}
		b.Color = s.c
		b.LineStyle.Width = 0
		p.Add(b)
		p.Legend.Add(s.label, b)
	}
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, err
	}
	l.Offset = vg.Point{X: -vg.Points(8), Y: vg.Points(3)}
	p.Add(l)
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(bars))-0.4 // whole bars at the ends
	p.Y.Min = 0
	p.Y.Max *= 1.3 // room for the labels and the legend
	p.Legend.Left = false
	return p, nil
}

// sealChart draws the cumulative distributions of the seal latency and of
// the single Seal RPC.
func sealChart(results []bench.Result) (*plot.Plot, error) {
	p := newChart("Seal latency: cumulative distribution", "latency (ms)", "fraction of seals at or below")
	var lo, hi float64 = math.Inf(1), math.Inf(-1)
	i := 0
	for _, name := range []string{"seal→closed", "seal RPC"} {
		for _, r := range named(results, name) {
			if len(r.Samples) == 0 {
				continue
			}
			s := slices.Sorted(slices.Values(r.Samples))
			xys := make(plotter.XYs, len(s))
			for j, d := range s {
				xys[j] = plotter.XY{X: millis(d), Y: float64(j+1) / float64(len(s))}
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.StepStyle = plotter.PostStep
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s (n=%d, p50 %s, p99 %s)", name, len(s), ms(r.P50), ms(r.P99)), l)
			lo, hi = math.Min(lo, xys[0].X), math.Max(hi, xys[len(xys)-1].X)
			i++
		}
	}
	if i == 0 {
		return nil, errNoData("seal")
	}
	logAxis(&p.X, lo, hi)
	p.Y.Min, p.Y.Max = 0, 1
	return p, nil
}

// expiryChart draws each trial's hand-over time beside the TTL (the
// earliest it can be) and the target TTL + 1 s.
func expiryChart(results []bench.Result) (*plot.Plot, error) {
	rs := named(results, "expiry hand-over")
	if len(rs) == 0 || len(rs[0].Samples) == 0 {
		return nil, errNoData("expiry")
	}
	r := rs[0]
	ttl, err := time.ParseDuration(strings.TrimPrefix(r.Param, "ttl="))
	if err != nil {
		return nil, fmt.Errorf("expiry TTL %q: %w", r.Param, err)
	}
	p := newChart("Dead holder: lock hand-over per trial", "trial", "time since the holder's last keep-alive (s)")
	s := line{label: "hand-over", shape: 0}
	var xs []float64
	for i, d := range r.Samples {
		s.xys = append(s.xys, plotter.XY{X: float64(i + 1), Y: d.Seconds()})
		xs = append(xs, float64(i+1))
	}
	_, hi, err := addLines(p, s)
	if err != nil {
		return nil, err
	}
	x0, x1 := 1.0, float64(len(xs))
	if err := addLevel(p, "TTL "+ttl.String()+" (the earliest possible)", x0, x1, ttl.Seconds(), color.Gray{Y: 120}); err != nil {
		return nil, err
	}
	if err := addLevel(p, "target: TTL + "+expirySlack.String(), x0, x1, (ttl + expirySlack).Seconds(), targetColor); err != nil {
		return nil, err
	}
	ticks := make(plot.ConstantTicks, len(xs))
	for i, x := range xs {
		ticks[i] = plot.Tick{Value: x, Label: strconv.Itoa(i + 1)}
	}
	p.X.Tick.Marker = ticks
	p.X.Min, p.X.Max = 0.5, x1+0.5
	p.Y.Min, p.Y.Max = 0, 1.2*math.Max(hi, (ttl+expirySlack).Seconds())
	p.Legend.Top, p.Legend.Left = false, false
	return p, nil
}

// ratioChart draws the results named names, ratios, as bars labelled by
// their names less trim, beside the target.
func ratioChart(title, yLabel, trim string, target float64, names ...string) chartFunc {
	return func(results []bench.Result) (*plot.Plot, error) {
		var vs plotter.Values
		labels := plotter.XYLabels{}
		var bars []string
		for _, r := range results {
			if !slices.Contains(names, r.Name) {
				continue
			}
			labels.XYs = append(labels.XYs, plotter.XY{X: float64(len(vs)), Y: r.Value})
			labels.Labels = append(labels.Labels, fmt.Sprintf("%.2fx", r.Value))
			vs = append(vs, r.Value)
			bars = append(bars, strings.TrimPrefix(r.Name, trim))
		}
		if len(vs) == 0 {
			return nil, errNoData(strings.Join(names, ", "))
		}
		p := newChart(title, "", yLabel)
		b, err := plotter.NewBarChart(vs, vg.Points(60))
		if err != nil {
			return nil, err
		}
		b.Color = plotutil.Color(0)
		b.LineStyle.Width = 0
		p.Add(b)
		l, err := plotter.NewLabels(labels)
		if err != nil {
			return nil, err
		}
		l.Offset = vg.Point{X: -vg.Points(12), Y: vg.Points(3)}
		p.Add(l)
		if err := addLevel(p, fmt.Sprintf("target ≥ %sx", trimFloat(target)), -0.5, float64(len(vs))-0.5, target, targetColor); err != nil {
			return nil, err
		}
		p.NominalX(bars...)
		p.X.Min, p.X.Max = -0.6, float64(len(vs))-0.4
		p.Y.Min, p.Y.Max = 0, max(1.3, slices.Max(vs)*1.3)
		p.Legend.Left = false
		return p, nil
	}
}
