package benchcmd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/internal/cbuild"
	"github.com/bfs-go/bfs/sdk"
)

// The capi benchmark measures libbfs, the C API, beside the Go SDK it
// wraps: the same workloads, from a C program (libbfs/bench/bench.c)
// linked to libbfs.so and from a Go process of the SDK (capiloop.go),
// each a process of its own, alternating against one cluster, so that
// the ratio shows what the C boundary costs.

type capiOptions struct{ sizeTrials }

func defaultCAPIOptions() capiOptions { return capiOptions{sizeTrials{size: 64 << 20, trials: 5}} }

// register adds the flags, each name prefixed with prefix ("capi-" under
// all).
func (o *capiOptions) register(f *pflag.FlagSet, prefix string) {
	o.sizeTrials.register(f, prefix, "size of each file written (in 1 MiB writes), by the SDK and by libbfs",
		"write trials, each writing one file from Go and one from C")
}

func newCAPICmd(c *common) *cobra.Command {
	o := defaultCAPIOptions()
	cmd := &cobra.Command{
		Use:   "capi",
		Short: "libbfs (the C API) beside the Go SDK: lock+unlock cycles and 1 MiB writes from C and from Go, alternating (needs gcc)",
		Args:  cobra.NoArgs,
	}
	o.register(cmd.Flags(), "")
	c.benchCommandOn(cmd, func() error { return o.validate("") }, o.run, capiChart, c.target)
	return cmd
}

// Names of the capi results.
const (
	capiLockSDK    = "lock+unlock (sdk)"
	capiLockC      = "lock+unlock (libbfs)"
	capiLockRatio  = "libbfs/sdk lock+unlock"
	capiWriteSDK   = "write (sdk)"
	capiWriteC     = "write (libbfs)"
	capiWriteRatio = "libbfs/sdk write"
)

const (
	capiLockNote  = "one op = lock+unlock of an empty directory, without waiting: SDK LockDir + Lock.Unlock from a Go process, bfs_lock_dir + bfs_unlock from a C process through libbfs.so; 1 client each, its own session and directory; Go and C alternate in eighths of --duration (Go, C, C, Go, Go, C, C, Go), each eighth a new process"
	capiWriteNote = "one file of --size created, written in 1 MiB writes and closed (3 replicas, sealed, closed on the nameserver), timed from before the create to after the close: SDK Create/Write/Close from a Go process, bfs_create/bfs_write/bfs_close from a C process; which goes first alternates per trial; MB = 10^6 bytes"
)

func (o *capiOptions) run(ctx context.Context, c *common, cl *cluster) ([]bench.Result, error) {
	dir, remove, err := buildC(ctx, c, cbuild.Program{Out: "bench", Sources: []string{"bench/bench.c"}})
	if err != nil {
		return nil, err
	}
	defer remove()
	cProg := filepath.Join(dir, "bench")
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	client, err := sdk.Dial(ctx, cl.addr, cl.creds())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	b := &capiBench{o: o, c: c, addr: cl.addr, client: client, root: c.root() + "/capi",
		sides: [2]capiSide{
			{name: "sdk", prog: self, env: append(cl.sideEnv(), sdkLoopEnv+"=1")},
			{name: "libbfs", prog: cProg, env: cl.sideEnv()}}}
	locks, err := b.locks(ctx)
	if err != nil {
		return nil, err
	}
	writes, err := b.writes(ctx)
	if err != nil {
		return nil, err
	}
	return append(locks, writes...), nil
}

// capiSide is one side of the comparison: a program taking bench.c's
// arguments and printing what it prints.
type capiSide struct {
	name string // "sdk" or "libbfs"
	prog string
	env  []string // added to the environment
}

