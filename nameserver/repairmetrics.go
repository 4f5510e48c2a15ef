package nameserver

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bfs-go/bfs/nameserver/repair"
)

// repairMetrics are the re-replication's counters (BUILD.md lists them);
// its gauges are read from the scheduler at scrape time (repairGauges).
type repairMetrics struct {
	copies         *prometheus.CounterVec
	bytes          prometheus.Counter
	trimmed        prometheus.Counter
	corruptDeleted prometheus.Counter
}

func newRepairMetrics() repairMetrics {
	return repairMetrics{
		copies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bfs_nameserver_repair_copies_total",
			Help: "Repair copies of a block from one chunkserver to another, by result: ok, exists, source_corrupt, source_not_found, source_unavailable, busy, wrong_cluster, timeout, error.",
		}, []string{"result"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bfs_nameserver_repair_bytes_total",
			Help: "Bytes copied by repair copies that succeeded.",
		}),
		trimmed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bfs_nameserver_excess_replicas_deleted_total",
			Help: "Replicas deleted because their block had more good replicas than its replication.",
		}),
		corruptDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bfs_nameserver_corrupt_replicas_deleted_total",
			Help: "Corrupt replicas deleted once their block had its full count of good replicas elsewhere.",
		}),
	}
}

func (r *repairMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.copies, r.bytes, r.trimmed, r.corruptDeleted}
}

// copied counts one repair copy.
func (r *repairMetrics) copied(result string, bytes int64) {
	r.copies.WithLabelValues(result).Inc()
	r.bytes.Add(float64(bytes))
}

// repairGauges registers the gauges read from the scheduler.
func (m *metrics) repairGauges(stats func() repair.Stats) {
	gauge := func(name, help string, f func(repair.Stats) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f(stats())) })
	}
	m.registry.MustRegister(
		gauge("bfs_nameserver_under_replicated_blocks",
			"Blocks with fewer counting replicas (not corrupt, not on a draining chunkserver) than their file's replication, those of files open for write included.",
			func(s repair.Stats) int { return s.UnderReplicated }),
		gauge("bfs_nameserver_missing_blocks", "Blocks of closed files with no good replica (sealed at the block's length, on a volume in service of a live chunkserver, not known corrupt).",
			func(s repair.Stats) int { return s.Missing }),
		gauge("bfs_nameserver_repair_queue_length", "Under-replicated blocks waiting for a repair copy.",
			func(s repair.Stats) int { return s.Queued }),
		gauge("bfs_nameserver_repair_copies_in_flight", "Repair copies in flight.",
			func(s repair.Stats) int { return s.InFlight }),
	)
}
