package lockcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
	cmd := &cobra.Command{
		Use:   "list [--state locked|cleaning] [PREFIX]",
		Short: "List the locked and cleaning directories",
		Long: `list shows the directories at or under PREFIX (default /) that are
LOCKED or CLEANING; --state keeps only one of the two.`,
		Args: cobra.MaximumNArgs(1),
	}
	cmd.Flags().Var(&state, "state", "only locks in this state: locked or cleaning")
	cmd.RunE = e.withClient(fspath.Root, func(ctx context.Context, c *sdk.Client, prefix string) error {
		locks, err := c.ListDirLocks(ctx, prefix, state.filter())
		if err != nil {
			return err
		}
		if e.json() {
			out := make([]lockJSON, 0, len(locks))
			for _, d := range locks {
				out = append(out, toLockJSON(d))
			}
			return writeJSON(e.stdout, out)
		}
		if len(locks) == 0 {
			fmt.Fprintf(e.stdout, "no %sdirectory locks at or under %s\n", state.adjective(), printable.String(prefix))
			return nil
		}
		writeLockTable(e.stdout, locks)
		return nil
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
	return &cobra.Command{
		Use:   "history PATH",
		Short: "Show the past locks of a directory",
		Long: `history lists the past locks of the directory PATH, oldest first: holder,
epoch, when locked and unlocked, how long held, why released ("holder",
"force", "expiry"), and what the cleaning did (files sealed, bytes
truncated). The nameserver keeps a bounded number per directory.`,
		Args: cobra.ExactArgs(1),
		RunE: e.withClient("", func(ctx context.Context, c *sdk.Client, path string) error {
			hist, err := c.LockHistory(ctx, path)
			if err != nil {
				return err
			}
			if e.json() {
				out := make([]historyJSON, 0, len(hist))
				for _, h := range hist {
					out = append(out, toHistoryJSON(h))
				}
				return writeJSON(e.stdout, out)
			}
			if len(hist) == 0 {
				fmt.Fprintf(e.stdout, "no past locks of %s\n", printable.String(path))
				return nil
			}
			writeHistoryTable(e.stdout, hist)
			return nil
		}),
	}
}

func (e *env) sessionsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "sessions",
		Short: "List the live sessions",
		Long: `sessions lists the sessions the nameserver holds: id, holder, TTL, time
left before expiry, files open for write, directory locks held.`,
		Args: cobra.NoArgs,
		RunE: e.withClient(fspath.Root, func(ctx context.Context, c *sdk.Client, _ string) error {
			sessions, err := c.Sessions(ctx)
			if err != nil {
				return err
			}
			if e.json() {
				out := make([]sessionJSON, 0, len(sessions))
				for _, s := range sessions {
					out = append(out, toSessionJSON(s))
				}
				return writeJSON(e.stdout, out)
			}
			if len(sessions) == 0 {
				fmt.Fprintln(e.stdout, "no live sessions")
				return nil
			}
			writeSessionTable(e.stdout, sessions)
			return nil
		}),
	}
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
