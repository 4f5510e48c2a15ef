package benchcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/cluster/sandbox"
	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/sdk"
)

// Main runs bfsbench with args and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if dir := os.Getenv(scaleServerEnv); dir != "" {
		return serveScaleNameServer(dir, os.Stdin, stdout, stderr) // a process scale started
	}
	if code, ok := RunBFS(ctx, args, stdout, stderr); ok {
		return code // a daemon ha started
	}
	// Progress and the embedded etcd's log share stderr from several
	// goroutines.
	stderr = &lockedWriter{w: stderr}
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "bfsbench: %v\n", err)
		return 1
	}
	return 0
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// sandboxChunkservers is how many chunkservers a started cluster has: enough
// for the default replication of 3.
const sandboxChunkservers = 3

// common are the flags every subcommand has.
type common struct {
	nameserver string
	// certsDir and insecure say how to reach the cluster: see target.
	certsDir    string
	insecure    bool
	duration    time.Duration
	clients     []int
	csvPath     string
	cpuProfile  string
	profileFile *os.File
	// started names this run in the namespace (see root).
	started time.Time
	stdout  io.Writer
	stderr  io.Writer
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	c := &common{started: time.Now(), stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "bfsbench",
		Short:         "Benchmarks of BFS-Go",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&c.nameserver, "nameserver", "", "benchmark this running cluster instead of starting one")
	pf.StringVar(&c.certsDir, "certs-dir", "", "with --nameserver: its certificates directory (default $"+certs.EnvDir+", else ./"+certs.SandboxDir+"); client."+certs.ClientUser+" and client."+certs.AdminUser+" are presented")
	pf.BoolVar(&c.insecure, "insecure", false, "plaintext: a started cluster runs without TLS; with --nameserver, one run with --insecure")
	pf.DurationVar(&c.duration, "duration", 5*time.Second, "how long each closed-loop measurement (meta, locks) runs")
	pf.IntSliceVar(&c.clients, "clients", []int{1, 64}, "concurrent clients of meta and locks, one measurement per value")
	pf.StringVar(&c.csvPath, "csv", "", "also write the results to this CSV file")
	pf.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (client and in-process cluster) to this file")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return c.startProfile() }
	root.PersistentPostRunE = func(*cobra.Command, []string) error { return c.stopProfile() }
	root.AddCommand(newMetaCmd(c), newLocksCmd(c), newIOCmd(c), newSealCmd(c), newFenceCmd(c),
		newExpiryCmd(c), newCAPICmd(c), newTeraCmd(c), newScaleCmd(c), newRepairCmd(c), newTLSCmd(c), newHACmd(c), newAllCmd(c))
	return root
}

func (c *common) startProfile() error {
	if c.cpuProfile == "" {
		return nil
	}
	f, err := os.Create(c.cpuProfile)
	if err != nil {
		return err
	}
	c.profileFile = f
	return pprof.StartCPUProfile(f)
}

func (c *common) stopProfile() error {
	if c.profileFile == nil {
		return nil
	}
	pprof.StopCPUProfile()
	return c.profileFile.Close()
}

func (c *common) validate() error {
	if c.duration <= 0 {
		return fmt.Errorf("--duration must be positive, got %v", c.duration)
	}
	return validateCounts("--clients", c.clients, 4096)
}

// validateCounts checks a list flag of counts: at least one value, each in
// [1, limit].
func validateCounts(flag string, ns []int, limit int) error {
	if len(ns) == 0 {
		return fmt.Errorf("%s needs at least one value", flag)
	}
	for _, n := range ns {
		if n < 1 || n > limit {
			return fmt.Errorf("%s values must be in [1, %d], got %d", flag, limit, n)
		}
	}
	return nil
}

// root is the directory this run works under, unique per run so that runs
// against the same --nameserver do not collide.
func (c *common) root() string {
	return fmt.Sprintf("/bfsbench/%s-%d", c.started.UTC().Format("20060102T150405"), os.Getpid())
}