// run runs the side's program with args and returns its stdout.
func (s capiSide) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, s.prog, args...)
	cmd.Env = append(os.Environ(), s.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s side %s: %w: %s", s.name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// capiBench is one run of the capi benchmark.
type capiBench struct {
	o      *capiOptions
	c      *common
	addr   string
	client *sdk.Client // for checks, outside the measurements
	root   string
	sides  [2]capiSide // Go, then C
}

// buildC builds libbfs.so and progs against it, optimized (-O2), in a new
// temporary directory, returned with a function that deletes it. Each
// program's Out is a file name in that directory.
func buildC(ctx context.Context, c *common, progs ...cbuild.Program) (dir string, remove func(), err error) {
	if err := cbuild.Compilers(); err != nil {
		return "", nil, err
	}
	dir, err = os.MkdirTemp("", "bfsbench-c-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	c.progressf("building libbfs.so and %d programs against it in %s...", len(progs), dir)
	lib, err := cbuild.Build(ctx, dir, cbuild.Shared)
	for _, p := range progs {
		if err != nil {
			break
		}
		p.Out = filepath.Join(dir, p.Out)
		p.Flags = append(p.Flags, "-O2")
		err = cbuild.Compile(ctx, lib, p)
	}
	if err != nil {
		remove()
		return "", nil, err
	}
	return dir, remove, nil
}

// locks measures lock+unlock cycles from Go and from C in eighths of
// --duration (Go, C, C, Go, twice: on a host busy with other work, the
// more turns the less either side's figure is its luck), and their
// throughput ratio.
func (b *capiBench) locks(ctx context.Context) ([]bench.Result, error) {
	q := b.c.duration / 8
	var runs [2][]bench.Result
	for i, side := range []int{0, 1, 1, 0, 0, 1, 1, 0} {
		s := b.sides[side]
		name := fmt.Sprintf("lock+unlock (%s)", s.name)
		b.c.progressf("%s with 1 client for %v...", name, q)
		r, err := b.lockCycles(ctx, s, name, fmt.Sprintf("%s/locks-%s-%d", b.root, s.name, i), q)
		if err != nil {
			return nil, err
		}
		b.c.progressf("  %s: %.0f ops/s, p50 %s, p99 %s", name, r.OpsPerSec(), ms(r.P50), ms(r.P99))
		runs[side] = append(runs[side], r)
	}
	g, cr := bench.Merge(runs[0]...), bench.Merge(runs[1]...)
	g.Note, cr.Note = capiLockNote, capiLockNote
	ratio := bench.Result{Name: capiLockRatio, Clients: 1, Value: cr.OpsPerSec() / g.OpsPerSec(), Unit: "x",
		Note: "lock+unlock throughput from C over the same from Go"}
	return []bench.Result{g, cr, ratio}, nil
}

// lockCycles runs side s's lock loop for d on dir, then checks on the
// nameserver that the directory's last lock has the epoch of as many
// grants as the loop counted, at least.
func (b *capiBench) lockCycles(ctx context.Context, s capiSide, name, dir string, d time.Duration) (bench.Result, error) {
	out, err := s.run(ctx, "lock", b.addr, dir, strconv.FormatInt(d.Milliseconds(), 10))
	if err != nil {
		return bench.Result{}, err
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	var n int64
	var elapsed time.Duration
	if !sc.Scan() {
		return bench.Result{}, fmt.Errorf("%s printed nothing", name)
	}
	if _, err := fmt.Sscanf(sc.Text(), "cycles %d elapsed_ns %d", &n, &elapsed); err != nil {
		return bench.Result{}, fmt.Errorf("%s printed %q: %w", name, sc.Text(), err)
	}
	r := bench.Result{Name: name, Clients: 1, Ops: n, Elapsed: elapsed}
	for sc.Scan() {
		ns, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			return bench.Result{}, fmt.Errorf("%s printed %q", name, sc.Text())
		}
		r.Samples = append(r.Samples, time.Duration(ns))
	}
	if int64(len(r.Samples)) != n || n == 0 {
		return bench.Result{}, fmt.Errorf("%s counted %d cycles and timed %d", name, n, len(r.Samples))
	}
	r.P50, r.P90, r.P99 = bench.Percentiles(r.Samples)
	return r, b.checkUnlocked(ctx, dir)
}

// checkUnlocked checks that a loop left dir not locked: every cycle it
// counted unlocked what it locked.
func (b *capiBench) checkUnlocked(ctx context.Context, dir string) error {
	d, err := b.client.GetDirLock(ctx, dir)
	if err != nil {
		return err
	}
	if d.Status == sdk.Locked {
		return fmt.Errorf("%s is still locked (epoch %d) after the loop", dir, d.Epoch)
	}
	return nil
}

// writes measures --trials files written from Go and from C, checks
// their sizes, and returns each trial's throughput, the medians and
// their ratio.
func (b *capiBench) writes(ctx context.Context) ([]bench.Result, error) {
	size := int64(b.o.size)
	if err := b.client.MkdirAll(ctx, b.root+"/writes", 0o755); err != nil {
		return nil, err
	}
	var results []bench.Result
	var mbs [2][]float64
	for t := 1; t <= b.o.trials; t++ {
		var got [2]float64
		for _, side := range []int{(t + 1) % 2, t % 2} { // Go first in odd trials
			path := fmt.Sprintf("%s/writes/%s-%d", b.root, b.sides[side].name, t)
			v, err := b.write(ctx, b.sides[side], path, size)
			if err != nil {
				return nil, fmt.Errorf("capi write trial %d: %w", t, err)
			}
			got[side] = v
		}
		b.c.progressf("capi write trial %d: sdk %.1f MB/s, libbfs %.1f MB/s", t, got[0], got[1])
		param := fmt.Sprintf("trial %d", t)
		results = append(results, capiWriteRow(capiWriteSDK, param, 1, got[0]), capiWriteRow(capiWriteC, param, 1, got[1]))
		mbs[0], mbs[1] = append(mbs[0], got[0]), append(mbs[1], got[1])
	}
	n := int64(b.o.trials)
	g, cr := bench.Median(mbs[0]), bench.Median(mbs[1])
	return append(results, capiWriteRow(capiWriteSDK, "median", n, g), capiWriteRow(capiWriteC, "median", n, cr),
		bench.Result{Name: capiWriteRatio, Clients: 1, Param: "median", Ops: n, Value: cr / g, Unit: "x",
			Note: "median write throughput from C over the same from Go"}), nil
}

func capiWriteRow(name, param string, n int64, v float64) bench.Result {
	return bench.Result{Name: name, Clients: 1, Param: param, Ops: n, Value: v, Unit: "MB/s", Note: capiWriteNote}
}

// write has side s write size bytes to path, checks the file, removes it
// and returns the throughput the side timed, in MB/s.
func (b *capiBench) write(ctx context.Context, s capiSide, path string, size int64) (float64, error) {
	v, err := s.transfer(ctx, size, "write", b.addr, path, strconv.FormatInt(size, 10))
	if err == nil {
		err = checkWritten(ctx, b.client, path, size)
	}
	if err != nil {
		return 0, err
	}
	return v, b.client.Remove(ctx, path)
}

// transfer runs side s with args, a transfer of size bytes, and returns
// the throughput the side timed, in MB/s.
func (s capiSide) transfer(ctx context.Context, size int64, args ...string) (float64, error) {
	out, err := s.run(ctx, args...)
	if err != nil {
		return 0, err
	}
	var n int64
	var elapsed time.Duration
	if _, err := fmt.Sscanf(string(out), "bytes %d elapsed_ns %d", &n, &elapsed); err != nil || n != size || elapsed <= 0 {
		return 0, fmt.Errorf("%s side's %s printed %q", s.name, args[0], out)
	}
	return mbps(size, elapsed), nil
}

// checkWritten checks that path holds size bytes and is closed.
func checkWritten(ctx context.Context, client *sdk.Client, path string, size int64) error {
	fi, err := client.Stat(ctx, path)
	if err != nil {
		return err
	}
	if fi.Size != size || fi.WriterSession != "" {
		return fmt.Errorf("%s: %d bytes (open: %v) after the write, want %d, closed", path, fi.Size, fi.WriterSession != "", size)
	}
	return nil
}

// capiChart draws the two ratios, libbfs over the SDK, beside the target.
var capiChart = ratioChart("libbfs (C) over the Go SDK: throughput ratio", "libbfs / sdk", "libbfs/sdk ", capiTarget,
	capiLockRatio, capiWriteRatio)

// capiVerdicts are the capi figures: each side's throughput and the two
// ratios against their target.
func capiVerdicts(results []bench.Result) []verdict {
	var vs []verdict
	for _, r := range results {
		switch {
		case r.Name == capiLockSDK || r.Name == capiLockC:
			vs = append(vs, verdict{figure: "capi " + r.Name + ", 1 client", measured: throughputLatency(r)})
		case (r.Name == capiWriteSDK || r.Name == capiWriteC) && r.Param == "median":
			vs = append(vs, verdict{figure: "capi " + r.Name + " 1 MiB writes (median)", measured: fmt.Sprintf("%.1f MB/s", r.Value)})
		case r.Name == capiLockRatio || r.Name == capiWriteRatio:
			v := verdict{figure: "capi " + r.Name, measured: fmt.Sprintf("%.2fx", r.Value)}
			v.target, v.met = atLeast(r.Value, capiTarget, "x")
			vs = append(vs, v)
		}
	}
	return vs
}
