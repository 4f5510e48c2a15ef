package benchcmd

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/sdk"
)

// The tls benchmark measures what mutual TLS costs: the same workloads on
// two clusters started side by side on this host, one with TLS (its own
// CA and certificates, as the sandbox makes them) and one in plaintext,
// alternating between them so that drift on the shared machine favors
// neither.

type tlsOptions struct{ sizeTrials }

func defaultTLSOptions() tlsOptions { return tlsOptions{sizeTrials{size: 256 << 20, trials: 3}} }

func (o *tlsOptions) register(f *pflag.FlagSet, prefix string) {
	o.sizeTrials.register(f, prefix, "size of each file put (e.g. 256MiB)", "put trials on each cluster")
}

func newTLSCmd(c *common) *cobra.Command {
	o := defaultTLSOptions()
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "What mutual TLS costs: lock+unlock, create and put on a cluster with TLS beside one in plaintext",
		Args:  cobra.NoArgs,
	}
	o.register(cmd.Flags(), "")
	c.benchCommandOn(cmd, func() error { return o.validate("") }, o.run, tlsChart, c.tlsTargets)
	return cmd
}

// The rows of the tls benchmark: each workload's figure on either
// cluster, and their ratio.
const (
	tlsLocksRow  = "TLS/plaintext lock+unlock"
	tlsCreateRow = "TLS/plaintext create"
	tlsPutRow    = "TLS/plaintext put"
	tlsNote      = "throughput with mutual TLS over the same in plaintext, on two clusters side by side, alternating (plaintext, TLS, TLS, plaintext, twice for the closed loops); 1.00x: TLS is free"
)

// tlsTargets starts the two clusters, even with --nameserver (as repair
// starts its own): the TLS one is returned, with the plaintext one beside
// it.
func (c *common) tlsTargets(ctx context.Context) (*cluster, error) {
	own := *c
	own.nameserver = ""
	secure, err := own.targetTLS(ctx, true)
	if err != nil {
		return nil, err
	}
	plain, err := own.targetTLS(ctx, false)
	if err != nil {
		secure.stop()
		return nil, err
	}
	stop := secure.stop
	secure.plain = plain
	secure.stop = func() { plain.stop(); stop() }
	return secure, nil
}

func (o *tlsOptions) run(ctx context.Context, c *common, secure *cluster) ([]bench.Result, error) {
	if secure.plain == nil {
		return nil, errors.New("tls needs the two clusters tlsTargets starts")
	}
	both := [2]*cluster{secure.plain, secure}
	var results []bench.Result
	for _, n := range c.clients {
		rs, err := tlsClosedLoops(ctx, c, both, n)
		if err != nil {
			return nil, err
		}
		results = append(results, rs...)
	}
	puts, err := o.puts(ctx, c, both)
	if err != nil {
		return nil, err
	}
	return append(results, puts...), nil
}

// tlsName names the two sides in the rows.
func tlsName(secure bool) string {
	if secure {
		return "TLS"
	}
	return "plaintext"
}

