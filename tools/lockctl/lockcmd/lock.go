package lockcmd

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/printable"
	"github.com/bfs-go/bfs/sdk"
)

// releaseTimeout bounds the unlock `lock` sends when it is interrupted;
// if it fails, closing the session releases the lock anyway.
const releaseTimeout = 5 * time.Second

type lockFlags struct {
	wait     bool
	timeout  time.Duration
	operator bool
	holder   string
	ttl      time.Duration
}

func (e *env) lockCommand() *cobra.Command {
	var f lockFlags
	cmd := &cobra.Command{
		Use:   "lock [--wait [--timeout D]] [--holder NAME] [--ttl D] PATH\n  lockctl lock --operator --holder NAME PATH",
		Short: "Take a directory lock and hold it until interrupted",
		Long: `lock takes the lock on the directory PATH with lockctl's own session and
holds it until interrupted (SIGINT, SIGTERM); then it unlocks and exits 0.
Once granted it prints the path, epoch, holder and session. If the lock is
lost while held (forced away with 'unlock --force', or the session lost)
it says so and exits 6. Should lockctl die, the session expires after
--ttl and the nameserver releases the lock.

With --wait it blocks until the lock can be granted (at most --timeout),
instead of failing with exit 3 (locked) or 4 (cleaning).

With --operator it takes an operator lock, recorded with holder NAME and
bound to no session, and returns at once: the lock stays until
'lockctl unlock --force PATH'.

` + exitCodesHelp,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().BoolVar(&f.wait, "wait", false, "block until the lock can be granted")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "with --wait, give up after this long (0: no bound)")
	cmd.Flags().BoolVar(&f.operator, "operator", false, "take an operator lock, bound to no session (needs --holder)")
	cmd.Flags().StringVar(&f.holder, "holder", "", "holder id to record (default for a session lock: ip:pid:start-time)")
	cmd.Flags().DurationVar(&f.ttl, "ttl", sdk.DefaultSessionTTL, "session time-to-live")
	cmd.RunE = e.run(func(cmd *cobra.Command, args []string) error {
		p, err := cleanArg(args[0])
		if err != nil {
			return err
		}
		if err := f.check(cmd); err != nil {
			return err
		}
		if f.operator {
			return e.operatorLock(cmd.Context(), p, f.holder)
		}
		return e.holdLock(cmd.Context(), p, f)
	})
	return cmd
}

func (f *lockFlags) check(cmd *cobra.Command) error {
	switch {
	case f.timeout < 0:
		return usagef("--timeout %v is negative", f.timeout)
	case f.timeout > 0 && !f.wait:
		return usagef("--timeout bounds --wait; give --wait too")
	case f.operator && f.holder == "":
		return usagef("--operator needs --holder NAME: an operator lock outlives lockctl and must say who took it")
	case f.operator && f.wait:
		return usagef("--wait is not supported with --operator")
	case f.operator && cmd.Flags().Changed("ttl"):
		return usagef("--ttl makes no sense with --operator: an operator lock has no session")
	case f.ttl < time.Millisecond:
		return usagef("--ttl %v: want at least 1ms", f.ttl)
	}
	return nil
}

func (e *env) operatorLock(ctx context.Context, path, holder string) error {
	c, err := e.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	d, err := c.LockDirOperator(ctx, path, holder)
	if err != nil {
		return err
	}
	if e.json() {
		return writeJSON(e.stdout, toLockJSON(d))
	}
	p := printable.String(d.Path)
	fmt.Fprintf(e.stdout, "locked %s: epoch %d, holder %s, operator lock (release with: lockctl unlock --force %s)\n",
		p, d.Epoch, field(d.Holder), p)
	return nil
}

