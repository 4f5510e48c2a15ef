package nameserver

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/golang/glog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/bfs-go/bfs/internal/daemon"
)

// metrics are the server's Prometheus collectors, in a registry of its own
// (no global registry: several servers can share a process).
type metrics struct {
	registry *prometheus.Registry
	rpcs     *daemon.RPCMetrics
	sessions prometheus.GaugeFunc
	pebble   *prometheus.CounterVec
	// claimMismatch counts closes in which a replica held fewer bytes
	// than the writer claimed synced.
	claimMismatch prometheus.Counter
}

func newMetrics(liveSessions func() float64) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		registry: reg,
		rpcs:     daemon.NewRPCMetrics(reg, "bfs_nameserver", "WatchDirLocks"),
		sessions: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bfs_nameserver_sessions",
			Help: "Live sessions.",
		}, liveSessions),
		pebble: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bfs_nameserver_pebble_events_total",
			Help: "Pebble storage events, by kind.",
		}, []string{"event"}),
		claimMismatch: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bfs_nameserver_sync_claim_mismatch_total",
			Help: "File closes in which a replica of the block held fewer bytes than its writer claimed synced; the length came from the replicas.",
		}),
	}
	m.registry.MustRegister(m.sessions, m.pebble, m.claimMismatch,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// pebbleListener counts the Pebble events an operator watches for.
func (m *metrics) pebbleListener() *pebble.EventListener {
	count := func(event string) { m.pebble.WithLabelValues(event).Inc() }
	return &pebble.EventListener{
		FlushEnd:        func(pebble.FlushInfo) { count("flush") },
		CompactionEnd:   func(pebble.CompactionInfo) { count("compaction") },
		WriteStallBegin: func(pebble.WriteStallBeginInfo) { count("write_stall") },
		BackgroundError: func(err error) { count("background_error"); glog.Errorf("pebble: %v", err) },
		DiskSlow:        func(pebble.DiskSlowInfo) { count("disk_slow") },
	}
}

// glogLogger sends Pebble's log lines to glog.
type glogLogger struct{}

func (glogLogger) Infof(format string, args ...any) {
	if glog.V(2) {
		glog.InfoDepth(1, fmt.Sprintf(format, args...))
	}
}
func (glogLogger) Errorf(format string, args ...any) {
	glog.ErrorDepth(1, fmt.Sprintf(format, args...))
}
func (glogLogger) Fatalf(format string, args ...any) {
	glog.FatalDepth(1, fmt.Sprintf(format, args...))
}
