package nameserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/golang/glog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/internal/daemon"
	"github.com/bfs-go/bfs/internal/limit"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/nameserver/replica"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// metrics are the server's Prometheus collectors, in a registry of its own
// (no global registry: several servers can share a process).
type metrics struct {
	registry *prometheus.Registry
	rpcs     *daemon.RPCMetrics
	// limits counts what the limits refused (config.go, Limits).
	limits   *daemon.Limits
	sessions prometheus.GaugeFunc
	pebble   *prometheus.CounterVec
	// claimMismatch counts closes in which a replica held fewer bytes
	// than the writer claimed synced.
	claimMismatch prometheus.Counter
	locks         lockMetrics
	repairs       repairMetrics
	replica       replicaMetrics
}

// lockMetrics are the lock domain's collectors (BUILD.md lists them).
// Each is fed by one call where its event happens: grants and the ends of
// cleanings at commit (lockChanged), refusals as requests are answered
// (countRefusals), expiries as sessions end, the forced-unlock notice as
// the holder's watch stream sends it; the gauges are read at scrape time.
type lockMetrics struct {
	grants        *prometheus.CounterVec
	refusals      *prometheus.CounterVec
	cleaningTime  *prometheus.HistogramVec
	expiries      prometheus.Counter
	forcedNoticed prometheus.Histogram
}

func newLockMetrics() lockMetrics {
	return lockMetrics{
		grants: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bfs_nameserver_lock_grants_total",
			Help: "Directory locks granted (each a new epoch), by kind: session or operator.",
		}, []string{"kind"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bfs_nameserver_lock_refusals_total",
			Help: "Requests refused by a directory lock, by method and status: LOCKED, CLEANING or STALE_EPOCH.",
		}, []string{"method", "status"}),
		cleaningTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bfs_nameserver_lock_cleaning_duration_seconds",
			Help:    "Time from a lock leaving LOCKED to UNLOCKED (0 when nothing was open for write), by reason: holder, force, expiry, or grant (the cleaning before a grant).",
			Buckets: prometheus.ExponentialBuckets(1e-3, 2, 18),
		}, []string{"reason"}),
		expiries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bfs_nameserver_session_expiries_total",
			Help: "Sessions ended because their TTL passed without a keep-alive.",
		}),
		forcedNoticed: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "bfs_nameserver_forced_unlock_notify_seconds",
			Help:    "Time from a forced unlock being applied to the holder session's watch stream sending the event that ends the lock.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}),
	}
}

func (l *lockMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.grants, l.refusals, l.cleaningTime, l.expiries, l.forcedNoticed}
}

// lockGauges registers the gauges read at scrape time: locks by state,
// and the cleanings in progress with the files they still wait for.
func (m *metrics) lockGauges(counts func() (locked, cleaning int), cleanings func() (n, pending int)) {
	gauge := func(name, help string, labels prometheus.Labels, value func() int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(value()) })
	}
	const locksHelp = "Directories locked, by state: locked or cleaning."
	m.registry.MustRegister(
		gauge("bfs_nameserver_dir_locks", locksHelp, prometheus.Labels{"state": "locked"}, func() int { l, _ := counts(); return l }),
		gauge("bfs_nameserver_dir_locks", locksHelp, prometheus.Labels{"state": "cleaning"}, func() int { _, c := counts(); return c }),
		gauge("bfs_nameserver_lock_cleanings", "Cleanings in progress (each drains one unlocked subtree).", nil,
			func() int { n, _ := cleanings(); return n }),
		gauge("bfs_nameserver_lock_cleaning_pending_files", "Files the cleanings in progress still wait for (a replica has not reported them sealed).", nil,
			func() int { _, p := cleanings(); return p }),
	)
}

// limitGauges registers the gauges of what the limits bound: the watch
// streams open and the lock calls waiting.
func (m *metrics) limitGauges(watchStreams, lockWaits func() int) {
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "bfs_nameserver_watch_streams", Help: "WatchDirLocks streams open."},
			func() float64 { return float64(watchStreams()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "bfs_nameserver_lock_waits", Help: "LockDir and UnlockDir calls waiting (with wait) for a lock to change."},
			func() float64 { return float64(lockWaits()) }),
	)
}

// corruptGauge registers the gauge of the replicas marked corrupt.
func (m *metrics) corruptGauge(count func() int) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bfs_nameserver_corrupt_replicas",
		Help: "Replicas reported corrupt (by a chunkserver's scrubber or a reader): kept, not counted, not given to readers.",
	}, func() float64 { return float64(count()) }))
}

