package lockcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/internal/printable"
	"github.com/bfs-go/bfs/sdk"
)

func (e *env) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status PATH",
		Short: "Show the lock state of a directory",
		Long: `status shows the lock state of the directory PATH: state, holder, session,
epoch, since when, and while cleaning the files still pending with the
replicas not yet sealed. It exits 0 whatever the state; 5 if PATH does
not exist.`,
		Args: cobra.ExactArgs(1),
		RunE: e.withClient("", func(ctx context.Context, c *sdk.Client, path string) error {
			d, err := c.GetDirLock(ctx, path)
			if err != nil {
				return err
			}
			if e.json() {
				return writeJSON(e.stdout, toLockJSON(d))
			}
			writeStatus(e.stdout, d, e.clock.Now())
			return nil
		}),
	}
}

func (e *env) listCommand() *cobra.Command {
	var state stateValue
	var holder, session string
	var pg paging
	cmd := &cobra.Command{
		Use:   "list [--state locked|cleaning] [--holder H] [--session ID] [--limit N] [PREFIX]",
		Short: "List the locked and cleaning directories",
		Long: `list shows the directories at or under PREFIX (default /) that are
LOCKED or CLEANING, sorted by path; --state, --holder and --session keep
only those in that state, with that holder, of that session (the
nameserver filters them). Locks arrive a page at a time and are printed
as they come: a table in blocks of ` + tableBlockText + ` rows, or with -o json one
object per line; --limit stops after N.`,
		Args: cobra.MaximumNArgs(1),
	}
	f := cmd.Flags()
	f.Var(&state, "state", "only locks in this state: locked or cleaning")
	f.StringVar(&holder, "holder", "", "only locks with this holder")
	f.StringVar(&session, "session", "", "only locks of this session")
	pg.register(f, "locks")
	cmd.RunE = e.withClient(fspath.Root, func(ctx context.Context, c *sdk.Client, prefix string) error {
		if err := pg.validate(); err != nil {
			return err
		}
		q := sdk.LockQuery{Prefix: prefix, Holder: holder, SessionID: session, PageSize: pg.size()}
		if s := state.filter(); s != nil {
			q.Status = *s
		}
		n, err := stream(e, c.AllDirLocks(ctx, q), pg.limit, lockHeader, lockRow, func(d *sdk.DirLock) any { return toLockJSON(d) })
		if err == nil && n == 0 && !e.json() {
			fmt.Fprintf(e.stdout, "no %sdirectory locks at or under %s\n", state.adjective(), printable.String(prefix))
		}
		return err
	})
	return cmd
}

func (e *env) watchCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "watch [PREFIX]",
		Short: "Stream lock transitions until interrupted",
		Long: `watch prints every lock transition at or under PREFIX (default /) from now
on, one per line, until interrupted (exit 0). With -o json each line is a
JSON object: the lock after the transition, "previous", "reason" and
"time" (when lockctl received it). If the nameserver cuts the stream (it
restarted, or this watcher fell behind) watch exits 1: list, then watch
again.`,
		Args: cobra.MaximumNArgs(1),
		RunE: e.withClient(fspath.Root, e.watch),
	}
}

func (e *env) watch(ctx context.Context, c *sdk.Client, prefix string) error {
	w, err := c.WatchDirLocks(ctx, prefix)
	if err != nil {
		return err
	}
	defer w.Close()
	if !e.json() {
		fmt.Fprintf(e.stderr, "watching lock transitions at or under %s (Ctrl-C stops)\n", printable.String(prefix))
	}
	enc := json.NewEncoder(e.stdout)
	for {
		ev, err := w.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: the normal end
			}
			return fmt.Errorf("watch %s: %w", prefix, err)
		}
		now := e.clock.Now()
		if !e.json() {
			fmt.Fprintln(e.stdout, eventLine(ev, now))
			continue
		}
		if err := enc.Encode(toEventJSON(ev, now)); err != nil {
			return err
		}
	}
}

func toEventJSON(ev sdk.DirLockEvent, at time.Time) eventJSON {
	return eventJSON{lockJSON: toLockJSON(&ev.Lock), Previous: ev.Previous.String(), Reason: ev.Reason, Time: at.UTC()}
}

