package bfscmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/printable"
	"github.com/bfs-go/bfs/sdk"
)

func (e *env) fsckCommand() *cobra.Command {
	var listCorrupt bool
	cmd := &cobra.Command{
		Use: "fsck [PATH] [--list-corrupt] [-o json]",
		Short: "List the files under PATH (default /) with blocks under-replicated, over-replicated, missing or with corrupt or stale replicas; " +
			"exit 1 if a block has no good replica",
		Args: cobra.MaximumNArgs(1),
	}
	out := outputFlag(cmd)
	cmd.Flags().BoolVar(&listCorrupt, "list-corrupt", false,
		"list only the blocks with no good replica (MISSING) or a corrupt one (CORRUPT), a line each: block, state, path")
	cmd.RunE = e.withAdmin(func(ctx context.Context, c *sdk.Client, args []string) error {
		path := "/"
		if len(args) == 1 {
			path = args[0]
		}
		var files []sdk.FsckFile
		totals, err := c.Fsck(ctx, path, func(f sdk.FsckFile) error {
			switch {
			case *out == outputJSON:
				files = append(files, f)
			case listCorrupt:
				printCorrupt(e.stdout, f)
			default:
				printFsckFile(e.stdout, f)
			}
			return nil
		})
		if err != nil {
			return err
		}
		switch {
		case *out == outputJSON:
			if err := writeJSON(e.stdout, fsckJSON(files, totals, listCorrupt)); err != nil {
				return err
			}
		case listCorrupt:
			fmt.Fprintf(e.stdout, "%d blocks with no good replica, %d with a corrupt replica under %s\n",
				totals.MissingBlocks, totals.CorruptBlocks, printable.String(path))
		default:
			printFsckTotals(e.stdout, path, totals)
		}
		if totals.SafeMode {
			fmt.Fprintln(e.stderr, "bfs: fsck: the nameserver is in safe mode: replicas not reported yet may exist (bfs admin safemode get)")
		}
		if !totals.Healthy() {
			fmt.Fprintf(e.stderr, "bfs: fsck %s: %d blocks have no good replica\n", printable.String(path), totals.MissingBlocks)
			return errReported
		}
		return nil
	})
	return cmd
}

// printCorrupt prints a line per block of f that no one can read, or
// that has a corrupt replica.
func printCorrupt(w io.Writer, f sdk.FsckFile) {
	for _, b := range f.Blocks {
		switch {
		case b.Missing:
			fmt.Fprintf(w, "%d\tMISSING\t%s\n", b.ID, printable.String(f.Path))
		case len(b.Corrupt) > 0:
			fmt.Fprintf(w, "%d\tCORRUPT\t%s\n", b.ID, printable.String(f.Path))
		}
	}
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
			what = append(what, "MISSING (no good replica)")
		case b.UnderReplicated:
			what = append(what, fmt.Sprintf("UNDER-REPLICATED (%d of %d)", len(b.Replicas), f.Replication))
		case b.OverReplicated:
			what = append(what, fmt.Sprintf("OVER-REPLICATED (%d of %d)", len(b.Replicas), f.Replication))
		}
		if len(b.Corrupt) > 0 {
			what = append(what, "CORRUPT replica on "+joinAddrs(b.Corrupt))
		}
		if len(b.Stale) > 0 {
			what = append(what, "STALE replica (not sealed at the block's length) on "+joinAddrs(b.Stale))
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
	fmt.Fprintf(tw, " Over-replicated blocks:\t%d\n", t.OverReplicatedBlocks)
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
	Stale           []string `json:"stale"`
	UnderReplicated bool     `json:"under_replicated"`
	OverReplicated  bool     `json:"over_replicated"`
	Missing         bool     `json:"missing"`
}

type fsckFileJSON struct {
	Path        string          `json:"path"`
	Replication int             `json:"replication"`
	Size        int64           `json:"size"`
	Open        bool            `json:"open"`
	Blocks      []fsckBlockJSON `json:"blocks"`
}

// fsckJSON is the -o json document; with listCorrupt, only the blocks
// that are missing or have a corrupt replica.
func fsckJSON(files []sdk.FsckFile, t sdk.FsckTotals, listCorrupt bool) any {
	out := make([]fsckFileJSON, 0, len(files))
	for _, f := range files {
		fj := fsckFileJSON{Path: f.Path, Replication: f.Replication, Size: f.Size, Open: f.Open}
		for _, b := range f.Blocks {
			if listCorrupt && !b.Missing && len(b.Corrupt) == 0 {
				continue
			}
			fj.Blocks = append(fj.Blocks, fsckBlockJSON{ID: b.ID, Size: b.Size, Replicas: nonNil(b.Replicas),
				Corrupt: nonNil(b.Corrupt), Draining: nonNil(b.Draining), Stale: nonNil(b.Stale),
				UnderReplicated: b.UnderReplicated, OverReplicated: b.OverReplicated, Missing: b.Missing})
		}
		if len(fj.Blocks) > 0 {
			out = append(out, fj)
		}
	}
	type totalsJSON struct {
		Files                 int64 `json:"files"`
		Dirs                  int64 `json:"dirs"`
		Bytes                 int64 `json:"bytes"`
		Blocks                int64 `json:"blocks"`
		UnderReplicatedBlocks int64 `json:"under_replicated_blocks"`
		MissingBlocks         int64 `json:"missing_blocks"`
		CorruptBlocks         int64 `json:"corrupt_blocks"`
		OverReplicatedBlocks  int64 `json:"over_replicated_blocks"`
		OpenFiles             int64 `json:"open_files"`
		SafeMode              bool  `json:"safe_mode"`
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
