package benchcmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/lockfill"
	"github.com/bfs-go/bfs/sdk"
	"github.com/bfs-go/bfs/tools/lockctl/lockcmd"
)

type scaleOptions struct {
	locks    []int
	sessions int
	workers  int
	history  bool
	// heapProfile is where the started nameserver writes a heap profile
	// before it stops ("" for none), one file per --locks value.
	heapProfile string
}

func defaultScaleOptions() scaleOptions {
	return scaleOptions{locks: []int{100_000}, sessions: 100, workers: 64, history: true}
}

func (o *scaleOptions) register(f *pflag.FlagSet, prefix string) {
	f.IntSliceVar(&o.locks, prefix+"locks", o.locks, "directories locked, one measurement (on a fresh nameserver) per value")
	f.IntVar(&o.sessions, prefix+"sessions", o.sessions, "sessions holding them, as tablet servers, a group of directories each")
	f.IntVar(&o.workers, prefix+"workers", o.workers, "RPCs in flight while making and locking the directories")
	f.BoolVar(&o.history, prefix+"history", o.history, "lock, unlock and lock each directory again, so that it has one lock history entry")
	f.StringVar(&o.heapProfile, prefix+"heap-profile", "", "have the started nameserver write a heap profile here before it stops (locks=N appended to the name)")
}

func (o *scaleOptions) validate(prefix string) error {
	if err := validateCounts("--"+prefix+"locks", o.locks, 10_000_000); err != nil {
		return err
	}
	if o.sessions < 1 || o.sessions > slices.Min(o.locks) {
		return fmt.Errorf("--%ssessions must be in [1, the fewest --%slocks], got %d", prefix, prefix, o.sessions)
	}
	if o.workers < 1 || o.workers > 4096 {
		return fmt.Errorf("--%sworkers must be in [1, 4096], got %d", prefix, o.workers)
	}
	return nil
}

func newScaleCmd(c *common) *cobra.Command {
	o := defaultScaleOptions()
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Listing 100,000 locks: time through the SDK iterator and lockctl list -o json, and the nameserver's RSS per lock",
		Long: `scale starts a nameserver in a process of its own (so that its memory is
its own), has --sessions sessions make and lock --locks directories (each
also unlocked and locked again, so that it has one history entry, unless
--history=false), then lists them all through the SDK's AllDirLocks
iterator and through lockctl's list -o json (run in this process, its
output counted), and reads the nameserver's resident memory (Linux) before
and after the locks. With --nameserver it targets that cluster instead and
cannot measure its memory.`,
		Args: cobra.NoArgs,
	}
	o.register(cmd.Flags(), "")
	c.benchCommandOn(cmd, func() error { return o.validate("") }, o.run, scaleChart, c.scaleTarget)
	return cmd
}

// scaleTarget is the cluster scale measures: the running one with
// --nameserver; otherwise none yet, since run starts a nameserver process
// per --locks value.
func (c *common) scaleTarget(context.Context) (*cluster, error) {
	return &cluster{addr: c.nameserver, stop: func() {}}, nil
}

const (
	fillNote    = "one directory: Mkdir, LockDir (with --history also UnlockDir and LockDir again), raw RPCs, --workers in flight"
	sdkListNote = "SDK AllDirLocks over every lock, default page size, each lock counted"
	ctlListNote = "lockctl -o json list, run in-process (lockcmd.Main), one JSON object per lock written to a line counter"
	rssNote     = "the nameserver process's VmRSS after the locks were made, and that less its RSS before (just started), per lock"
)

