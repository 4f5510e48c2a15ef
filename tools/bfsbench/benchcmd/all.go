package benchcmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/bench"
)

// suiteEntry is one benchmark of the all command.
type suiteEntry struct {
	name     string
	validate func() error
	run      runFunc
}

// The all command runs every benchmark with its own defaults, which are
// sized so that the whole suite takes under five minutes on a 2-core
// machine with an SSD (about two minutes on the machine it was written on;
// fence's 1000 open files are most of it).
func newAllCmd(c *common) *cobra.Command {
	io, seal, fence, expiry := defaultIOOptions(), defaultSealOptions(), defaultFenceOptions(), defaultExpiryOptions()
	cmd := &cobra.Command{
		Use:   "all",
		Short: "Run meta, locks, io, seal, fence and expiry, each on a fresh cluster, printing every table",
		Long: `Run meta, locks, io, seal, fence and expiry, each on a fresh cluster, and
print every table as it completes. --duration and --clients apply to meta and
locks; the other benchmarks take their flags with a prefix (--io-size,
--seal-blocks, --fence-files, --expiry-ttl, ...). --csv gets every result.
A benchmark that fails does not stop the others; the exit code says so.`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	io.register(f, "io-")
	seal.register(f, "seal-")
	fence.register(f, "fence-")
	expiry.register(f, "expiry-")
	suite := []suiteEntry{
		{"meta", noValidation, runMeta},
		{"locks", noValidation, runLocks},
		{"io", func() error { return io.validate("io-") }, io.run},
		{"seal", func() error { return seal.validate("seal-") }, seal.run},
		{"fence", func() error { return fence.validate("fence-") }, fence.run},
		{"expiry", func() error { return expiry.validate("expiry-") }, expiry.run},
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return c.runSuite(cmd.Context(), suite) }
	return cmd
}

// runSuite runs every benchmark of suite, printing each table as it ends.
func (c *common) runSuite(ctx context.Context, suite []suiteEntry) error {
	// Bad flags fail before anything runs.
	if err := c.validate(); err != nil {
		return err
	}
	for _, b := range suite {
		if err := b.validate(); err != nil {
			return err
		}
	}
	start := time.Now()
	var all []bench.Result
	var errs []error
	for _, b := range suite {
		c.progressf("== %s ==", b.name)
		t := time.Now()
		rs, err := c.measure(ctx, b.validate, b.run)
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
	}
	c.progressf("suite done in %v", time.Since(start).Round(time.Second))
	if err := c.writeCSV(all); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
