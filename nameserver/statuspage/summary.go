package statuspage

import (
	"context"
	"time"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// Summary is the cluster at a glance.
type Summary struct {
	Time      time.Time `json:"time"`
	ClusterID string    `json:"cluster_id"`
	// Leader is absent when the page is given no Leadership.
	Leader       *Leader          `json:"leader,omitempty"`
	SafeMode     SafeModeState    `json:"safe_mode"`
	Chunkservers ChunkserverCount `json:"chunkservers"`
	// Capacity and free space of the live chunkservers' disks, as they
	// last reported them.
	CapacityBytes int64       `json:"capacity_bytes"`
	FreeBytes     int64       `json:"free_bytes"`
	Blocks        BlockHealth `json:"blocks"`
	Repair        Repair      `json:"repair"`
	Locks         LockCount   `json:"locks"`
	Sessions      int64       `json:"sessions"`
	// Rates over the last sampling interval (absent until two samples).
	Rate *Rate `json:"rate,omitempty"`
}

// SafeModeState is the nameserver's safe mode.
type SafeModeState struct {
	On             bool    `json:"on"`
	KnownBlocks    int64   `json:"known_blocks"`
	ReportedBlocks int64   `json:"reported_blocks"`
	Threshold      float64 `json:"threshold"`
	LeftByOperator bool    `json:"left_by_operator"`
}

// ChunkserverCount counts chunkservers by state.
type ChunkserverCount struct {
	Live     int64 `json:"live"`
	Draining int64 `json:"draining"`
	Dead     int64 `json:"dead"`
}

// BlockHealth counts the blocks at risk.
type BlockHealth struct {
	UnderReplicated int64 `json:"under_replicated"`
	Missing         int64 `json:"missing"`
	CorruptReplicas int64 `json:"corrupt_replicas"`
}

// Repair is the re-replication's queue and copies.
type Repair struct {
	Queued   int64 `json:"queued"`
	InFlight int64 `json:"in_flight"`
}

// LockCount counts directory locks and cleanings.
type LockCount struct {
	Locked       int64 `json:"locked"`
	Cleaning     int64 `json:"cleaning"`
	Cleanings    int64 `json:"cleanings"`
	PendingFiles int64 `json:"pending_files"`
}

// summaryMetrics are the metrics the summary reads.
var summaryMetrics = []string{
	"bfs_nameserver_chunkservers", "bfs_nameserver_chunkserver_capacity_bytes", "bfs_nameserver_chunkserver_free_bytes",
	"bfs_nameserver_under_replicated_blocks", "bfs_nameserver_missing_blocks", "bfs_nameserver_corrupt_replicas",
	"bfs_nameserver_repair_queue_length", "bfs_nameserver_repair_copies_in_flight",
	"bfs_nameserver_dir_locks", "bfs_nameserver_lock_cleanings", "bfs_nameserver_lock_cleaning_pending_files",
	"bfs_nameserver_sessions",
}

// MetricNames are the metrics the page reads: the summary's and the
// charts'. A test holds the nameserver to exporting them all.
func MetricNames() []string { return append(append([]string(nil), summaryMetrics...), charted[:]...) }

func (p *Page) summary(ctx context.Context) (Summary, error) {
	sm, err := p.cfg.SafeMode.GetSafeMode(ctx, &bfspb.GetSafeModeRequest{})
	if err := answer("safe mode", sm, err); err != nil {
		return Summary{}, err
	}
	families, err := p.cfg.Metrics.Gather()
	if err != nil {
		return Summary{}, err
	}
	m := familiesByName(families)
	n := func(name string) int64 { return int64(sum(m[name])) }
	by := func(name, label, value string) int64 { return int64(sumWhere(m[name], label, value)) }
	s := Summary{
		Time:      p.cfg.Clock.Now(),
		ClusterID: p.cfg.ClusterID(),
		SafeMode: SafeModeState{On: sm.GetOn(), KnownBlocks: sm.GetKnownBlocks(), ReportedBlocks: sm.GetReportedBlocks(),
			Threshold: sm.GetThreshold(), LeftByOperator: sm.GetLeftByOperator()},
		Chunkservers: ChunkserverCount{
			Live:     by("bfs_nameserver_chunkservers", "state", "live"),
			Draining: by("bfs_nameserver_chunkservers", "state", "draining"),
			Dead:     by("bfs_nameserver_chunkservers", "state", "dead"),
		},
		CapacityBytes: n("bfs_nameserver_chunkserver_capacity_bytes"),
		FreeBytes:     n("bfs_nameserver_chunkserver_free_bytes"),
		Blocks: BlockHealth{UnderReplicated: n("bfs_nameserver_under_replicated_blocks"),
			Missing: n("bfs_nameserver_missing_blocks"), CorruptReplicas: n("bfs_nameserver_corrupt_replicas")},
		Repair: Repair{Queued: n("bfs_nameserver_repair_queue_length"), InFlight: n("bfs_nameserver_repair_copies_in_flight")},
		Locks: LockCount{
			Locked:       by("bfs_nameserver_dir_locks", "state", "locked"),
			Cleaning:     by("bfs_nameserver_dir_locks", "state", "cleaning"),
			Cleanings:    n("bfs_nameserver_lock_cleanings"),
			PendingFiles: n("bfs_nameserver_lock_cleaning_pending_files"),
		},
		Sessions: n("bfs_nameserver_sessions"),
	}
	if p.cfg.Leadership != nil {
		l := p.cfg.Leadership.Leader()
		s.Leader = &l
	}
	if r := rates(p.samples.all()); len(r) > 0 {
		s.Rate = &r[len(r)-1]
	}
	return s, nil
}
