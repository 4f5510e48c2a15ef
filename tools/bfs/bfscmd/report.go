package bfscmd

import (
	"context"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/printable"
	"github.com/bfs-go/bfs/sdk"
)

func (e *env) reportCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report [-o json]",
		Short: "List the chunkservers and their volumes: state, capacity, used, non-DFS used, free, blocks, last heartbeat and block report; and the cluster's block health",
		Args:  cobra.NoArgs,
	}
	out := outputFlag(cmd)
	cmd.RunE = e.withAdmin(func(ctx context.Context, c *sdk.Client, _ []string) error {
		servers, err := c.Chunkservers(ctx)
		if err != nil {
			return err
		}
		health, err := c.BlockHealth(ctx)
		if err != nil {
			return err
		}
		if *out == outputJSON {
			return writeJSON(e.stdout, reportJSON(servers, health))
		}
		return e.printReport(servers, health)
	})
	return cmd
}

type volumeJSON struct {
	Index         int    `json:"index"`
	Dir           string `json:"dir"`
	State         string `json:"state"`
	Reason        string `json:"reason,omitempty"`
	CapacityBytes int64  `json:"capacity_bytes"`
	UsedBytes     int64  `json:"used_bytes"`
	NonDFSUsed    int64  `json:"non_dfs_used_bytes"`
	FreeBytes     int64  `json:"free_bytes"`
	Blocks        int64  `json:"blocks"`
	StateAgeMs    int64  `json:"state_age_ms"`
}

type chunkserverJSON struct {
	Address          string       `json:"address"`
	Host             string       `json:"host"`
	State            string       `json:"state"`
	Draining         bool         `json:"draining"`
	CapacityBytes    int64        `json:"capacity_bytes"`
	UsedBytes        int64        `json:"used_bytes"`
	NonDFSUsed       int64        `json:"non_dfs_used_bytes"`
	FreeBytes        int64        `json:"free_bytes"`
	Blocks           int64        `json:"blocks"`
	BlocksToMove     int64        `json:"blocks_to_move"`
	LastHeartbeatAge int64        `json:"last_heartbeat_age_ms"`
	LastReportAge    int64        `json:"last_report_age_ms"`
	FailedVolumes    int64        `json:"failed_volumes"`
	Volumes          []volumeJSON `json:"volumes"`
}

type healthJSON struct {
	UnderReplicated int64 `json:"under_replicated_blocks"`
	Missing         int64 `json:"missing_blocks"`
	CorruptReplicas int64 `json:"corrupt_replicas"`
	RepairQueue     int64 `json:"repair_queue"`
	RepairInFlight  int64 `json:"repair_copies_in_flight"`
}

func reportJSON(servers []sdk.Chunkserver, h sdk.BlockHealth) any {
	out := make([]chunkserverJSON, 0, len(servers))
	for _, s := range servers {
		cs := chunkserverJSON{Address: s.Address, Host: s.Host, State: s.State.String(), Draining: s.Draining,
			CapacityBytes: s.Capacity, UsedBytes: s.Used, NonDFSUsed: s.NonDFSUsed, FreeBytes: s.Free, Blocks: s.Blocks,
			BlocksToMove: s.BlocksToMove, LastHeartbeatAge: s.SinceHeartbeat.Milliseconds(), LastReportAge: -1,
			FailedVolumes: s.FailedVolumes, Volumes: []volumeJSON{}}
		if s.SinceReport >= 0 {
			cs.LastReportAge = s.SinceReport.Milliseconds()
		}
		for _, v := range s.Volumes {
			cs.Volumes = append(cs.Volumes, volumeJSON{Index: v.Index, Dir: v.Dir, State: v.State.String(), Reason: v.Reason,
				CapacityBytes: v.Capacity, UsedBytes: v.Used, NonDFSUsed: v.NonDFSUsed(), FreeBytes: v.Free, Blocks: v.Blocks,
				StateAgeMs: v.SinceChange.Milliseconds()})
		}
		out = append(out, cs)
	}
	return struct {
		Chunkservers []chunkserverJSON `json:"chunkservers"`
		Health       healthJSON        `json:"health"`
	}{out, healthJSON(h)}
}

