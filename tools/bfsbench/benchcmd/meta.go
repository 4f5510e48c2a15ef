package benchcmd

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/sdk"
)

func newMetaCmd(c *common) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "meta",
		Short: "Namespace operations: create, create+delete (unlocked and locked directory) and stat, for each --clients value",
		Args:  cobra.NoArgs,
	}
	c.benchCommand(cmd, noValidation, runMeta, metaChart)
	return cmd
}

const lockedRatioNote = "throughput of create+delete in a directory locked by the creating client's session, over the same in an unlocked directory, measured alternately in quarters of --duration (unlocked, locked, locked, unlocked; 1.00x: the lock check is free)"

// runMeta measures, for each client count: creates of new files (in a
// directory per client), create+delete pairs (one op is a create and a
// delete of the same file) in an unlocked directory and then in a
// directory the client has locked, and stat of an existing file. Every
// client has its own connection and session.
func runMeta(ctx context.Context, c *common, cl *cluster) ([]bench.Result, error) {
	var results []bench.Result
	for _, n := range c.clients {
		clients, err := dialN(ctx, cl.addr, n, cl.creds())
		if err != nil {
			return nil, err
		}
		root := fmt.Sprintf("%s/meta/%d", c.root(), n)
		rs, err := metaRound(ctx, c, clients, root)
		closeAll(clients)
		if err != nil {
			return nil, err
		}
		results = append(results, rs...)
	}
	return results, nil
}

func metaRound(ctx context.Context, c *common, clients []*sdk.Client, root string) ([]bench.Result, error) {
	for i, cl := range clients {
		if err := cl.MkdirAll(ctx, fmt.Sprintf("%s/c%d", root, i), 0o755); err != nil {
			return nil, err
		}
		// u<i> and l<i> start alike (empty), for a fair comparison.
		for _, d := range []string{"u", "l"} {
			if err := cl.MkdirAll(ctx, fmt.Sprintf("%s/%s%d", root, d, i), 0o755); err != nil {
				return nil, err
			}
		}
		if err := cl.Touch(ctx, fmt.Sprintf("%s/c%d/stat-me", root, i), sdk.Overwrite()); err != nil {
			return nil, err
		}
	}
	n := len(clients)
	cr, err := c.closedLoop(ctx, "create", n, func(ctx context.Context, ci, i int) error {
		return clients[ci].Touch(ctx, fmt.Sprintf("%s/c%d/new%d", root, ci, i))
	})
	if err != nil {
		return nil, err
	}
	cd, cdl, err := createDeleteLockedVsUnlocked(ctx, c, clients, root)
	if err != nil {
		return nil, err
	}
	st, err := c.closedLoop(ctx, "stat", n, func(ctx context.Context, ci, _ int) error {
		_, err := clients[ci].Stat(ctx, fmt.Sprintf("%s/c%d/stat-me", root, ci))
		return err
	})
	if err != nil {
		return nil, err
	}
	ratio := bench.Result{Name: "locked/unlocked create+delete", Clients: n, Unit: "x", Note: lockedRatioNote}
	if u := cd.OpsPerSec(); u > 0 {
		ratio.Value = cdl.OpsPerSec() / u
	}
	return []bench.Result{cr, cd, cdl, ratio, st}, nil
}

