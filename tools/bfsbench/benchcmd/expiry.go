package benchcmd

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// expirySlack is how long after the TTL a dead holder's lock may pass to
// a waiter: the target the expiry benchmark checks.
const expirySlack = time.Second

type expiryOptions struct {
	ttl    time.Duration
	trials int
}

func defaultExpiryOptions() expiryOptions { return expiryOptions{ttl: 2 * time.Second, trials: 5} }

func (o *expiryOptions) register(f *pflag.FlagSet, prefix string) {
	f.DurationVar(&o.ttl, prefix+"ttl", o.ttl, "session TTL of the holder that dies")
	f.IntVar(&o.trials, prefix+"trials", o.trials, "holders that die, one after the other")
}

func (o *expiryOptions) validate(prefix string) error {
	if o.ttl <= 0 {
		return fmt.Errorf("--%sttl must be positive, got %v", prefix, o.ttl)
	}
	if o.trials < 1 {
		return fmt.Errorf("--%strials must be at least 1, got %d", prefix, o.trials)
	}
	return nil
}

func newExpiryCmd(c *common) *cobra.Command {
	o := defaultExpiryOptions()
	cmd := &cobra.Command{
		Use:   "expiry",
		Short: "Lock hand-over after the holder dies: its last keep-alive → a waiting client holds the lock",
		Args:  cobra.NoArgs,
	}
	o.register(cmd.Flags(), "")
	c.benchCommand(cmd, func() error { return o.validate("") }, o.run, expiryChart)
	return cmd
}

func (o *expiryOptions) run(ctx context.Context, c *common, cl *cluster) ([]bench.Result, error) {
	raw, err := cl.raw()
	if err != nil {
		return nil, err
	}
	defer raw.close()
	ns, err := raw.nameserver(cl.addr)
	if err != nil {
		return nil, err
	}
	waiter, err := sdk.Dial(ctx, cl.addr, sdk.WithHolder("bfsbench-expiry-waiter"), cl.creds())
	if err != nil {
		return nil, err
	}
	defer waiter.Close()
	root := c.root() + "/expiry"
	var handovers, over []time.Duration
	var ttl time.Duration
	for t := 1; t <= o.trials; t++ {
		dir := fmt.Sprintf("%s/t%d", root, t)
		if err := waiter.MkdirAll(ctx, dir, 0o755); err != nil {
			return nil, err
		}
		d, granted, err := o.trial(ctx, ns, waiter, dir)
		if err != nil {
			return nil, fmt.Errorf("expiry trial %d: %w", t, err)
		}
		ttl = granted
		c.progressf("expiry trial %d: TTL %v, lock passed %v after the holder's last keep-alive", t, granted, d.Round(time.Millisecond))
		handovers = append(handovers, d)
		over = append(over, d-granted)
	}
	worst := slices.Max(handovers)
	verdict := fmt.Sprintf("met: the slowest hand-over took %v ≤ %v + %v", worst.Round(time.Millisecond), ttl, expirySlack)
	if worst > ttl+expirySlack {
		verdict = fmt.Sprintf("MISSED: the slowest hand-over took %v > %v + %v", worst.Round(time.Millisecond), ttl, expirySlack)
	}
	r1 := bench.Summarize("expiry hand-over", 1, handovers, 0)
	r1.Param = "ttl=" + ttl.String()
	r1.Note = "a holder (raw RPCs: OpenSession, LockDir, one last KeepAlive, then silence, as a crashed process) → a second client blocked in LockDir(WaitForLock) holds the lock; timed from just before the last KeepAlive was sent (so it errs long by up to that RPC's trip)"
	r2 := bench.Summarize("expiry overshoot", 1, over, 0)
	r2.Param = r1.Param
	r2.Note = "hand-over time minus the TTL the nameserver granted; target ≤ " + expirySlack.String() + ": " + verdict
	return []bench.Result{r1, r2}, nil
}

// trial opens a session that is never kept alive after its lock, and times
// how long after its last keep-alive a waiting client is granted the lock.
func (o *expiryOptions) trial(ctx context.Context, ns bfspb.NameServerClient, waiter *sdk.Client, dir string) (time.Duration, time.Duration, error) {
	open, err := ns.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: "bfsbench-expiry-dead-holder", TtlMs: o.ttl.Milliseconds()})
	if err != nil {
		return 0, 0, err
	}
	if open.Status != bfspb.StatusCode_OK {
		return 0, 0, fmt.Errorf("open session with TTL %v: %v %s", o.ttl, open.Status, open.Message)
	}
	sid, ttl := open.SessionId, time.Duration(open.TtlMs)*time.Millisecond
	lock, err := ns.LockDir(ctx, &bfspb.LockDirRequest{Path: dir, SessionId: sid})
	if err != nil {
		return 0, 0, err
	}
	if lock.Status != bfspb.StatusCode_OK {
		return 0, 0, fmt.Errorf("lock %s: %v %s", dir, lock.Status, lock.Message)
	}
	last := time.Now()
	ka, err := ns.KeepAlive(ctx, &bfspb.KeepAliveRequest{SessionId: sid})
	if err != nil {
		return 0, 0, err
	}
	if ka.Status != bfspb.StatusCode_OK {
		return 0, 0, fmt.Errorf("keep-alive: %v %s", ka.Status, ka.Message)
	}
	if ka.TtlMs > 0 {
		ttl = time.Duration(ka.TtlMs) * time.Millisecond
	}
	// The holder is now dead. The waiter blocks until the nameserver
	// expires it and releases the lock.
	wctx, cancel := context.WithTimeout(ctx, ttl+30*time.Second)
	defer cancel()
	l, err := waiter.LockDir(wctx, dir, sdk.WaitForLock())
	got := time.Since(last)
	if err != nil {
		return 0, 0, fmt.Errorf("waiting for the lock of a dead holder: %w", err)
	}
	defer l.Unlock(context.WithoutCancel(ctx))
	if l.Epoch() <= lock.GetLock().GetEpoch() {
		return 0, 0, fmt.Errorf("lock %s: the waiter got epoch %d, not above the dead holder's %d", dir, l.Epoch(), lock.GetLock().GetEpoch())
	}
	return got, ttl, nil
}