// printReport prints a summary of the cluster, a line per chunkserver,
// like hdfs dfsadmin -report, then a line per volume.
func (e *env) printReport(servers []sdk.Chunkserver, h sdk.BlockHealth) error {
	counts := map[sdk.ChunkserverState]int{}
	vols := map[sdk.VolumeState]int{}
	var capacity, used, nonDFS, free int64
	for _, s := range servers {
		counts[s.State]++
		if s.State != sdk.ChunkserverDead {
			capacity, used, nonDFS, free = satAdd(capacity, s.Capacity), satAdd(used, s.Used), satAdd(nonDFS, s.NonDFSUsed), satAdd(free, s.Free)
			for _, v := range s.Volumes {
				vols[v.State]++
			}
		}
	}
	fmt.Fprintf(e.stdout, "Chunkservers: %d live, %d draining, %d decommissioned, %d dead\n",
		counts[sdk.ChunkserverLive], counts[sdk.ChunkserverDraining], counts[sdk.ChunkserverDecommissioned], counts[sdk.ChunkserverDead])
	fmt.Fprintf(e.stdout, "Volumes of live chunkservers: %d healthy, %d full, %d failed\n", vols[sdk.VolumeHealthy], vols[sdk.VolumeFull], vols[sdk.VolumeFailed])
	fmt.Fprintf(e.stdout, "Capacity: %s, used %s, non-DFS used %s, free %s (%s used)\n",
		human(capacity), human(used), human(nonDFS), human(free), percent(used, capacity))
	fmt.Fprintf(e.stdout, "Blocks: %d under-replicated, %d missing (no good replica), %d corrupt replicas; repair: %d queued, %d copies in flight\n\n",
		h.UnderReplicated, h.Missing, h.CorruptReplicas, h.RepairQueue, h.RepairInFlight)
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ADDRESS\tHOST\tSTATE\tCAPACITY\tUSED\tNON-DFS\tFREE\tUSED%\tBLOCKS\tVOLUMES\tTO MOVE\tLAST HEARTBEAT\tLAST REPORT")
	for _, s := range servers {
		toMove := "-"
		if s.State == sdk.ChunkserverDraining || s.State == sdk.ChunkserverDecommissioned {
			toMove = fmt.Sprint(s.BlocksToMove)
		}
		state := s.State.String()
		if s.State == sdk.ChunkserverDead && s.Draining {
			state = "dead (draining)"
		}
		volumes := fmt.Sprint(max(len(s.Volumes), 1))
		if s.FailedVolumes > 0 {
			volumes += fmt.Sprintf(" (%d failed)", s.FailedVolumes)
		}
		report := "-"
		if s.SinceReport >= 0 && s.State != sdk.ChunkserverDead {
			report = s.SinceReport.Round(100*time.Millisecond).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s ago\t%s\n", printable.String(s.Address), printable.String(s.Host),
			state, human(s.Capacity), human(s.Used), human(s.NonDFSUsed), human(s.Free), percent(s.Used, s.Capacity), s.Blocks, volumes, toMove,
			s.SinceHeartbeat.Round(100*time.Millisecond), report)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printVolumes(e.stdout, servers)
}

// printVolumes prints a line per volume of the chunkservers that report
// them.
func printVolumes(w io.Writer, servers []sdk.Chunkserver) error {
	some := false
	for _, s := range servers {
		some = some || len(s.Volumes) > 0
	}
	if !some {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CHUNKSERVER\tVOLUME\tSTATE\tCAPACITY\tUSED\tNON-DFS\tFREE\tBLOCKS\tSINCE\tREASON")
	for _, s := range servers {
		for _, v := range s.Volumes {
			reason := "-"
			if v.Reason != "" {
				reason = printable.String(v.Reason)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s ago\t%s\n", printable.String(s.Address), printable.String(v.Dir), v.State,
				human(v.Capacity), human(v.Used), human(v.NonDFSUsed()), human(v.Free), v.Blocks, v.SinceChange.Round(time.Second), reason)
		}
	}
	return tw.Flush()
}

func percent(part, whole int64) string {
	if whole <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

// satAdd adds two byte counts, saturating at int64's limits instead of
// wrapping around: a nameserver caps what a chunkserver claims, but the
// report does not count on it.
func satAdd(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}
