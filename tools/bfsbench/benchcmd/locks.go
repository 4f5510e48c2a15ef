package benchcmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/sdk"
)

type locksOptions struct{ vsEtcd bool }

func (o *locksOptions) register(f *pflag.FlagSet) {
	f.BoolVar(&o.vsEtcd, "vs-etcd", false, "also run the locks workload against an embedded one-member etcd (concurrency.Mutex), alternating with bfs, and report the ratio")
}

func newLocksCmd(c *common) *cobra.Command {
	o := &locksOptions{}
	cmd := &cobra.Command{
		Use:   "locks",
		Short: "Lock+unlock cycles, each client on its own directory with its own session, for each --clients value (--vs-etcd: beside etcd)",
		Args:  cobra.NoArgs,
	}
	o.register(cmd.Flags())
	c.benchCommand(cmd, noValidation, o.run, locksChart)
	return cmd
}

const locksNote = "one op = SDK LockDir + Lock.Unlock of an empty directory (two durable nameserver commits, plus the unlock event its session's WatchDirLocks stream delivers to the handle); each client its own directory, connection and session"

// run measures lock+unlock cycles with each client count, and the same
// against etcd when asked.
func (o *locksOptions) run(ctx context.Context, c *common, cl *cluster) ([]bench.Result, error) {
	var etcd *etcdServer
	if o.vsEtcd {
		dir, remove, err := etcdDir(cl)
		if err != nil {
			return nil, err
		}
		defer remove()
		c.progressf("starting an embedded etcd in %s...", dir)
		if etcd, err = startEtcd(ctx, dir, c.stderr); err != nil {
			return nil, err
		}
		defer etcd.close()
		c.progressf("etcd serves on %s", etcd.endpoint)
	}
	var results []bench.Result
	for _, n := range c.clients {
		rs, err := locksRound(ctx, c, cl, etcd, n)
		if err != nil {
			return nil, err
		}
		results = append(results, rs...)
	}
	return results, nil
}

// locksRound measures n clients: bfs alone for --duration, or with etcd
// bfs and etcd alternating in halves of --duration (bfs, etcd, bfs, etcd),
// so that drift in either store as the run goes on favors neither.
func locksRound(ctx context.Context, c *common, cl *cluster, etcd *etcdServer, n int) ([]bench.Result, error) {
	clients, err := dialN(ctx, cl.addr, n, cl.creds())
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	root := fmt.Sprintf("%s/locks/%d", c.root(), n)
	if etcd == nil {
		op, err := bfsLockCycle(ctx, clients, root)
		if err != nil {
			return nil, err
		}
		r, err := c.closedLoop(ctx, "lock+unlock", n, op)
		r.Note = locksNote
		return []bench.Result{r}, err
	}
	lockers, err := newEtcdLockers(ctx, etcd.endpoint, n)
	if err != nil {
		return nil, err
	}
	defer lockers.close()
	var bs, es []bench.Result
	for half := range 2 {
		// Fresh directories and keys per half: a cycle the end of a half
		// cut short may leave its lock held.
		op, err := bfsLockCycle(ctx, clients, fmt.Sprintf("%s/h%d", root, half))
		if err != nil {
			return nil, err
		}
		b, err := c.closedLoopFor(ctx, "lock+unlock", n, c.duration/2, op)
		if err != nil {
			return nil, err
		}
		e, err := c.closedLoopFor(ctx, "lock+unlock (etcd)", n, c.duration/2, lockers.op(fmt.Sprintf("%s/h%d", root, half)))
		if err != nil {
			return nil, err
		}
		bs, es = append(bs, b), append(es, e)
	}
	b, e := bench.Merge(bs...), bench.Merge(es...)
	b.Note, e.Note = locksNote, etcdLocksNote(cl.local())
	return []bench.Result{b, e, etcdRatio(b, e)}, nil
}

// bfsLockCycle makes a directory per client under root and returns the op
// locking and unlocking client ci's.
func bfsLockCycle(ctx context.Context, clients []*sdk.Client, root string) (bench.Op, error) {
	dirs := make([]string, len(clients))
	for i, cl := range clients {
		dirs[i] = fmt.Sprintf("%s/c%d", root, i)
		if err := cl.MkdirAll(ctx, dirs[i], 0o755); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context, ci, _ int) error {
		l, err := clients[ci].LockDir(ctx, dirs[ci])
		if err != nil {
			return err
		}
		return l.Unlock(ctx)
	}, nil
}