func (e *env) holdLock(ctx context.Context, path string, f lockFlags) error {
	opts := []sdk.Option{sdk.WithSessionTTL(f.ttl)}
	if f.holder != "" {
		opts = append(opts, sdk.WithHolder(f.holder))
	}
	c, err := e.dial(ctx, opts...)
	if err != nil {
		return err
	}
	defer c.Close() // closes the session: the nameserver releases whatever is left
	l, err := e.acquire(ctx, c, path, f)
	if err != nil {
		return err
	}
	if err := e.printGranted(l); err != nil {
		return err
	}
	select {
	case <-l.Done():
		return lostError(l, l.Err())
	case <-ctx.Done():
	}
	// Lost while we were being interrupted? Then say so rather than release.
	if l.Err() != nil {
		return lostError(l, l.Err())
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := l.Unlock(rctx); err != nil {
		return fmt.Errorf("releasing the lock: %w (closing the session releases it)", err)
	}
	if !e.json() {
		fmt.Fprintf(e.stdout, "released %s (epoch %d)\n", printable.String(l.Path()), l.Epoch())
	}
	return nil
}

func lostError(l *sdk.Lock, why error) error {
	return fmt.Errorf("lock on %s (epoch %d) lost while held: %w", l.Path(), l.Epoch(), why)
}

// acquire takes the lock; when a --wait ends (timeout, interrupt) before
// it was granted, the error says who still has the directory.
func (e *env) acquire(ctx context.Context, c *sdk.Client, path string, f lockFlags) (*sdk.Lock, error) {
	if !f.wait {
		return c.LockDir(ctx, path)
	}
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if f.timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, f.timeout)
	}
	defer cancel()
	l, err := c.LockDir(wctx, path, sdk.WaitForLock())
	if err == nil || !waitEnded(err) {
		return l, err
	}
	why := "interrupted"
	if ctx.Err() == nil {
		why = fmt.Sprintf("timed out after %v", f.timeout)
	}
	return nil, e.stillBusy(ctx, c, path, why+" waiting for the lock", err)
}

// waitEnded reports whether err ends a wait that ran out of time or was
// interrupted (the SDK's errors then match the context's).
func waitEnded(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// stillBusy explains a wait that ended before the directory was free: the
// exit code says whether it is still locked or cleaning, and by whom.
func (e *env) stillBusy(ctx context.Context, c *sdk.Client, path, why string, cause error) error {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	d, err := blocker(qctx, c, path)
	if err != nil {
		// One line: errors are printed escaped, a newline included.
		return fmt.Errorf("%s %s: %w (and looking the lock up failed: %w)", why, path, cause, err)
	}
	if d == nil {
		return fmt.Errorf("%s %s: %w", why, path, cause)
	}
	where := ""
	if d.Path != path {
		where = d.Path + " "
	}
	msg := fmt.Errorf("%s %s: %s%s", why, path, where, describe(d))
	if d.Status == sdk.Cleaning {
		return &exitError{ExitCleaning, msg}
	}
	return &exitError{ExitLocked, msg}
}

// blocker finds the lock that stands in the way of locking path: its own,
// an ancestor's (whose subtree covers it) or a descendant's. nil if none.
func blocker(ctx context.Context, c *sdk.Client, path string) (*sdk.DirLock, error) {
	for p := path; ; p = parent(p) {
		d, err := c.GetDirLock(ctx, p)
		if err != nil {
			return nil, err
		}
		if d.Status != sdk.Unlocked {
			return d, nil
		}
		if p == "/" {
			break
		}
	}
	next, stop := iter.Pull2(c.AllDirLocks(ctx, sdk.LockQuery{Prefix: path, PageSize: 1}))
	defer stop()
	d, err, _ := next() // the first one below is enough
	return d, err
}

// parent of a clean absolute path other than "/".
func parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// describe is a lock's state in a few words.
func describe(d *sdk.DirLock) string {
	switch d.Status {
	case sdk.Locked:
		return fmt.Sprintf("locked by %s (epoch %d)", orDash(d.Holder), d.Epoch)
	case sdk.Cleaning:
		return fmt.Sprintf("cleaning (epoch %d, was held by %s), %d file(s) pending", d.Epoch, orDash(d.Holder), len(d.Pending))
	}
	return d.Status.String()
}

func (e *env) printGranted(l *sdk.Lock) error {
	session := l.SessionID()
	if e.json() {
		return writeJSON(e.stdout, lockJSON{
			Path: l.Path(), State: sdk.Locked.String(), Holder: l.Holder(), Session: session, Epoch: l.Epoch(),
			Pending: []pendingJSON{},
		})
	}
	fmt.Fprintf(e.stdout, "locked %s: epoch %d, holder %s, session %s\n",
		printable.String(l.Path()), l.Epoch(), field(l.Holder()), field(session))
	fmt.Fprintln(e.stderr, "holding the lock until interrupted (Ctrl-C releases it)")
	return nil
}
