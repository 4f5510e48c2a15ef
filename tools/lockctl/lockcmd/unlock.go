package lockcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/printable"
	"github.com/bfs-go/bfs/sdk"
)

// pollInterval is how often unlock --wait looks at a cleaning's progress.
// Only the display polls: the end of the cleaning is the nameserver's
// answer to the waiting unlock.
const pollInterval = 200 * time.Millisecond

type unlockFlags struct {
	force   bool
	wait    bool
	timeout time.Duration
	epoch   epochValue
}

func (e *env) unlockCommand() *cobra.Command {
	var f unlockFlags
	cmd := &cobra.Command{
		Use:   "unlock [--force] [--wait [--timeout D]] [--epoch N] PATH",
		Short: "Release a directory lock",
		Long: `unlock releases the lock on the directory PATH. The directory is then
CLEANING until the files open for write in it are sealed, then UNLOCKED.
A directory already UNLOCKED or CLEANING is reported as such (exit 0); a
PATH that does not exist exits 5, one that is not a directory exits 1.

Without --force only the lock's own session may unlock it, and lockctl's
session is its own, fresh one: a non-forced unlock of anyone else's lock
is refused (exit 3). --force takes the lock away from whoever holds it,
an operator lock included; the holder sees its lock lost.

--epoch N refuses the unlock (exit 6) unless the lock has epoch N, so an
unlock meant for an old lock never releases a newer one.

--wait returns only once the directory is UNLOCKED, showing on stderr the
files still pending and the replicas not yet sealed (a progress line on a
terminal, a report per change otherwise). If --timeout runs out first it
exits 4, the directory still cleaning.

` + exitCodesHelp,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().BoolVar(&f.force, "force", false, "unlock whoever holds the lock")
	cmd.Flags().BoolVar(&f.wait, "wait", false, "return only when the directory is UNLOCKED")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "with --wait, give up after this long (0: no bound)")
	cmd.Flags().Var(&f.epoch, "epoch", "unlock only if the lock has this epoch")
	cmd.RunE = e.run(func(cmd *cobra.Command, args []string) error {
		p, err := cleanArg(args[0])
		if err != nil {
			return err
		}
		switch {
		case f.timeout < 0:
			return usagef("--timeout %v is negative", f.timeout)
		case f.timeout > 0 && !f.wait:
			return usagef("--timeout bounds --wait; give --wait too")
		}
		ctx := cmd.Context()
		c, err := e.dial(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		return e.unlock(ctx, c, p, f)
	})
	return cmd
}

func (e *env) unlock(ctx context.Context, c *sdk.Client, path string, f unlockFlags) error {
	var opts []sdk.UnlockOption
	if f.force {
		opts = append(opts, sdk.Force())
	}
	if f.epoch != 0 {
		opts = append(opts, sdk.AtEpoch(uint64(f.epoch)))
	}
	var d *sdk.DirLock
	var err error
	if f.wait {
		d, err = e.unlockWait(ctx, c, path, f.timeout, opts)
	} else {
		d, err = c.UnlockDir(ctx, path, opts...)
	}
	if err != nil {
		return e.unlockError(err, f.force)
	}
	if e.json() {
		return writeJSON(e.stdout, toLockJSON(d))
	}
	fmt.Fprintf(e.stdout, "%s %s", d.Status, printable.String(d.Path))
	if d.Epoch != 0 {
		fmt.Fprintf(e.stdout, " (epoch %d)", d.Epoch)
	}
	if d.Status == sdk.Cleaning {
		fmt.Fprintf(e.stdout, ": %d file(s) pending; 'lockctl unlock --wait %s' waits for the end", len(d.Pending), printable.String(d.Path))
	}
	fmt.Fprintln(e.stdout)
	return nil
}

// unlockError explains a refusal; a non-forced unlock refused because the
// lock is someone else's is the case operators meet most.
func (e *env) unlockError(err error, force bool) error {
	var le *sdk.LockedError
	if !force && errors.Is(err, sdk.ErrLocked) && errors.As(err, &le) {
		return fmt.Errorf("%w: refused without --force, since lockctl's own session does not hold it; "+
			"'lockctl unlock --force %s' takes it away from %s", err, le.Path, orDash(le.Holder))
	}
	return err
}

// unlockWait unlocks and waits for UNLOCKED, showing the cleaning's
// progress meanwhile.
func (e *env) unlockWait(ctx context.Context, c *sdk.Client, path string, timeout time.Duration, opts []sdk.UnlockOption) (*sdk.DirLock, error) {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	p := e.newProgress()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.follow(wctx, c, path, stop, e.clock)
	}()
	d, err := c.UnlockDir(wctx, path, append(opts, sdk.WaitUnlocked())...)
	close(stop)
	wg.Wait()
	p.finish()
	if err == nil || !waitEnded(err) {
		return d, err
	}
	why := "interrupted"
	if ctx.Err() == nil {
		why = fmt.Sprintf("timed out after %v", timeout)
	}
	return nil, e.stillBusy(ctx, c, path, why+" waiting for the cleaning of", err)
}

// progress shows a cleaning's pending files on w: on a terminal one line
// rewritten in place, elsewhere a report each time the pending set
// changes.
type progress struct {
	w    io.Writer
	tty  bool
	last string // the last report printed
}

func (e *env) newProgress() *progress {
	p := &progress{w: e.stderr}
	if f, ok := e.stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// follow polls the lock until stop closes, reporting the cleaning.
func (p *progress) follow(ctx context.Context, c *sdk.Client, path string, stop <-chan struct{}, clk clock.Clock) {
	t := clk.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if d, err := c.GetDirLock(ctx, path); err == nil && d.Status == sdk.Cleaning {
			p.show(d)
		}
		t.Reset(pollInterval)
	}
}

func (p *progress) show(d *sdk.DirLock) {
	if p.tty {
		line := fmt.Sprintf("cleaning %s (epoch %d): %d file(s), %d replica(s) pending", printable.String(d.Path), d.Epoch, len(d.Pending), replicas(d))
		if line != p.last {
			fmt.Fprintf(p.w, "\r%-*s", len(p.last), line)
			p.last = line
		}
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cleaning %s (epoch %d): %d file(s) pending\n", printable.String(d.Path), d.Epoch, len(d.Pending))
	for _, f := range d.Pending {
		fmt.Fprintf(&b, "  %s\n", pendingLine(f))
	}
	if b.String() != p.last {
		p.last = b.String()
		io.WriteString(p.w, p.last)
	}
}

// finish ends the progress line on a terminal.
func (p *progress) finish() {
	if p.tty && p.last != "" {
		fmt.Fprintln(p.w)
	}
}

func replicas(d *sdk.DirLock) int {
	n := 0
	for _, f := range d.Pending {
		n += len(f.Replicas)
	}
	return n
}

// epochValue is the --epoch flag: a lock epoch, which starts at 1.
type epochValue uint64

func (v *epochValue) String() string {
	if *v == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(*v), 10)
}

func (v *epochValue) Type() string { return "N" }

func (v *epochValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	switch {
	case strings.HasPrefix(strings.TrimSpace(s), "-"):
		return fmt.Errorf("an epoch is not negative")
	case err != nil:
		return fmt.Errorf("want a lock epoch, a whole number from 1")
	case n == 0:
		return fmt.Errorf("epochs start at 1")
	}
	*v = epochValue(n)
	return nil
}
