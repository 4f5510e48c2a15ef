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

	"github.com/bfs-go/bfs/proto/bfspb"
)

// metrics are the server's Prometheus collectors, in a registry of its own
// (no global registry: several servers can share a process).
type metrics struct {
	registry   *prometheus.Registry
	rpcs       *prometheus.CounterVec
	rpcLatency *prometheus.HistogramVec
	sessions   prometheus.GaugeFunc
	pebble     *prometheus.CounterVec
}

func newMetrics(liveSessions func() float64) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		rpcs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bfs_nameserver_rpcs_total",
			Help: "RPCs answered, by method and status code.",
		}, []string{"method", "status"}),
		rpcLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bfs_nameserver_rpc_duration_seconds",
			Help:    "Time to answer an RPC, by method.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"method"}),
		sessions: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bfs_nameserver_sessions",
			Help: "Live sessions.",
		}, liveSessions),
		pebble: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bfs_nameserver_pebble_events_total",
			Help: "Pebble storage events, by kind.",
		}, []string{"event"}),
	}
	m.registry.MustRegister(m.rpcs, m.rpcLatency, m.sessions, m.pebble,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// statusCarrier is every response message.
type statusCarrier interface{ GetStatus() bfspb.StatusCode }

func (m *metrics) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	method := info.FullMethod[strings.LastIndexByte(info.FullMethod, '/')+1:]
	m.rpcLatency.WithLabelValues(method).Observe(time.Since(start).Seconds())
	code := "transport_error"
	if r, ok := resp.(statusCarrier); ok && err == nil {
		code = r.GetStatus().String()
	}
	m.rpcs.WithLabelValues(method, code).Inc()
	return resp, err
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
