package benchcmd

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/bfs-go/bfs/cluster/sandbox"
	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/sdk"
)

// The ha benchmark is the HA issue's, in one run: for each group size
// (--voters) a sandbox whose nameservers form a group of that many voters
// (in this process) beside an embedded etcd of as many members (in this
// process too, data on the same disk): lock+unlock cycles against both,
// alternating, creates and, at the most clients, stats (the host's RPC
// ceiling), with the leader changes counted across those runs; then the
// failover of a group of three nameserver processes (hafailover.go).

type haOptions struct {
	voters []int
	trials int
}

func defaultHAOptions() haOptions { return haOptions{voters: []int{1, 3}, trials: 20} }

func (o *haOptions) register(f *pflag.FlagSet, prefix string) {
	f.IntSliceVar(&o.voters, prefix+"voters", o.voters, "sizes of the nameserver groups (and of the etcd clusters beside them) whose throughput is measured")
	f.IntVar(&o.trials, prefix+"trials", o.trials, "failovers of a group of three nameserver processes: kill -9 of the leader (0: none)")
}

func (o *haOptions) validate(prefix string) error {
	if err := validateCounts("--"+prefix+"voters", o.voters, 7); err != nil {
		return err
	}
	if o.trials < 0 {
		return fmt.Errorf("--%strials must be at least 0, got %d", prefix, o.trials)
	}
	return nil
}

func newHACmd(c *common) *cobra.Command {
	o := defaultHAOptions()
	cmd := &cobra.Command{
		Use:   "ha",
		Short: "Nameserver groups: lock+unlock beside etcd and creates with 1 and 3 voters, leader changes, and failover after kill -9 of the leader",
		Long: `Nameserver groups, as the HA issue asks. For each --voters value, a sandbox
whose nameservers form a group of that many voters, beside an embedded etcd
of as many members (both in this process, data on the same disk): lock+unlock
cycles against both with each --clients value (bfs, etcd, etcd, bfs in halves
of --duration), creates, and stats at the most clients (what an RPC costs
here: a ceiling for creates); the leader changes during those runs are
counted. Then --trials failovers of a group of three nameservers and three
chunkservers, each a process (bfs nameserver, default timeouts): the leader
is killed with SIGKILL and the first LockDir, KeepAlive and AddBlock to
succeed after it are timed. It always starts its own clusters (--nameserver
is not used).`,
		Args: cobra.NoArgs,
	}
	o.register(cmd.Flags(), "")
	c.benchCommandOn(cmd, func() error { return o.validate("") }, o.run, haChart, c.haTarget)
	return cmd
}

// haTarget gives the ha benchmark a directory for its clusters, which it
// starts itself: the cluster returned has no address.
func (c *common) haTarget(context.Context) (*cluster, error) {
	dir, err := os.MkdirTemp("", "bfsbench-ha-")
	if err != nil {
		return nil, err
	}
	return &cluster{dir: dir, stop: func() { os.RemoveAll(dir) }}, nil
}

func (o *haOptions) run(ctx context.Context, c *common, cl *cluster) ([]bench.Result, error) {
	var results []bench.Result
	for _, v := range o.voters {
		rs, err := haThroughput(ctx, c, cl.dir, v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", nVoters(v), err)
		}
		results = append(results, rs...)
	}
	if o.trials == 0 {
		return results, nil
	}
	dir, err := os.MkdirTemp(cl.dir, "failover-")
	if err != nil {
		return nil, err
	}
	rs, err := failover(ctx, c, dir, o.trials)
	if err != nil {
		return nil, err
	}
	return append(results, rs...), nil
}

// The rows of the throughput half, each with the parameter voters=N.
const (
	haLocksRow      = "ha lock+unlock"
	haEtcdLocksRow  = "ha lock+unlock (etcd)"
	haRatioRow      = "ha bfs/etcd lock+unlock"
	haCPURow        = "ha lock+unlock CPU/op"
	haEtcdCPURow    = "ha lock+unlock CPU/op (etcd)"
	haCoresRow      = "ha lock+unlock cores"
	haEtcdCoresRow  = "ha lock+unlock cores (etcd)"
	haMachineRow    = "ha machine busy cores"
	haCreateRow     = "ha create"
	haStatRow       = "ha stat"
	haLeaderRow     = "ha leader changes"
	haEtcdLeaderRow = "ha etcd leader elections"
)