func (e *env) historyCommand() *cobra.Command {
	var pg paging
	cmd := &cobra.Command{
		Use:   "history [--limit N] PATH",
		Short: "Show the past locks of a directory",
		Long: `history lists the past locks of the directory PATH, oldest first: holder,
epoch, when locked and unlocked, how long held, why released ("holder",
"force", "expiry"), and what the cleaning did (files sealed, bytes
truncated). The nameserver keeps a bounded number per directory. With
-o json, one object per line; --limit stops after N.`,
		Args: cobra.ExactArgs(1),
	}
	pg.register(cmd.Flags(), "entries")
	cmd.RunE = e.withClient("", func(ctx context.Context, c *sdk.Client, path string) error {
		if err := pg.validate(); err != nil {
			return err
		}
		n, err := stream(e, c.AllLockHistory(ctx, path, pg.size()), pg.limit, historyHeader, historyRow,
			func(h sdk.LockHistoryEntry) any { return toHistoryJSON(h) })
		if err == nil && n == 0 && !e.json() {
			fmt.Fprintf(e.stdout, "no past locks of %s\n", printable.String(path))
		}
		return err
	})
	return cmd
}

func (e *env) sessionsCommand() *cobra.Command {
	var holder string
	var pg paging
	cmd := &cobra.Command{
		Use:   "sessions [--holder H] [--limit N]",
		Short: "List the live sessions",
		Long: `sessions lists the sessions the nameserver holds, sorted by id: id,
holder, TTL, time left before expiry, files open for write, directory
locks held (the first ones by path, and how many in all when that is
more). --holder keeps only the sessions with that holder. Sessions are
printed a page at a time as they arrive, like list's locks; --limit
stops after N.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&holder, "holder", "", "only sessions with this holder")
	pg.register(cmd.Flags(), "sessions")
	cmd.RunE = e.withClient(fspath.Root, func(ctx context.Context, c *sdk.Client, _ string) error {
		if err := pg.validate(); err != nil {
			return err
		}
		q := sdk.SessionQuery{Holder: holder, PageSize: pg.size()}
		n, err := stream(e, c.AllSessions(ctx, q), pg.limit, sessionHeader, sessionRow,
			func(s sdk.SessionInfo) any { return toSessionJSON(s) })
		if err == nil && n == 0 && !e.json() {
			fmt.Fprintln(e.stdout, "no live sessions")
		}
		return err
	})
	return cmd
}

// paging is the --limit and --page-size flags of a listing.
type paging struct {
	limit, pageSize int
}

func (p *paging) register(f *pflag.FlagSet, items string) {
	f.IntVar(&p.limit, "limit", 0, "stop after this many "+items+" (0: all)")
	f.IntVar(&p.pageSize, "page-size", 0, "ask the nameserver for this many "+items+" per request (0: its default)")
}

func (p *paging) validate() error {
	switch {
	case p.limit < 0:
		return usagef("--limit must not be negative, got %d", p.limit)
	case p.pageSize < 0:
		return usagef("--page-size must not be negative, got %d", p.pageSize)
	}
	return nil
}

// size is the page size to ask for: --page-size, or with only --limit,
// no more than the limit.
func (p *paging) size() int {
	if p.pageSize == 0 && p.limit > 0 {
		return min(p.limit, tableBlock)
	}
	return p.pageSize
}

// stateValue is the --state flag of list.
type stateValue struct {
	set    bool
	status sdk.LockStatus
}

func (v *stateValue) String() string {
	if !v.set {
		return ""
	}
	return v.status.String()
}

func (v *stateValue) Type() string { return "state" }

func (v *stateValue) Set(s string) error {
	switch strings.ToLower(s) {
	case "locked":
		v.status = sdk.Locked
	case "cleaning":
		v.status = sdk.Cleaning
	default:
		return fmt.Errorf("want locked or cleaning")
	}
	v.set = true
	return nil
}

func (v *stateValue) filter() *sdk.LockStatus {
	if !v.set {
		return nil
	}
	s := v.status
	return &s
}

func (v *stateValue) adjective() string {
	if !v.set {
		return ""
	}
	return v.status.String() + " "
}
