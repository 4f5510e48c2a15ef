package benchcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/bench"
)

// suiteEntry is one benchmark of the all command.
type suiteEntry struct {
	name     string
	validate func() error
	run      runFunc
	chart    chartFunc
	// start gives the cluster to measure; nil for the usual sandbox.
	start startFunc
}

// The all command runs every benchmark with its own defaults, which are
// sized so that the whole suite, etcd included, takes under five minutes
// on a 2-core machine with an SSD; fence's 1000 open files and io's three
// 256 MiB puts are most of it.
func newAllCmd(c *common) *cobra.Command {
	locks, io, seal, fence, expiry := &locksOptions{}, defaultIOOptions(), defaultSealOptions(), defaultFenceOptions(), defaultExpiryOptions()
	capi, tera, scale, repair, tls := defaultCAPIOptions(), defaultTeraOptions(), defaultScaleOptions(), defaultRepairOptions(), defaultTLSOptions()
	ha := defaultHAOptions()
	var plotDir string
	cmd := &cobra.Command{
		Use:   "all",
		Short: "Run meta, locks, io, seal, fence, expiry, capi, tera, scale, repair, tls and ha, each on a fresh cluster, printing every table and a summary against the targets",
		Long: `Run meta, locks, io, seal, fence, expiry, capi, tera, scale, repair, tls and ha, each
on a fresh cluster, print every table as it completes, then one summary of
the figures the issues name against their targets. --duration applies to
meta, locks, tls, ha and capi's lock cycles, --clients to meta, locks, tls
and ha, --vs-etcd to locks; the other benchmarks take their flags with a
prefix (--io-size, --seal-blocks, --fence-files, --expiry-ttl, --capi-size,
--tera-size, --scale-locks, --repair-size, --tls-size, --ha-trials, ...).
capi and tera need gcc and g++. --csv gets every
result; --plot-dir gets every benchmark's chart as <benchmark>.png.
A benchmark that fails does not stop the others; the exit code says so.`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	locks.register(f)
	io.register(f, "io-")
	seal.register(f, "seal-")
	fence.register(f, "fence-")
	expiry.register(f, "expiry-")
	capi.register(f, "capi-")
	tera.register(f, "tera-")
	scale.register(f, "scale-")
	repair.register(f, "repair-")
	tls.register(f, "tls-")
	ha.register(f, "ha-")
	f.StringVar(&plotDir, "plot-dir", "", "also draw every benchmark's chart into this directory, as <benchmark>.png")
	suite := []suiteEntry{
		{"meta", noValidation, runMeta, metaChart, nil},
		{"locks", noValidation, locks.run, locksChart, nil},
		{"io", func() error { return io.validate("io-") }, io.run, ioChart, nil},
		{"seal", func() error { return seal.validate("seal-") }, seal.run, sealChart, nil},
		{"fence", func() error { return fence.validate("fence-") }, fence.run, fenceChart, nil},
		{"expiry", func() error { return expiry.validate("expiry-") }, expiry.run, expiryChart, nil},
		{"capi", func() error { return capi.validate("capi-") }, capi.run, capiChart, c.target},
		{"tera", func() error { return tera.validate("tera-") }, tera.run, teraChart, c.target},
		{"scale", func() error { return scale.validate("scale-") }, scale.run, scaleChart, c.scaleTarget},
		{"repair", func() error { return repair.validate("repair-") }, repair.run, repairChart, repair.target(c)},
		{"tls", func() error { return tls.validate("tls-") }, tls.run, tlsChart, c.tlsTargets},
		{"ha", func() error { return ha.validate("ha-") }, ha.run, haChart, c.haTarget},
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return c.runSuite(cmd.Context(), suite, plotDir) }
	return cmd
}

// runSuite runs every benchmark of suite, printing each table as it ends,
// then the summary; with plotDir it draws each benchmark's chart there.
func (c *common) runSuite(ctx context.Context, suite []suiteEntry, plotDir string) error {
	// Bad flags fail before anything runs.
	if err := c.validate(); err != nil {
		return err
	}
	for _, b := range suite {
		if err := b.validate(); err != nil {
			return err
		}
	}
	if plotDir != "" {
		if err := os.MkdirAll(plotDir, 0o755); err != nil {
			return fmt.Errorf("--plot-dir: %w", err)
		}
	}
	start := time.Now()
	var all []bench.Result
	var errs []error
	for _, b := range suite {
		c.progressf("== %s ==", b.name)
		t := time.Now()
		start := b.start
		if start == nil {
			start = c.target
		}
		rs, err := c.measure(ctx, b.validate, b.run, start)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			errs = append(errs, fmt.Errorf("%s: %w", b.name, err))
			fmt.Fprintf(c.stdout, "== %s: FAILED: %v\n\n", b.name, err)
			continue
		}
		fmt.Fprintf(c.stdout, "== %s (%v)\n", b.name, time.Since(t).Round(time.Second))
		if err := c.printTable(rs); err != nil {
			return err
		}
		fmt.Fprintln(c.stdout)
		all = append(all, rs...)
		if plotDir != "" {
			path := filepath.Join(plotDir, b.name+".png")
			if err := drawChart(b.chart, rs, path); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", b.name, err))
			} else {
				c.progressf("chart written to %s", path)
			}
		}
	}
	fmt.Fprintf(c.stdout, "== summary (the suite took %v)\n", time.Since(start).Round(time.Second))
	if err := renderTargets(c.stdout, verdicts(all)); err != nil {
		return err
	}
	c.progressf("suite done in %v", time.Since(start).Round(time.Second))
	if err := c.writeCSV(all); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