const (
	haLocksNote = "one op = SDK LockDir + Lock.Unlock of an empty directory (two durable group commits); each client its own directory, connection and session; " +
		"the group's nameservers in this process, each its own data directory on this disk"
	haEtcdNote = "one op = concurrency.Mutex Lock + Unlock on a key prefix of its own; an embedded etcd v3.7 of as many members as the group has voters, in this process, fsync on, data on the same disk, " +
		"mutual TLS on its client and peer links as bfs has (with the same certificates; plaintext with --insecure); each client its own connection (to the leader: etcd's best case) and session"
	haRatioNote      = "bfs lock+unlock throughput over etcd's with as many members, the same clients, alternating (bfs, etcd, etcd, bfs in halves of --duration); target at 64 clients ≥ 2x with 1 voter, ≥ 1.5x with 3"
	haCPUNote        = "CPU time (user and system) of this process, clients and servers together, over the cycles, in the same slices"
	haCoresNote      = "CPU time of this process over the wall time of the same slices: the cores the clients and servers of that side kept busy"
	haMachineNote    = "the machine's cores not idle during the lock+unlock slices of both sides (/proc/stat: every process, and time the hypervisor took), of %d: at that figure the machine had no core to spare"
	haCreateNote     = "SDK Touch of a new file in the client's directory (one durable group commit); each client its own connection, session and directory; target with 1 voter at 64 clients ≥ 10,000/s"
	haStatNote       = "SDK Stat of a file (a read the leader answers from its state: no commit): the most RPCs this host answers, a ceiling for creates"
	haLeaderNote     = "changes of leadership during every closed loop above (bfs_nameserver_raft_leader_changes_total summed over the group's members: a member counts each time it becomes or stops being the leader); target 0"
	haEtcdLeaderNote = "elections etcd held during its closed loops (its Raft term's increase)"
)

// haThroughput measures the closed loops with a group of v voters and an
// etcd of v members.
func haThroughput(ctx context.Context, c *common, parent string, v int) ([]bench.Result, error) {
	dir, err := os.MkdirTemp(parent, fmt.Sprintf("voters-%d-", v))
	if err != nil {
		return nil, err
	}
	sb, err := sandbox.Start(sandbox.Config{Dir: dir, NameServers: v, Chunkservers: sandboxChunkservers, Insecure: c.insecure})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := sb.Close(); err != nil {
			c.progressf("stopping the group of %s: %v", nVoters(v), err)
		}
	}()
	if err := waitChunkservers(ctx, sb, sandboxChunkservers); err != nil {
		return nil, err
	}
	var etcdDirs []string
	for i := range v {
		etcdDirs = append(etcdDirs, filepath.Join(dir, fmt.Sprintf("etcd-%d", i), "member-data"))
	}
	etcd, err := startEtcdGroup(ctx, etcdDirs, sb.CertsDir(), c.stderr)
	if err != nil {
		return nil, err
	}
	defer etcd.close()
	c.progressf("started a group of %s (%s, %s) and an etcd of %d member(s) in %s", nVoters(v), sb.NameServerAddr, tlsName(!c.insecure), v, dir)
	h := &haRound{c: c, sb: sb, voters: v, etcd: etcd, addr: sb.NameServerAddr, creds: sb.AsClient()}
	if h.changes0, err = h.leaderChanges(); err != nil {
		return nil, err
	}
	h.term0 = etcd.term()
	var out []bench.Result
	most := slices.Max(c.clients)
	for _, n := range c.clients {
		rs, err := h.measure(ctx, n, n == most)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	changes, err := h.leaderChanges()
	if err != nil {
		return nil, err
	}
	param := "voters=" + strconv.Itoa(v)
	return append(out,
		bench.Result{Name: haLeaderRow, Clients: most, Param: param, Value: changes - h.changes0, Unit: countUnit, Note: haLeaderNote},
		bench.Result{Name: haEtcdLeaderRow, Clients: most, Param: param, Value: float64(etcd.term() - h.term0), Unit: countUnit, Note: haEtcdLeaderNote}), nil
}

// countUnit marks a Value that is a count.
const countUnit = "count"

func nTrials(n int64) string {
	if n == 1 {
		return "1 trial"
	}
	return fmt.Sprintf("%d trials", n)
}

func nVoters(v int) string {
	if v == 1 {
		return "1 voter"
	}
	return fmt.Sprintf("%d voters", v)
}