// tlsClosedLoops measures lock+unlock and create with n clients on each
// cluster, in eighths of --duration (plaintext, TLS, TLS, plaintext,
// twice): the machine's load drifts, and this order cancels a steady
// drift while no slice is long.
func tlsClosedLoops(ctx context.Context, c *common, both [2]*cluster, n int) ([]bench.Result, error) {
	var clients [2][]*sdk.Client
	for i, cl := range both {
		cs, err := dialN(ctx, cl.addr, n, cl.creds())
		if err != nil {
			return nil, err
		}
		defer closeAll(cs)
		clients[i] = cs
	}
	var locks, creates [2][]bench.Result
	// cpu is the process's CPU time in each side's slices, by workload:
	// with clients and servers in this process, CPU per operation is what
	// TLS costs, whatever share of the machine others leave.
	var cpu [2][2]time.Duration
	cpuOK := true
	timed := func(w, i int, run func() (bench.Result, error)) (bench.Result, error) {
		before, ok1 := processCPU()
		r, err := run()
		after, ok2 := processCPU()
		cpu[w][i] += after - before
		cpuOK = cpuOK && ok1 && ok2
		return r, err
	}
	for q, i := range []int{0, 1, 1, 0, 0, 1, 1, 0} {
		root := fmt.Sprintf("%s/tls/%d/q%d", c.root(), n, q)
		op, err := bfsLockCycle(ctx, clients[i], root+"/locks")
		if err != nil {
			return nil, err
		}
		r, err := timed(0, i, func() (bench.Result, error) {
			return c.closedLoopFor(ctx, "lock+unlock ("+tlsName(i == 1)+")", n, c.duration/8, op)
		})
		if err != nil {
			return nil, err
		}
		locks[i] = append(locks[i], r)
		for ci, cl := range clients[i] {
			if err := cl.MkdirAll(ctx, fmt.Sprintf("%s/c%d", root, ci), 0o755); err != nil {
				return nil, err
			}
		}
		r, err = timed(1, i, func() (bench.Result, error) {
			return c.closedLoopFor(ctx, "create ("+tlsName(i == 1)+")", n, c.duration/8, func(ctx context.Context, ci, k int) error {
				return clients[i][ci].Touch(ctx, fmt.Sprintf("%s/c%d/f%d", root, ci, k))
			})
		})
		if err != nil {
			return nil, err
		}
		creates[i] = append(creates[i], r)
	}
	var out []bench.Result
	for w, wl := range []struct {
		runs      [2][]bench.Result
		row, name string
	}{{locks, tlsLocksRow, "lock+unlock"}, {creates, tlsCreateRow, "create"}} {
		plain, secure := bench.Merge(wl.runs[0]...), bench.Merge(wl.runs[1]...)
		plain.Note, secure.Note = tlsLoopNote, tlsLoopNote
		ratio := bench.Result{Name: wl.row, Clients: n, Unit: "x", Note: tlsNote}
		if p := plain.OpsPerSec(); p > 0 {
			ratio.Value = secure.OpsPerSec() / p
		}
		out = append(out, plain, secure, ratio)
		if !cpuOK || plain.Ops == 0 || secure.Ops == 0 {
			continue
		}
		perOp := func(i int, r bench.Result) bench.Result {
			return bench.Result{Name: wl.name + " CPU/op (" + tlsName(i == 1) + ")", Clients: n, Ops: r.Ops,
				Value: float64(cpu[w][i].Microseconds()) / float64(r.Ops), Unit: "µs", Note: tlsCPUNote}
		}
		p, s := perOp(0, plain), perOp(1, secure)
		cr := bench.Result{Name: wl.row + " CPU/op", Clients: n, Unit: "x", Note: tlsCPUNote}
		if p.Value > 0 {
			cr.Value = s.Value / p.Value
		}
		out = append(out, p, s, cr)
	}
	return out, nil
}

const tlsCPUNote = "CPU time (user and system) of this process, clients and cluster together, over the operations (or the MB put), in the same slices; TLS/plaintext above 1.00x is what TLS adds to an operation"

const tlsLoopNote = "lock+unlock: SDK LockDir + Unlock, each client its own directory, connection and session; create: SDK Touch of a new file in the client's directory"

// puts puts --size with 3 replicas --trials times on each cluster, the
// plaintext one first in odd trials, and reports the medians.
func (o *tlsOptions) puts(ctx context.Context, c *common, both [2]*cluster) ([]bench.Result, error) {
	var benches [2]*ioBench
	io := &ioOptions{size: o.size, replication: 3, trials: o.trials}
	for i, cl := range both {
		client, err := sdk.Dial(ctx, cl.addr, cl.creds())
		if err != nil {
			return nil, err
		}
		defer client.Close()
		benches[i] = &ioBench{o: io, c: c, cl: cl, client: client, pattern: newPattern()}
	}
	var mbs [2][]float64
	var cpu [2]time.Duration
	cpuOK := true
	for t := range o.trials {
		for _, i := range [][2]int{{0, 1}, {1, 0}}[t%2] {
			path := fmt.Sprintf("%s/tls/put-%d", c.root(), t)
			if err := benches[i].client.MkdirAll(ctx, c.root()+"/tls", 0o755); err != nil {
				return nil, err
			}
			c.progressf("tls put trial %d (%s): %s, replication 3...", t+1, tlsName(i == 1), formatSize(int64(o.size)))
			before, ok1 := processCPU()
			v, err := benches[i].put(ctx, path, int64(o.size))
			if err != nil {
				return nil, fmt.Errorf("put (%s): %w", tlsName(i == 1), err)
			}
			after, ok2 := processCPU()
			cpu[i] += after - before
			cpuOK = cpuOK && ok1 && ok2
			if err := benches[i].client.Remove(ctx, path); err != nil {
				return nil, err
			}
			c.progressf("  %.1f MB/s", v)
			mbs[i] = append(mbs[i], v)
		}
	}
	n := int64(o.trials)
	row := func(i int) bench.Result {
		return bench.Result{Name: "put (" + tlsName(i == 1) + ")", Clients: 1, Param: "median", Ops: n, Value: bench.Median(mbs[i]), Unit: "MB/s",
			Note: "SDK Create (replication 3) + 1 MiB writes + Close of " + formatSize(int64(o.size)) + ", median of the trials"}
	}
	plain, secure := row(0), row(1)
	ratio := bench.Result{Name: tlsPutRow, Clients: 1, Param: "median", Ops: n, Unit: "x", Note: tlsNote}
	if plain.Value > 0 {
		ratio.Value = secure.Value / plain.Value
	}
	out := []bench.Result{plain, secure, ratio}
	if !cpuOK {
		return out, nil
	}
	mb := float64(n) * float64(o.size) / 1e6
	perMB := func(i int) bench.Result {
		return bench.Result{Name: "put CPU/MB (" + tlsName(i == 1) + ")", Clients: 1, Param: "all", Ops: n,
			Value: float64(cpu[i].Microseconds()) / mb, Unit: "µs", Note: tlsCPUNote}
	}
	p, s := perMB(0), perMB(1)
	cr := bench.Result{Name: tlsPutRow + " CPU/MB", Clients: 1, Param: "all", Ops: n, Unit: "x", Note: tlsCPUNote}
	if p.Value > 0 {
		cr.Value = s.Value / p.Value
	}
	return append(out, p, s, cr), nil
}

