package bfscmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

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

func (e *env) reportCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report [-o json]",
		Short: "List the chunkservers: state, capacity, used, free, blocks, last heartbeat",
		Args:  cobra.NoArgs,
	}
	out := outputFlag(cmd)
	cmd.RunE = e.withAdmin(func(ctx context.Context, c *sdk.Client, _ []string) error {
		servers, err := c.Chunkservers(ctx)
		if err != nil {
			return err
		}
		if *out == outputJSON {
			return writeJSON(e.stdout, reportJSON(servers))
		}
		return e.printReport(servers)
	})
	return cmd
}

type chunkserverJSON struct {
	Address          string `json:"address"`
	Host             string `json:"host"`
	State            string `json:"state"`
	Draining         bool   `json:"draining"`
	CapacityBytes    int64  `json:"capacity_bytes"`
	UsedBytes        int64  `json:"used_bytes"`
	FreeBytes        int64  `json:"free_bytes"`
	Blocks           int64  `json:"blocks"`
	BlocksToMove     int64  `json:"blocks_to_move"`
	LastHeartbeatAge int64  `json:"last_heartbeat_age_ms"`
}

func reportJSON(servers []sdk.Chunkserver) any {
	out := make([]chunkserverJSON, 0, len(servers))
	for _, s := range servers {
		out = append(out, chunkserverJSON{Address: s.Address, Host: s.Host, State: s.State.String(), Draining: s.Draining,
			CapacityBytes: s.Capacity, UsedBytes: s.Used, FreeBytes: s.Free, Blocks: s.Blocks,
			BlocksToMove: s.BlocksToMove, LastHeartbeatAge: s.SinceHeartbeat.Milliseconds()})
	}
	return struct {
		Chunkservers []chunkserverJSON `json:"chunkservers"`
	}{out}
}

// printReport prints a summary of the cluster, then a line per
// chunkserver, like hdfs dfsadmin -report.
func (e *env) printReport(servers []sdk.Chunkserver) error {
	counts := map[sdk.ChunkserverState]int{}
	var capacity, used, free int64
	for _, s := range servers {
		counts[s.State]++
		if s.State != sdk.ChunkserverDead {
			capacity, used, free = capacity+s.Capacity, used+s.Used, free+s.Free
		}
	}
	fmt.Fprintf(e.stdout, "Chunkservers: %d live, %d draining, %d decommissioned, %d dead\n",
		counts[sdk.ChunkserverLive], counts[sdk.ChunkserverDraining], counts[sdk.ChunkserverDecommissioned], counts[sdk.ChunkserverDead])
	fmt.Fprintf(e.stdout, "Capacity: %s, used %s, free %s (%s used)\n\n", human(capacity), human(used), human(free), percent(used, capacity))
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ADDRESS\tHOST\tSTATE\tCAPACITY\tUSED\tFREE\tUSED%\tBLOCKS\tTO MOVE\tLAST HEARTBEAT")
	for _, s := range servers {
		toMove := "-"
		if s.State == sdk.ChunkserverDraining || s.State == sdk.ChunkserverDecommissioned {
			toMove = fmt.Sprint(s.BlocksToMove)
		}
		state := s.State.String()
		if s.State == sdk.ChunkserverDead && s.Draining {
			state = "dead (draining)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s ago\n", printable.String(s.Address), printable.String(s.Host),
			state, human(s.Capacity), human(s.Used), human(s.Free), percent(s.Used, s.Capacity), s.Blocks, toMove,
			s.SinceHeartbeat.Round(100*time.Millisecond))
	}
	return tw.Flush()
}

func percent(part, whole int64) string {
	if whole <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

func (e *env) fsckCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fsck [PATH] [-o json]",
		Short: "List the files under PATH (default /) with blocks under-replicated, missing or corrupt; exit 1 if a block has no live replica",
		Args:  cobra.MaximumNArgs(1),
	}
	out := outputFlag(cmd)
	cmd.RunE = e.withAdmin(func(ctx context.Context, c *sdk.Client, args []string) error {
		path := "/"
		if len(args) == 1 {
			path = args[0]
		}
		var files []sdk.FsckFile
		totals, err := c.Fsck(ctx, path, func(f sdk.FsckFile) error {
			if *out == outputJSON {
				files = append(files, f)
				return nil
			}
			printFsckFile(e.stdout, f)
			return nil
		})
		if err != nil {
			return err
		}
		if *out == outputJSON {
			if err := writeJSON(e.stdout, fsckJSON(files, totals)); err != nil {
				return err
			}
		} else {
			printFsckTotals(e.stdout, path, totals)
		}
		if !totals.Healthy() {
			fmt.Fprintf(e.stderr, "bfs: fsck %s: %d blocks have no live replica\n", printable.String(path), totals.MissingBlocks)
			return errReported
		}
		return nil
	})
	return cmd
}