// haRound is one group and etcd under measurement.
type haRound struct {
	c      *common
	sb     *sandbox.Sandbox
	voters int
	etcd   *etcdGroup
	addr   string
	creds  sdk.Option
	// changes0 and term0 are the group's leader changes and etcd's term
	// before the first measurement.
	changes0 float64
	term0    uint64
}

// leaderChanges sums bfs_nameserver_raft_leader_changes_total over the
// group's members, read from their metrics.
func (h *haRound) leaderChanges() (float64, error) {
	var sum float64
	for i := range h.voters {
		srv := h.sb.NameServerAt(i)
		if srv == nil {
			return 0, fmt.Errorf("nameserver %d is not running", i)
		}
		rec := httptest.NewRecorder()
		srv.HTTPHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		v, err := metricValue(rec.Body.String(), "bfs_nameserver_raft_leader_changes_total")
		if err != nil {
			return 0, fmt.Errorf("nameserver %d: %w", i, err)
		}
		sum += v
	}
	return sum, nil
}

// metricValue finds the value of the unlabelled metric name in a
// Prometheus text exposition.
func metricValue(text, name string) (float64, error) {
	for line := range strings.Lines(text) {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, fmt.Errorf("no metric %s", name)
}

// measure runs the closed loops with n clients: lock+unlock against bfs
// and etcd, creates, and with stat the stats.
func (h *haRound) measure(ctx context.Context, n int, stat bool) ([]bench.Result, error) {
	c := h.c
	clients, err := dialN(ctx, h.addr, n, h.creds)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	lockers, err := newEtcdLockersTLS(ctx, h.etcd.leaderEndpoint(), h.etcd.certsDir, n)
	if err != nil {
		return nil, err
	}
	defer lockers.close()
	param := "voters=" + strconv.Itoa(h.voters)
	root := fmt.Sprintf("%s/ha/%d/%d", c.root(), h.voters, n)
	var runs [2][]bench.Result
	// cpu is this process's CPU time in each side's slices; busy the
	// machine's (every process's, see machineBusy) in all four.
	var cpu [2]time.Duration
	busy0, busyOK := machineBusy()
	for q, i := range []int{0, 1, 1, 0} {
		var op bench.Op
		if i == 0 {
			if op, err = bfsLockCycle(ctx, clients, fmt.Sprintf("%s/q%d", root, q)); err != nil {
				return nil, err
			}
		} else {
			op = lockers.op(fmt.Sprintf("%s/q%d", root, q))
		}
		before, _ := processCPU()
		r, err := h.loop(ctx, i == 1, []string{haLocksRow, haEtcdLocksRow}[i], n, c.duration/2, op)
		if err != nil {
			return nil, err
		}
		after, _ := processCPU()
		cpu[i] += after - before
		runs[i] = append(runs[i], r)
	}
	busy1, ok := machineBusy()
	busyOK = busyOK && ok
	b, e := bench.Merge(runs[0]...), bench.Merge(runs[1]...)
	b.Param, e.Param, b.Note, e.Note = param, param, haLocksNote, haEtcdNote
	ratio := bench.Result{Name: haRatioRow, Clients: n, Param: param, Unit: "x", Note: haRatioNote}
	if eps := e.OpsPerSec(); eps > 0 {
		ratio.Value = b.OpsPerSec() / eps
	}
	out := []bench.Result{b, e, ratio}
	if _, ok := processCPU(); ok && b.Ops > 0 && e.Ops > 0 {
		cores := func(name string, d time.Duration, r bench.Result) bench.Result {
			return bench.Result{Name: name, Clients: n, Param: param, Ops: r.Ops, Value: d.Seconds() / r.Elapsed.Seconds(), Unit: "cores", Note: haCoresNote}
		}
		out = append(out,
			bench.Result{Name: haCPURow, Clients: n, Param: param, Ops: b.Ops, Value: float64(cpu[0].Microseconds()) / float64(b.Ops), Unit: "µs", Note: haCPUNote},
			bench.Result{Name: haEtcdCPURow, Clients: n, Param: param, Ops: e.Ops, Value: float64(cpu[1].Microseconds()) / float64(e.Ops), Unit: "µs", Note: haCPUNote},
			cores(haCoresRow, cpu[0], b), cores(haEtcdCoresRow, cpu[1], e))
	}
	if busyOK && b.Elapsed+e.Elapsed > 0 {
		out = append(out, bench.Result{Name: haMachineRow, Clients: n, Param: param, Ops: b.Ops + e.Ops, Unit: "cores",
			Value: (busy1 - busy0).Seconds() / (b.Elapsed + e.Elapsed).Seconds(), Note: fmt.Sprintf(haMachineNote, runtime.NumCPU())})
	}
	for ci, cl := range clients {
		if err := cl.MkdirAll(ctx, fmt.Sprintf("%s/c%d", root, ci), 0o755); err != nil {
			return nil, err
		}
	}
	cr, err := h.loop(ctx, false, haCreateRow, n, c.duration, func(ctx context.Context, ci, k int) error {
		return clients[ci].Touch(ctx, fmt.Sprintf("%s/c%d/f%d", root, ci, k))
	})
	if err != nil {
		return nil, err
	}
	cr.Param, cr.Note = param, haCreateNote
	out = append(out, cr)
	if !stat {
		return out, nil
	}
	st, err := h.loop(ctx, false, haStatRow, n, c.duration, func(ctx context.Context, ci, _ int) error {
		_, err := clients[ci].Stat(ctx, fmt.Sprintf("%s/c%d/f0", root, ci))
		return err
	})
	if err != nil {
		return nil, err
	}
	st.Param, st.Note = param, haStatNote
	return append(out, st), nil
}

// loop is closedLoopFor, except that operations failing while the group
// (or, for etcd, etcd) changed its leader are reported in the row's
// errors rather than failing the benchmark: the leader change is then in
// the summary, against its target of none.
func (h *haRound) loop(ctx context.Context, etcd bool, name string, n int, d time.Duration, op bench.Op) (bench.Result, error) {
	changes, term := h.changesNow(), h.etcd.term()
	r, err := h.c.closedLoopFor(ctx, fmt.Sprintf("%s (%s)", name, nVoters(h.voters)), n, d, op)
	r.Name = name
	if err == nil || ctx.Err() != nil {
		return r, err
	}
	if (!etcd && h.changesNow() != changes) || (etcd && h.etcd.term() != term) {
		h.c.progressf("  %d errors while the leader changed, the first: %v", r.Errors, err)
		return r, nil
	}
	return r, err
}

// changesNow is leaderChanges, or -1 if they cannot be read (which
// counts as a change: the loop's failure is then reported, not fatal).
func (h *haRound) changesNow() float64 {
	v, err := h.leaderChanges()
	if err != nil {
		return -1
	}
	return v
}

// Targets of the ha benchmark.
var haRatioTargets = map[int]float64{1: 2.0, 3: 1.5}

// haVerdicts judges the ha rows: the lock ratios at 64 clients against
// their targets by group size, creates with one voter at 64 clients, no
// leader change, and the failover p99s.
func haVerdicts(results []bench.Result) []verdict {
	var vs []verdict
	for _, r := range results {
		voters, _ := strconv.Atoi(strings.TrimPrefix(r.Param, "voters="))
		who := fmt.Sprintf("%s, %s", nVoters(voters), nClients(r.Clients))
		switch r.Name {
		case haLocksRow, haEtcdLocksRow:
			vs = append(vs, verdict{figure: fmt.Sprintf("%s, %s", r.Name, who), measured: throughputLatency(r)})
		case haRatioRow:
			v := verdict{figure: fmt.Sprintf("%s, %s", r.Name, who), measured: fmt.Sprintf("%.2fx", r.Value)}
			if t, ok := haRatioTargets[voters]; ok && r.Clients == manyClients {
				v.target, v.met = atLeast(r.Value, t, "x")
			}
			vs = append(vs, v)
		case haCoresRow, haEtcdCoresRow, haMachineRow:
			if r.Clients == manyClients {
				vs = append(vs, verdict{figure: fmt.Sprintf("%s, %s", r.Name, who), measured: fmt.Sprintf("%.2f", r.Value)})
			}
		case haCreateRow:
			v := verdict{figure: fmt.Sprintf("%s, %s", r.Name, who), measured: throughputLatency(r)}
			if voters == 1 && r.Clients == manyClients {
				v.target, v.met = atLeast(r.OpsPerSec(), metaTarget, " ops/s")
			}
			vs = append(vs, v)
		case haStatRow:
			vs = append(vs, verdict{figure: fmt.Sprintf("%s (the RPC ceiling), %s", r.Name, who), measured: throughputLatency(r)})
		case haEtcdLeaderRow:
			vs = append(vs, verdict{figure: fmt.Sprintf("%s during its closed loops, %d member(s)", r.Name, voters), measured: fmt.Sprintf("%.0f", r.Value)})
		case haLeaderRow:
			vs = append(vs, verdict{figure: fmt.Sprintf("%s during the closed loops, %s", r.Name, nVoters(voters)),
				measured: fmt.Sprintf("%.0f", r.Value), target: "= 0", met: r.Value == 0})
		case failoverElectionRow:
			vs = append(vs, verdict{figure: fmt.Sprintf("%s (%s)", r.Name, nTrials(r.Ops+r.Errors)), measured: fmt.Sprintf("p50 %s, p99 %s", ms(r.P50), ms(r.P99))})
		case failoverLockRow, failoverKeepRow, failoverAddBlockRow:
			v := verdict{figure: fmt.Sprintf("%s (%s)", r.Name, nTrials(r.Ops+r.Errors)), measured: fmt.Sprintf("p50 %s, p99 %s", ms(r.P50), ms(r.P99))}
			if r.Errors > 0 {
				v.measured += fmt.Sprintf(", %d never", r.Errors)
			}
			v.target, v.met = "p99 ≤ "+failoverTarget.String(), r.Ops > 0 && r.Errors == 0 && r.P99 <= failoverTarget
			vs = append(vs, v)
		}
	}
	return vs
}

// haChart draws each failover trial: the time from the kill to the new
// leader and to each probe's first success, beside the target.
func haChart(results []bench.Result) (*plot.Plot, error) {
	p := newChart("Failover after kill -9 of the leader, per trial", "trial", "time since the kill (s)")
	var lines []line
	trials := 0
	for i, name := range append([]string{failoverElectionRow}, failoverProbeRows...) {
		for _, r := range named(results, name) {
			s := line{label: strings.TrimPrefix(name, "ha failover: "), color: i, shape: i, dashed: name == failoverElectionRow}
			for t, d := range r.Samples {
				s.xys = append(s.xys, plotter.XY{X: float64(t + 1), Y: d.Seconds()})
			}
			trials = max(trials, len(r.Samples))
			lines = append(lines, s)
		}
	}
	if trials == 0 {
		return haLocksChart(results)
	}
	_, hi, err := addLines(p, lines...)
	if err != nil {
		return nil, err
	}
	x1 := float64(max(trials, 2))
	if err := addLevel(p, "target: p99 ≤ "+failoverTarget.String(), 1, x1, failoverTarget.Seconds(), targetColor); err != nil {
		return nil, err
	}
	p.X.Min, p.X.Max = 0.5, x1+0.5
	p.Y.Min, p.Y.Max = 0, 1.3*math.Max(hi, failoverTarget.Seconds())
	p.Legend.Left = false
	return p, nil
}

// haLocksChart draws, when no failover was measured, the lock+unlock
// throughput of bfs beside etcd's at the most clients, by group size.
func haLocksChart(results []bench.Result) (*plot.Plot, error) {
	var names []string
	var bfs, etcd plotter.Values
	for _, r := range named(results, haRatioRow) {
		if n := slices.Max(clientCounts(results, haRatioRow)); r.Clients != n {
			continue
		}
		b, _ := find(results, haLocksRow, r.Clients, r.Param)
		e, _ := find(results, haEtcdLocksRow, r.Clients, r.Param)
		voters, _ := strconv.Atoi(strings.TrimPrefix(r.Param, "voters="))
		names = append(names, fmt.Sprintf("%s, %s: %.2fx", nVoters(voters), nClients(r.Clients), r.Value))
		bfs, etcd = append(bfs, b.OpsPerSec()), append(etcd, e.OpsPerSec())
	}
	if len(names) == 0 {
		return nil, errNoData("ha")
	}
	p := newChart("Lock+unlock cycles: bfs group beside etcd of as many members", "", "cycles/s")
	for i, s := range []struct {
		label string
		v     plotter.Values
	}{{"bfs", bfs}, {"etcd", etcd}} {
		b, err := plotter.NewBarChart(s.v, vg.Points(40))
		if err != nil {
			return nil, err
		}
		b.Color, b.LineStyle.Width = plotutil.Color(i), 0
		b.Offset = vg.Points(float64(40*i - 20))
		p.Add(b)
		p.Legend.Add(s.label, b)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	p.Y.Min = 0
	p.Y.Max *= 1.3
	p.Legend.Left = false
	return p, nil
}