// tlsChart draws the three ratios.
func tlsChart(results []bench.Result) (*plot.Plot, error) {
	var names []string
	var vals plotter.Values
	labels := plotter.XYLabels{}
	for _, r := range results {
		if r.Unit != "x" || strings.Contains(r.Name, " CPU/") {
			continue
		}
		name := r.Name
		if r.Param != "median" {
			name = fmt.Sprintf("%s, %s", r.Name, nClients(r.Clients))
		}
		labels.XYs = append(labels.XYs, plotter.XY{X: float64(len(vals)), Y: r.Value})
		labels.Labels = append(labels.Labels, strconv.FormatFloat(r.Value, 'f', 2, 64)+"x")
		names, vals = append(names, name), append(vals, r.Value)
	}
	if len(vals) == 0 {
		return nil, errNoData("tls")
	}
	p := newChart("Throughput with mutual TLS over plaintext", "", "TLS / plaintext")
	b, err := plotter.NewBarChart(vals, vg.Points(40))
	if err != nil {
		return nil, err
	}
	b.Color, b.LineStyle.Width = plotutil.Color(0), 0
	p.Add(b)
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, err
	}
	l.Offset = vg.Point{X: -vg.Points(10), Y: vg.Points(3)}
	p.Add(l)
	one, err := plotter.NewLine(plotter.XYs{{X: -0.6, Y: 1}, {X: float64(len(vals)) - 0.4, Y: 1}})
	if err != nil {
		return nil, err
	}
	one.Color = color.Gray{Y: 120}
	p.Add(one)
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(vals))-0.4
	p.Y.Min, p.Y.Max = 0, 1.2
	return p, nil
}

// tlsVerdicts judges the ratios: the targets are set at 64
// clients for locks, and for put.
func tlsVerdicts(results []bench.Result) []verdict {
	var vs []verdict
	for _, r := range results {
		switch r.Name {
		case tlsLocksRow + " CPU/op", tlsCreateRow + " CPU/op":
			vs = append(vs, verdict{figure: fmt.Sprintf("tls %s, %s", r.Name, nClients(r.Clients)), measured: fmt.Sprintf("%.2fx", r.Value)})
		case tlsPutRow + " CPU/MB":
			vs = append(vs, verdict{figure: "tls " + r.Name, measured: fmt.Sprintf("%.2fx", r.Value)})
		case tlsLocksRow, tlsCreateRow:
			v := verdict{figure: fmt.Sprintf("tls %s, %s", r.Name, nClients(r.Clients)), measured: fmt.Sprintf("%.2fx", r.Value)}
			if r.Name == tlsLocksRow && r.Clients == manyClients {
				v.target, v.met = atLeast(r.Value, tlsLocksTarget, "x")
			}
			vs = append(vs, v)
		case tlsPutRow:
			v := verdict{figure: "tls " + r.Name + " (median)", measured: fmt.Sprintf("%.2fx", r.Value)}
			v.target, v.met = atLeast(r.Value, tlsPutTarget, "x")
			vs = append(vs, v)
		}
	}
	return vs
}