// progressf reports what the run is doing, on stderr.
func (c *common) progressf(format string, args ...any) {
	fmt.Fprintf(c.stderr, format+"\n", args...)
}

// cluster is what a subcommand measures: a nameserver address and, when
// bfsbench started the cluster itself, the sandbox and its data directory.
type cluster struct {
	addr string
	// certsDir holds the client certificates presented to it; "" speaks
	// plaintext.
	certsDir string
	// dir is the sandbox's data directory; "" with --nameserver.
	dir string
	sb  *sandbox.Sandbox
	// plain is, for the tls benchmark, the plaintext cluster started
	// beside this one (which has TLS); nil otherwise.
	plain *cluster
	// stop stops the sandbox and removes its data; it does nothing with
	// --nameserver.
	stop func()
}

// local reports whether bfsbench started the cluster (and so knows its
// disk).
func (cl *cluster) local() bool { return cl.sb != nil }

// creds has an SDK client present the client certificate.
func (cl *cluster) creds() sdk.Option { return sdk.WithCertsDir(cl.certsDir, certs.ClientUser) }

// adminCreds has an SDK client present the admin certificate (a master
// forcing unlocks).
func (cl *cluster) adminCreds() sdk.Option { return sdk.WithCertsDir(cl.certsDir, certs.AdminUser) }

// sideEnv is the environment that has a capi or tera side program (libbfs,
// the plugin, the Go loop) reach the cluster as bfsbench does: with its
// client certificate, or in plaintext (sideInsecureEnv).
func (cl *cluster) sideEnv() []string {
	if cl.certsDir == "" {
		return []string{sideInsecureEnv + "=1"}
	}
	return []string{certs.EnvDir + "=" + cl.certsDir}
}

// sideInsecureEnv, set, has a side program speak plaintext.
const sideInsecureEnv = "BFS_INSECURE"

// raw returns plain gRPC connections presenting the client certificate.
// rawAsNameServer is raw with the nameservers' node certificate (node.crt
// in the certificates directory): chunkservers take their commands (Seal)
// only from a nameserver's certificate.
func (cl *cluster) rawAsNameServer() (*rawConns, error) {
	if cl.certsDir == "" {
		return &rawConns{}, nil
	}
	creds, err := certs.LoadNode(cl.certsDir)
	if err == nil && !creds.Identity().IsNameServer() {
		err = fmt.Errorf("%s names %s: the seal benchmark sends Seal as the nameserver does, with a nameserver's certificate", cl.certsDir, creds.Identity())
	}
	return &rawConns{creds: creds}, err
}

func (cl *cluster) raw() (*rawConns, error) {
	if cl.certsDir == "" {
		return &rawConns{}, nil
	}
	creds, err := certs.LoadClient(cl.certsDir, certs.ClientUser)
	return &rawConns{creds: creds}, err
}

// target returns the cluster to benchmark, starting a sandbox (a nameserver
// and three chunkservers on loopback, data in a fresh temporary directory,
// durable writes as configured by default) unless --nameserver names one.
func (c *common) target(ctx context.Context) (*cluster, error) {
	return c.targetTLS(ctx, !c.insecure)
}

// targetTLS is target with TLS or without: a cluster started with mutual
// TLS (its own CA and certificates), or in plaintext; with --nameserver
// the running cluster, reached as --certs-dir and --insecure say.
func (c *common) targetTLS(ctx context.Context, secure bool) (*cluster, error) {
	if c.nameserver != "" {
		dir, err := certs.ResolveDir(c.certsDir, c.insecure)
		if err != nil {
			return nil, err
		}
		return &cluster{addr: c.nameserver, certsDir: dir, stop: func() {}}, nil
	}
	dir, err := os.MkdirTemp("", "bfsbench-")
	if err != nil {
		return nil, err
	}
	sb, err := sandbox.Start(sandbox.Config{Dir: dir, Chunkservers: sandboxChunkservers, Insecure: !secure})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cl := &cluster{addr: sb.NameServerAddr, certsDir: sb.CertsDir(), dir: dir, sb: sb, stop: func() {
		if err := sb.Close(); err != nil {
			c.progressf("stopping the cluster: %v", err)
		}
		os.RemoveAll(dir)
	}}
	if err := waitChunkservers(ctx, sb, sandboxChunkservers); err != nil {
		cl.stop()
		return nil, err
	}
	c.progressf("started a cluster in %s (nameserver %s, chunkservers %v, %s)", dir, sb.NameServerAddr, sb.ChunkserverAddrs(), tlsName(secure))
	return cl, nil
}