// lockChanged counts what a committed command did to directory locks:
// the grants it made, and the end of the cleaning it finished (one
// observation per cleaning, nested locks included), timed from the
// cleaning record's start on the commands' clock.
func (m *metrics) lockChanged(cmd *bfspb.Command, res *namespace.Result) {
	if lock := cmd.GetLockDir(); lock != nil {
		kind := "session"
		if lock.Operator {
			kind = "operator"
		}
		for _, l := range res.SetLocks {
			if l.Status == dirlock.Locked {
				m.locks.grants.WithLabelValues(kind).Inc()
			}
		}
	}
	ends := cmd.GetUnlockDir() != nil || cmd.GetFinishCleaning() != nil
	if rec := res.Cleaning; ends && rec != nil && len(res.RemovedLocks) > 0 {
		d := time.Duration(max(cmd.TimeNs-rec.StartedNs, 0))
		m.locks.cleaningTime.WithLabelValues(rec.Reason).Observe(d.Seconds())
	}
}

// countRefusals is a unary interceptor counting the requests answered
// LOCKED, CLEANING or STALE_EPOCH, by method. An UnlockDir answered
// CLEANING refused nothing: that is the state it left the directory in.
func (m *metrics) countRefusals(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	r, ok := resp.(interface{ GetStatus() bfspb.StatusCode })
	if !ok || err != nil {
		return resp, err
	}
	method := info.FullMethod[strings.LastIndexByte(info.FullMethod, '/')+1:]
	switch code := r.GetStatus(); {
	case code == bfspb.StatusCode_LOCKED || code == bfspb.StatusCode_STALE_EPOCH,
		code == bfspb.StatusCode_CLEANING && method != "UnlockDir":
		m.locks.refusals.WithLabelValues(method, code.String()).Inc()
	}
	return resp, err
}

func newMetrics(liveSessions func() float64) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		registry: reg,
		rpcs:     daemon.NewRPCMetrics(reg, "bfs_nameserver", "WatchDirLocks"),
		limits: daemon.NewLimits(reg, "bfs_nameserver", limit.MessageSize, limit.WatchStreams, limit.WatchStreamsTotal, limit.SessionWatchStreams,
			limit.WatchLag, limit.SessionsPerIdentity, limit.Sessions, limit.LockWaits),
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
		locks:   newLockMetrics(),
		repairs: newRepairMetrics(),
		replica: replicaMetrics{
			applySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "bfs_nameserver_raft_apply_seconds",
				Help:    "Time to apply one batch of committed log entries to the namespace.",
				Buckets: prometheus.ExponentialBuckets(1e-5, 4, 10),
			}),
			applyEntries: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "bfs_nameserver_raft_applied_entries_total",
				Help: "Committed log entries applied to the namespace.",
			}),
			leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "bfs_nameserver_raft_leader_changes_total",
				Help: "Times this member became leader or stopped being one.",
			}),
		},
	}
	m.registry.MustRegister(m.sessions, m.pebble, m.claimMismatch,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.registry.MustRegister(m.locks.collectors()...)
	m.registry.MustRegister(m.repairs.collectors()...)
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

// replicaMetrics are the group's: term, leadership, indexes, applies.
type replicaMetrics struct {
	applySeconds  prometheus.Histogram
	applyEntries  prometheus.Counter
	leaderChanges prometheus.Counter
}

// applied counts a batch of entries applied.
func (m *metrics) applied(entries int, seconds float64) {
	m.replica.applySeconds.Observe(seconds)
	m.replica.applyEntries.Add(float64(entries))
}

// replicaGauges registers the group's gauges, read from the node at
// scrape time, and its counters.
func (m *metrics) replicaGauges(n *replica.Node) {
	gauge := func(name, help string, f func(replica.Status) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(n.Status()) })
	}
	m.registry.MustRegister(
		gauge("bfs_nameserver_raft_term", "The group's Raft term as this member knows it.", func(s replica.Status) float64 { return float64(s.Term) }),
		gauge("bfs_nameserver_raft_leader", "1 while this member is the group's leader, 0 otherwise.", func(s replica.Status) float64 {
			if s.Role == "leader" {
				return 1
			}
			return 0
		}),
		gauge("bfs_nameserver_raft_commit_index", "The last log index this member knows committed.", func(s replica.Status) float64 { return float64(s.Commit) }),
		gauge("bfs_nameserver_raft_applied_index", "The last log index this member's namespace applied.", func(s replica.Status) float64 { return float64(s.Applied) }),
		m.replica.applySeconds, m.replica.applyEntries, m.replica.leaderChanges,
	)
}