func printFsckFile(w io.Writer, f sdk.FsckFile) {
	open := ""
	if f.Open {
		open = ", open for write"
	}
	fmt.Fprintf(w, "%s: %d bytes, replication %d%s\n", printable.String(f.Path), f.Size, f.Replication, open)
	for _, b := range f.Blocks {
		var what []string
		switch {
		case b.Missing:
			what = append(what, "MISSING (no live replica)")
		case b.UnderReplicated:
			what = append(what, fmt.Sprintf("UNDER-REPLICATED (%d of %d)", len(b.Replicas), f.Replication))
		}
		if len(b.Corrupt) > 0 {
			what = append(what, "CORRUPT replica on "+joinAddrs(b.Corrupt))
		}
		line := fmt.Sprintf("  block %d (%d bytes): %s", b.ID, b.Size, strings.Join(what, ", "))
		if len(b.Replicas) > 0 {
			line += "; replicas " + joinAddrs(b.Replicas)
		}
		if len(b.Draining) > 0 {
			line += "; draining " + joinAddrs(b.Draining)
		}
		fmt.Fprintln(w, line)
	}
}

func joinAddrs(addrs []string) string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = printable.String(a)
	}
	return strings.Join(out, " ")
}

func printFsckTotals(w io.Writer, path string, t sdk.FsckTotals) {
	status := "HEALTHY"
	if !t.Healthy() {
		status = "CORRUPT"
	}
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	fmt.Fprintf(tw, "Status:\t%s\n", status)
	fmt.Fprintf(tw, " Total size:\t%d B\n", t.Bytes)
	fmt.Fprintf(tw, " Directories:\t%d\n", t.Dirs)
	fmt.Fprintf(tw, " Files:\t%d (%d open for write)\n", t.Files, t.OpenFiles)
	fmt.Fprintf(tw, " Blocks:\t%d\n", t.Blocks)
	fmt.Fprintf(tw, " Under-replicated blocks:\t%d\n", t.UnderReplicatedBlocks)
	fmt.Fprintf(tw, " Missing blocks:\t%d\n", t.MissingBlocks)
	fmt.Fprintf(tw, " Corrupt blocks:\t%d\n", t.CorruptBlocks)
	tw.Flush()
	fmt.Fprintf(w, "The file system under %s is %s\n", printable.String(path), status)
}

type fsckBlockJSON struct {
	ID              int64    `json:"block_id"`
	Size            int64    `json:"size"`
	Replicas        []string `json:"replicas"`
	Corrupt         []string `json:"corrupt"`
	Draining        []string `json:"draining"`
	UnderReplicated bool     `json:"under_replicated"`
	Missing         bool     `json:"missing"`
}

type fsckFileJSON struct {
	Path        string          `json:"path"`
	Replication int             `json:"replication"`
	Size        int64           `json:"size"`
	Open        bool            `json:"open"`
	Blocks      []fsckBlockJSON `json:"blocks"`
}

func fsckJSON(files []sdk.FsckFile, t sdk.FsckTotals) any {
	out := make([]fsckFileJSON, 0, len(files))
	for _, f := range files {
		fj := fsckFileJSON{Path: f.Path, Replication: f.Replication, Size: f.Size, Open: f.Open}
		for _, b := range f.Blocks {
			fj.Blocks = append(fj.Blocks, fsckBlockJSON{ID: b.ID, Size: b.Size, Replicas: nonNil(b.Replicas),
				Corrupt: nonNil(b.Corrupt), Draining: nonNil(b.Draining), UnderReplicated: b.UnderReplicated, Missing: b.Missing})
		}
		out = append(out, fj)
	}
	type totalsJSON struct {
		Files                 int64 `json:"files"`
		Dirs                  int64 `json:"dirs"`
		Bytes                 int64 `json:"bytes"`
		Blocks                int64 `json:"blocks"`
		UnderReplicatedBlocks int64 `json:"under_replicated_blocks"`
		MissingBlocks         int64 `json:"missing_blocks"`
		CorruptBlocks         int64 `json:"corrupt_blocks"`
		OpenFiles             int64 `json:"open_files"`
	}
	return struct {
		Healthy bool           `json:"healthy"`
		Files   []fsckFileJSON `json:"files"`
		Totals  totalsJSON     `json:"totals"`
	}{t.Healthy(), out, totalsJSON(t)}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
