package benchcmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/sdk"
)

func newLocksCmd(c *common) *cobra.Command {
	return &cobra.Command{
		Use:   "locks",
		Short: "Lock+unlock cycles, each client on its own directory with its own session, for each --clients value",
		Args:  cobra.NoArgs,
		RunE:  c.command(noValidation, runLocks),
	}
}

const locksNote = "one op = SDK LockDir + Lock.Unlock of an empty directory (two durable nameserver commits, plus the lock handle's WatchDirLocks stream and GetDirLock check); each client its own directory, connection and session"

// runLocks measures lock+unlock cycles with each client count.
func runLocks(ctx context.Context, c *common, cl *cluster) ([]bench.Result, error) {
	var results []bench.Result
	for _, n := range c.clients {
		clients, err := dialN(ctx, cl.addr, n)
		if err != nil {
			return nil, err
		}
		r, err := locksRound(ctx, c, clients, fmt.Sprintf("%s/locks/%d", c.root(), n))
		closeAll(clients)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	return results, nil
}

func locksRound(ctx context.Context, c *common, clients []*sdk.Client, root string) (bench.Result, error) {
	dirs := make([]string, len(clients))
	for i, cl := range clients {
		dirs[i] = fmt.Sprintf("%s/c%d", root, i)
		if err := cl.MkdirAll(ctx, dirs[i], 0o755); err != nil {
			return bench.Result{}, err
		}
	}
	r, err := c.closedLoop(ctx, "lock+unlock", len(clients), func(ctx context.Context, ci, _ int) error {
		l, err := clients[ci].LockDir(ctx, dirs[ci])
		if err != nil {
			return err
		}
		return l.Unlock(ctx)
	})
	r.Note = locksNote
	return r, err
}