// waitChunkservers waits until the nameserver counts n live chunkservers.
// sandbox.Start returns once they serve, not once they have registered,
// and a block allocated before then fails ("not enough live
// chunkservers"). The nameserver offers nothing to wait on, so this polls.
func waitChunkservers(ctx context.Context, sb *sandbox.Sandbox, n int) error {
	return poll(ctx, 30*time.Second, fmt.Sprintf("%d chunkservers to register", n), func() (bool, error) {
		return sb.NameServer().LiveChunkservers() >= n, nil
	})
}

// poll calls cond every 20 ms until it is true, fails, or d passes.
func poll(ctx context.Context, d time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

// runFunc measures one benchmark against a cluster.
type runFunc func(ctx context.Context, c *common, cl *cluster) ([]bench.Result, error)

// startFunc starts (or targets) the cluster a benchmark measures.
type startFunc func(ctx context.Context) (*cluster, error)

// measure validates the flags, starts (or targets) the cluster with
// start, runs the benchmark and stops the cluster again.
func (c *common) measure(ctx context.Context, validate func() error, run runFunc, start startFunc) ([]bench.Result, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := validate(); err != nil {
		return nil, err
	}
	cl, err := start(ctx)
	if err != nil {
		return nil, err
	}
	defer cl.stop()
	defer c.cleanUp(ctx, cl)
	return run(ctx, c, cl)
}

// cleanUp removes what the run left in a cluster it did not start (a
// started one goes away whole). Not measured; failures are only reported.
func (c *common) cleanUp(ctx context.Context, cl *cluster) {
	if c.nameserver == "" || cl.addr == "" { // "": ha, which starts its own clusters
		return
	}
	ctx = context.WithoutCancel(ctx)
	client, err := sdk.Dial(ctx, cl.addr, cl.creds())
	if err == nil {
		defer client.Close()
		err = client.RemoveDir(ctx, c.root(), true)
	}
	if err != nil && !errors.Is(err, sdk.ErrNotFound) {
		c.progressf("removing %s: %v", c.root(), err)
	}
}

// benchCommand makes cmd a single-benchmark subcommand: it gets --plot
// and a RunE that measures, then prints the table and the verdicts on the
// targets, and writes the CSV and the chart when asked.
func (c *common) benchCommand(cmd *cobra.Command, validate func() error, run runFunc, chart chartFunc) {
	c.benchCommandOn(cmd, validate, run, chart, c.target)
}

// benchCommandOn is benchCommand measuring on the cluster start gives.
func (c *common) benchCommandOn(cmd *cobra.Command, validate func() error, run runFunc, chart chartFunc, start startFunc) {
	var plotPath string
	cmd.Flags().StringVar(&plotPath, "plot", "", "also draw this benchmark's chart to this file (.png, .svg or .pdf)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		results, err := c.measure(cmd.Context(), func() error {
			if err := validatePlotPath("--plot", plotPath); err != nil {
				return err
			}
			return validate()
		}, run, start)
		if err != nil {
			return err
		}
		if err := c.printTable(results); err != nil {
			return err
		}
		if err := c.printTargets(results); err != nil {
			return err
		}
		if err := c.writeCSV(results); err != nil {
			return err
		}
		if plotPath == "" {
			return nil
		}
		if err := drawChart(chart, results, plotPath); err != nil {
			return err
		}
		c.progressf("chart written to %s", plotPath)
		return nil
	}
}

func noValidation() error { return nil }