// createDeleteLockedVsUnlocked measures create+delete with every client
// in its own unlocked directory, and in its own directory that its session
// has locked (so each mutation passes the lock check as the holder). The
// two alternate in quarters of --duration, in the order unlocked, locked,
// locked, unlocked, so that drift in the nameserver (Pebble flushes and
// compactions as the run goes on) does not favor either.
func createDeleteLockedVsUnlocked(ctx context.Context, c *common, clients []*sdk.Client, root string) (unlocked, locked bench.Result, err error) {
	locks := make([]*sdk.Lock, 0, len(clients))
	defer func() {
		for _, l := range locks {
			l.Unlock(context.WithoutCancel(ctx))
		}
	}()
	for i, cl := range clients {
		l, err := cl.LockDir(ctx, fmt.Sprintf("%s/l%d", root, i))
		if err != nil {
			return unlocked, locked, err
		}
		locks = append(locks, l)
	}
	n, quarter := len(clients), c.duration/4
	var us, ls []bench.Result
	// ABBA: the nameserver slows down as a run goes on (the deletes'
	// tombstones pile up in Pebble), so the order that cancels a steady
	// drift is unlocked, locked, locked, unlocked.
	for i, inLocked := range []bool{false, true, true, false} {
		// Distinct names per measurement: a file of an interrupted op may be left.
		if !inLocked {
			u, err := c.closedLoopFor(ctx, "create+delete", n, quarter, createDelete(clients, root+fmt.Sprintf("/u%%d/r%d-f%%d", i)))
			if err != nil {
				return unlocked, locked, err
			}
			us = append(us, u)
			continue
		}
		l, err := c.closedLoopFor(ctx, "create+delete (locked dir)", n, quarter, createDelete(clients, root+fmt.Sprintf("/l%%d/r%d-f%%d", i)))
		if err != nil {
			return unlocked, locked, err
		}
		ls = append(ls, l)
	}
	for _, l := range locks {
		if l.Err() != nil {
			return unlocked, locked, fmt.Errorf("create+delete (locked dir): lost %s during the run: %w", l.Path(), l.Err())
		}
	}
	return bench.Merge(us...), bench.Merge(ls...), nil
}

// createDelete is the op creating and deleting pattern (client, op).
func createDelete(clients []*sdk.Client, pattern string) bench.Op {
	return func(ctx context.Context, ci, i int) error {
		p := fmt.Sprintf(pattern, ci, i)
		if err := clients[ci].Touch(ctx, p); err != nil {
			return err
		}
		return clients[ci].Remove(ctx, p)
	}
}

// closedLoop runs op from n clients for --duration, with progress.
func (c *common) closedLoop(ctx context.Context, name string, n int, op bench.Op) (bench.Result, error) {
	return c.closedLoopFor(ctx, name, n, c.duration, op)
}

// progressEvery is how often a closed loop longer than that reports on
// stderr how many operations it has done.
const progressEvery = 5 * time.Second

func (c *common) closedLoopFor(ctx context.Context, name string, n int, d time.Duration, op bench.Op) (bench.Result, error) {
	c.progressf("%s with %s for %v...", name, nClients(n), d)
	var done atomic.Int64
	counted := func(ctx context.Context, ci, i int) error {
		err := op(ctx, ci, i)
		if err == nil {
			done.Add(1)
		}
		return err
	}
	stop := func() {}
	if d > progressEvery {
		stop = every(progressEvery, func(elapsed time.Duration) {
			c.progressf("  %s: %d ops in %v", name, done.Load(), elapsed.Round(time.Second))
		})
	}
	r, err := bench.Run(ctx, name, n, d, 0, counted)
	stop()
	if err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	c.progressf("  %s: %.0f ops/s, p50 %s, p99 %s", name, r.OpsPerSec(), ms(r.P50), ms(r.P99))
	return r, nil
}

// every calls f with the time elapsed every interval until the returned
// stop is called; stop waits for a call under way to return.
func every(interval time.Duration, f func(elapsed time.Duration)) (stop func()) {
	start := time.Now()
	stopc, donec := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(donec)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stopc:
				return
			case <-t.C:
				f(time.Since(start))
			}
		}
	}()
	return func() {
		close(stopc)
		<-donec
	}
}

func dialN(ctx context.Context, addr string, n int, opts ...sdk.Option) ([]*sdk.Client, error) {
	out := make([]*sdk.Client, 0, n)
	for range n {
		cl, err := sdk.Dial(ctx, addr, opts...)
		if err != nil {
			closeAll(out)
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}

func closeAll(clients []*sdk.Client) {
	for _, cl := range clients {
		cl.Close()
	}
}
