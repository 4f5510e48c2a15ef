// Package benchcmd is the command tree of bfsbench. Every subcommand either
// starts what it measures (an in-process cluster on loopback, data in a
// temporary directory, durable writes) or targets a running cluster with
// --nameserver.
package benchcmd

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/internal/sandbox"
)

// Main runs bfsbench with args and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "bfsbench: %v\n", err)
		return 1
	}
	return 0
}

// common are the flags every subcommand has.
type common struct {
	nameserver  string
	duration    time.Duration
	clients     []int
	csvPath     string
	cpuProfile  string
	profileFile *os.File
	stdout      io.Writer
	stderr      io.Writer
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	c := &common{stdout: stdout, stderr: stderr}
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
	pf.DurationVar(&c.duration, "duration", 5*time.Second, "how long each measurement runs")
	pf.IntSliceVar(&c.clients, "clients", []int{1, 64}, "concurrent clients, one measurement per value")
	pf.StringVar(&c.csvPath, "csv", "", "also write the results to this CSV file")
	pf.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (client and in-process cluster) to this file")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return c.startProfile() }
	root.PersistentPostRunE = func(*cobra.Command, []string) error { return c.stopProfile() }
	root.AddCommand(newMetaCmd(c))
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
	if len(c.clients) == 0 {
		return fmt.Errorf("--clients needs at least one value")
	}
	for _, n := range c.clients {
		if n < 1 || n > 4096 {
			return fmt.Errorf("--clients values must be in [1, 4096], got %d", n)
		}
	}
	return nil
}

// target returns the nameserver to benchmark, starting a sandbox cluster
// in a temporary directory unless --nameserver names one.
func (c *common) target() (addr string, stop func(), err error) {
	if c.nameserver != "" {
		return c.nameserver, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "bfsbench-")
	if err != nil {
		return "", nil, err
	}
	sb, err := sandbox.Start(sandbox.Config{Dir: dir})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	fmt.Fprintf(c.stderr, "started a cluster in %s (nameserver %s)\n", dir, sb.NameServerAddr)
	return sb.NameServerAddr, func() {
		if err := sb.Close(); err != nil {
			fmt.Fprintf(c.stderr, "stopping the cluster: %v\n", err)
		}
		os.RemoveAll(dir)
	}, nil
}

// report prints results as a table, and as CSV with --csv. base maps a
// workload name to its one-client throughput, for the speedup column.
func (c *common) report(results []bench.Result) error {
	base := map[string]float64{}
	for _, r := range results {
		if r.Clients == 1 {
			base[r.Name] = r.OpsPerSec()
		}
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tclients\tops/s\tp50\tp90\tp99\tvs 1 client\terrors\t")
	for _, r := range results {
		speedup := "-"
		if b := base[r.Name]; b > 0 {
			speedup = fmt.Sprintf("%.1fx", r.OpsPerSec()/b)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%d\t\n", r.Name, r.Clients, r.OpsPerSec(),
			ms(r.P50), ms(r.P90), ms(r.P99), speedup, r.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if c.csvPath == "" {
		return nil
	}
	return writeCSV(c.csvPath, results)
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64) + "ms"
}

func writeCSV(path string, results []bench.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"workload", "clients", "ops", "errors", "elapsed_s", "ops_per_s", "p50_ms", "p90_ms", "p99_ms"})
	for _, r := range results {
		w.Write([]string{r.Name, strconv.Itoa(r.Clients), strconv.FormatInt(r.Ops, 10), strconv.FormatInt(r.Errors, 10),
			fmt.Sprintf("%.3f", r.Elapsed.Seconds()), fmt.Sprintf("%.1f", r.OpsPerSec()),
			strings.TrimSuffix(ms(r.P50), "ms"), strings.TrimSuffix(ms(r.P90), "ms"), strings.TrimSuffix(ms(r.P99), "ms")})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