func (o *scaleOptions) run(ctx context.Context, c *common, cl *cluster) ([]bench.Result, error) {
	var out []bench.Result
	for _, n := range o.locks {
		rs, err := o.measure(ctx, c, cl, n)
		if err != nil {
			return nil, fmt.Errorf("scale, %d locks: %w", n, err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// measure is one --locks value, on a fresh nameserver unless the cluster
// is a running one.
func (o *scaleOptions) measure(ctx context.Context, c *common, cl *cluster, n int) ([]bench.Result, error) {
	addr, root := cl.addr, fmt.Sprintf("%s/scale-%d", c.root(), n)
	// The nameserver of its own is plaintext (its memory is measured,
	// not TLS); a running cluster is reached as the flags say.
	certsDir := cl.certsDir
	var srv *scaleServer
	if addr == "" {
		var err error
		if srv, err = startScaleServer(ctx, c.stderr, o.profilePath(n)); err != nil {
			return nil, err
		}
		defer func() {
			if err := srv.stop(); err != nil {
				c.progressf("stopping the scale nameserver: %v", err)
			}
		}()
		addr, root, certsDir = srv.addr, "/scale", ""
	}
	raw := &rawConns{}
	if certsDir != "" {
		var err error
		if raw, err = cl.raw(); err != nil {
			return nil, err
		}
	}
	defer raw.close()
	ns, err := raw.nameserver(addr)
	if err != nil {
		return nil, err
	}
	if srv != nil {
		// It listens before it has elected itself (a group of one).
		if err := waitLeading(ctx, ns); err != nil {
			return nil, err
		}
	}
	before, rssErr := srv.rss()
	c.progressf("scale: making and locking %d directories under %s with %d sessions", n, root, o.sessions)
	start := time.Now()
	f, err := lockfill.Fill(ctx, ns, lockfill.Spec{Root: root, Locks: n, Sessions: o.sessions, Workers: o.workers, History: o.history})
	if err != nil {
		return nil, err
	}
	fill := time.Since(start)
	defer func() {
		// A cluster bfsbench started goes away whole; a running one is
		// left without the locks.
		err := f.Stop()
		if srv == nil {
			err = f.Release(context.WithoutCancel(ctx), ns)
		}
		if err != nil {
			c.progressf("releasing the scale locks: %v", err)
		}
	}()
	after, err := srv.rss()
	rssErr = cmpErr(rssErr, err)
	param := "locks=" + strconv.Itoa(n)
	rs := []bench.Result{{Name: "scale fill", Clients: o.workers, Param: param, Ops: int64(n), Elapsed: fill, Note: fillNote}}
	c.progressf("scale: %d directories locked in %v; listing them", n, fill.Round(time.Millisecond))
	lists, err := listAll(ctx, addr, certsDir, root, n)
	if err != nil {
		return nil, err
	}
	for _, l := range lists {
		l.Param = param
		rs = append(rs, l)
	}
	if rssErr != nil {
		c.progressf("scale: the nameserver's memory is not measured: %v", rssErr)
		return rs, nil
	}
	return append(rs,
		bench.Result{Name: "scale nameserver RSS", Clients: 1, Param: param, Value: float64(after) / (1 << 20), Unit: "MiB", Note: rssNote},
		bench.Result{Name: "scale RSS per lock", Clients: 1, Param: param, Value: float64(after-before) / float64(n), Unit: "B/lock", Note: rssNote},
	), nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (o *scaleOptions) profilePath(n int) string {
	if o.heapProfile == "" {
		return ""
	}
	return fmt.Sprintf("%s.locks=%d", o.heapProfile, n)
}

// listAll lists the n locks under root through the SDK iterator and
// through lockctl, and checks each saw them all; it presents the client
// certificate in certsDir, or speaks plaintext with "".
func listAll(ctx context.Context, addr, certsDir, root string, n int) ([]bench.Result, error) {
	client, err := sdk.Dial(ctx, addr, sdk.WithCertsDir(certsDir, certs.ClientUser))
	if err != nil {
		return nil, err
	}
	defer client.Close()
	start := time.Now()
	seen := 0
	for _, err := range client.AllDirLocks(ctx, sdk.LockQuery{Prefix: root}) {
		if err != nil {
			return nil, err
		}
		seen++
	}
	sdkTime := time.Since(start)
	if seen != n {
		return nil, fmt.Errorf("the SDK iterator listed %d locks, not %d", seen, n)
	}
	var lines lineCounter
	var stderr bytes.Buffer
	start = time.Now()
	reach := []string{"--nameserver", addr, "--insecure"}
	if certsDir != "" {
		reach = []string{"--nameserver", addr, "--certs-dir", certsDir, "--user", certs.ClientUser}
	}
	if code := lockcmd.Main(ctx, append(reach, "-o", "json", "list", root), &lines, &stderr); code != 0 {
		return nil, fmt.Errorf("lockctl list exited %d: %s", code, strings.TrimSpace(stderr.String()))
	}
	ctlTime := time.Since(start)
	if lines.n != n {
		return nil, fmt.Errorf("lockctl list printed %d locks, not %d", lines.n, n)
	}
	return []bench.Result{
		{Name: "scale list (SDK iterator)", Clients: 1, Ops: int64(n), Value: millis(sdkTime), Unit: "ms", Note: sdkListNote},
		{Name: "scale list (lockctl -o json)", Clients: 1, Ops: int64(n), Value: millis(ctlTime), Unit: "ms", Note: ctlListNote},
	}, nil
}

// lineCounter counts the lines written to it.
type lineCounter struct{ n int }

func (l *lineCounter) Write(p []byte) (int, error) {
	l.n += bytes.Count(p, []byte("\n"))
	return len(p), nil
}

var _ io.Writer = (*lineCounter)(nil)

// scaleLocks is the --locks value of a scale result ("locks=N").
func scaleLocks(r bench.Result) (float64, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(r.Param, "locks="))
	return float64(n), err == nil && strings.HasPrefix(r.Param, "locks=")
}

// scaleChart draws the time to list every lock, through the SDK and
// through lockctl, against the number of locks.
func scaleChart(results []bench.Result) (*plot.Plot, error) {
	p := newChart("Listing every lock vs locks held", "locks", "time to list them all (ms)")
	lines := []line{{label: "SDK AllDirLocks", color: 0, shape: 0}, {label: "lockctl -o json list", color: 1, shape: 1, dashed: true}}
	var xs []float64
	for _, r := range results {
		n, ok := scaleLocks(r)
		if !ok {
			continue
		}
		switch r.Name {
		case "scale list (SDK iterator)":
			lines[0].xys = append(lines[0].xys, plotter.XY{X: n, Y: r.Value})
			xs = append(xs, n)
		case "scale list (lockctl -o json)":
			lines[1].xys = append(lines[1].xys, plotter.XY{X: n, Y: r.Value})
		}
	}
	if len(xs) == 0 {
		return nil, errNoData("scale")
	}
	lo, hi, err := addLines(p, lines...)
	if err != nil {
		return nil, err
	}
	countAxis(&p.X, xs)
	logAxis(&p.Y, lo, hi)
	return p, nil
}

func scaleVerdicts(results []bench.Result) []verdict {
	var vs []verdict
	for _, r := range results {
		n, ok := scaleLocks(r)
		if !ok {
			continue
		}
		switch r.Name {
		case "scale list (SDK iterator)", "scale list (lockctl -o json)":
			how := strings.TrimSuffix(strings.TrimPrefix(r.Name, "scale list ("), ")")
			vs = append(vs, verdict{figure: fmt.Sprintf("scale: list %s locks through %s", thousands(n), how), measured: fmt.Sprintf("%.0f ms", r.Value)})
		case "scale RSS per lock":
			vs = append(vs, verdict{figure: fmt.Sprintf("scale: nameserver RSS per lock at %s locks", thousands(n)), measured: fmt.Sprintf("%.0f B", r.Value)})
		}
	}
	return vs
}

// thousands prints n with thousands separators: 100,000.
func thousands(n float64) string {
	s := strconv.FormatFloat(n, 'f', 0, 64)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
