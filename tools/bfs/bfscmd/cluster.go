package bfscmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/printable"
	"github.com/bfs-go/bfs/sdk"
)

// outputFormat is the -o flag of the commands that can print JSON.
type outputFormat string

const (
	outputTable outputFormat = "table"
	outputJSON  outputFormat = "json"
)

func (o *outputFormat) String() string { return string(*o) }
func (o *outputFormat) Type() string   { return "format" }

func (o *outputFormat) Set(s string) error {
	switch outputFormat(s) {
	case outputTable, outputJSON:
		*o = outputFormat(s)
		return nil
	}
	return fmt.Errorf("want table or json")
}

func outputFlag(cmd *cobra.Command) *outputFormat {
	o := outputTable
	cmd.Flags().VarP(&o, "output", "o", "output format: table or json")
	return &o
}

// writeJSON prints one JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (e *env) decommissionCommand() *cobra.Command {
	var cancel bool
	cmd := &cobra.Command{
		Use:   "decommission [--cancel] ADDR...",
		Short: "Drain chunkservers: no new blocks, their replicas are copied away; 'report' says when they are safe to remove",
		Args:  cobra.MinimumNArgs(1),
		RunE: e.withAdmin(func(ctx context.Context, c *sdk.Client, args []string) error {
			op := c.Decommission
			if cancel {
				op = c.CancelDecommission
			}
			servers, err := op(ctx, args...)
			if err != nil {
				return err
			}
			for _, s := range servers {
				fmt.Fprintf(e.stdout, "%s: %s\n", printable.String(s.Address), drainText(s))
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&cancel, "cancel", false, "end the decommission: the chunkservers take new blocks and count again")
	return cmd
}

// drainText says where a chunkserver stands in its decommission.
func drainText(s sdk.Chunkserver) string {
	switch {
	case s.State == sdk.ChunkserverDecommissioned:
		return "decommissioned: safe to remove"
	case s.State == sdk.ChunkserverDraining:
		return fmt.Sprintf("draining: %d blocks still to copy elsewhere", s.BlocksToMove)
	case s.State == sdk.ChunkserverDead && s.Draining:
		return "dead, draining"
	}
	return s.State.String()
}
