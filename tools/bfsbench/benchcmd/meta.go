package benchcmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/sdk"
)

func newMetaCmd(c *common) *cobra.Command {
	return &cobra.Command{
		Use:   "meta",
		Short: "Namespace operations: create+delete and stat, for each --clients value",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.validate(); err != nil {
				return err
			}
			addr, stop, err := c.target()
			if err != nil {
				return err
			}
			defer stop()
			results, err := runMeta(cmd.Context(), c, addr)
			if err != nil {
				return err
			}
			return c.report(results)
		},
	}
}

// runMeta measures, for each client count: creates of new files (in a
// directory per client), create+delete pairs (one op is a create and a
// delete of the same file) and stat of an existing file. Every client has its own connection and
// session.
func runMeta(ctx context.Context, c *common, addr string) ([]bench.Result, error) {
	var results []bench.Result
	for _, n := range c.clients {
		clients, err := dialN(ctx, addr, n)
		if err != nil {
			return nil, err
		}
		root := fmt.Sprintf("/bfsbench/meta-%d", n)
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
		if err := cl.Touch(ctx, fmt.Sprintf("%s/c%d/stat-me", root, i), sdk.Overwrite()); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(c.stderr, "create with %d clients for %v...\n", len(clients), c.duration)
	cr, err := bench.Run(ctx, "create", len(clients), c.duration, 0, func(ctx context.Context, ci, i int) error {
		return clients[ci].Touch(ctx, fmt.Sprintf("%s/c%d/new%d", root, ci, i))
	})
	if err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	fmt.Fprintf(c.stderr, "create+delete with %d clients for %v...\n", len(clients), c.duration)
	cd, err := bench.Run(ctx, "create+delete", len(clients), c.duration, 0, func(ctx context.Context, ci, i int) error {
		p := fmt.Sprintf("%s/c%d/f%d", root, ci, i)
		if err := clients[ci].Touch(ctx, p); err != nil {
			return err
		}
		return clients[ci].Remove(ctx, p)
	})
	if err != nil {
		return nil, fmt.Errorf("create+delete: %w", err)
	}
	fmt.Fprintf(c.stderr, "stat with %d clients for %v...\n", len(clients), c.duration)
	st, err := bench.Run(ctx, "stat", len(clients), c.duration, 0, func(ctx context.Context, ci, _ int) error {
		_, err := clients[ci].Stat(ctx, fmt.Sprintf("%s/c%d/stat-me", root, ci))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	return []bench.Result{cr, cd, st}, nil
}

func dialN(ctx context.Context, addr string, n int) ([]*sdk.Client, error) {
	out := make([]*sdk.Client, 0, n)
	for range n {
		cl, err := sdk.Dial(ctx, addr)
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
