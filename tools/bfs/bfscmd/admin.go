package bfscmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/sdk"
)

func (e *env) adminCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Operate the cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("no admin command given")
		},
	}
	cmd.AddCommand(e.safemodeCommand(), e.reportCommand(), e.decommissionCommand(), e.fsckCommand())
	return cmd
}

func (e *env) safemodeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "safemode get|leave",
		Short: "Show or leave the nameserver's safe mode (no replica is deleted while it is on)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("safemode: say get or leave")
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "get",
		Short: "Show whether the nameserver is in safe mode, and the reported share of its blocks",
		Args:  cobra.NoArgs,
		RunE: e.withAdmin(func(ctx context.Context, c *sdk.Client, _ []string) error {
			sm, err := c.SafeMode(ctx)
			if err != nil {
				return err
			}
			e.printSafeMode(sm)
			return nil
		}),
	}, &cobra.Command{
		Use:   "leave",
		Short: "Leave safe mode now, whatever share of the blocks is reported",
		Args:  cobra.NoArgs,
		RunE: e.withAdmin(func(ctx context.Context, c *sdk.Client, _ []string) error {
			if err := c.LeaveSafeMode(ctx); err != nil {
				return err
			}
			sm, err := c.SafeMode(ctx)
			if err != nil {
				return err
			}
			e.printSafeMode(sm)
			return nil
		}),
	})
	return cmd
}

func (e *env) printSafeMode(sm sdk.SafeMode) {
	state := "OFF"
	switch {
	case sm.On:
		state = "ON"
	case sm.LeftByOperator:
		state = "OFF (left by an operator)"
	}
	share := 100.0
	if sm.Known > 0 {
		share = 100 * float64(sm.Reported) / float64(sm.Known)
	}
	fmt.Fprintf(e.stdout, "safe mode %s: %d of %d known blocks reported (%.2f%%, threshold %.2f%%), %d chunkservers (%d wanted)\n",
		state, sm.Reported, sm.Known, share, 100*sm.Threshold, sm.ReportedChunkservers, sm.MinChunkservers)
}
