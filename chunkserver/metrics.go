package chunkserver

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// metrics are the server's Prometheus collectors, in a registry of its own
// (no global registry: several servers can share a process).
type metrics struct {
	registry      *prometheus.Registry
	rpcs          *prometheus.CounterVec
	rpcLatency    *prometheus.HistogramVec
	packets       *prometheus.CounterVec
	packetLatency *prometheus.HistogramVec
	written, read prometheus.Counter
	seals         prometheus.Counter
	received      *prometheus.CounterVec
	nsCalls       *prometheus.CounterVec
}

// gauges reads the values the server exports as gauges.
type gauges struct {
	blocks, bytes, writeStreams func() float64
}

func newMetrics(g gauges) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		rpcs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bfs_chunkserver_rpcs_total",
			Help: "Unary RPCs answered, by method and status code.",
		}, []string{"method", "status"}),
		rpcLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bfs_chunkserver_rpc_duration_seconds",
			Help:    "Time to answer an RPC (for Read, the whole stream), by method.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"method"}),
		packets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bfs_chunkserver_packets_total",
			Help: "Write packets acknowledged, by status code.",
		}, []string{"status"}),
		packetLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bfs_chunkserver_packet_duration_seconds",
			Help:    "Time to apply a write packet, by kind (plain, sync, last).",
			Buckets: prometheus.ExponentialBuckets(10e-6, 2, 20),
		}, []string{"kind"}),
		written: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bfs_chunkserver_written_bytes_total",
			Help: "Bytes of write packets accepted.",
		}),
		read: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bfs_chunkserver_read_bytes_total",
			Help: "Bytes sent to readers.",
		}),
		seals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bfs_chunkserver_seals_total",
			Help: "Replicas sealed, by Seal RPC or by a last packet.",
		}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bfs_chunkserver_block_received_total",
			Help: "Blocks reported to the nameserver by BlockReceived, by result (ok, retry, dropped).",
		}, []string{"result"}),
		nsCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bfs_chunkserver_nameserver_calls_total",
			Help: "Calls to the nameserver, by method and outcome (a status code or transport_error).",
		}, []string{"method", "result"}),
	}
	m.registry.MustRegister(m.rpcs, m.rpcLatency, m.packets, m.packetLatency,
		m.written, m.read, m.seals, m.received, m.nsCalls,
		gauge("bfs_chunkserver_blocks", "Replicas stored.", g.blocks),
		gauge("bfs_chunkserver_used_bytes", "Bytes of the replicas stored.", g.bytes),
		gauge("bfs_chunkserver_write_streams", "Write streams open.", g.writeStreams),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func gauge(name, help string, f func() float64) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

// nsCall counts one call to the nameserver.
func (m *metrics) nsCall(method string, code bfspb.StatusCode, err error) {
	result := code.String()
	if err != nil {
		result = "transport_error"
	}
	m.nsCalls.WithLabelValues(method, result).Inc()
}

// statusCarrier is every response message.
type statusCarrier interface{ GetStatus() bfspb.StatusCode }

func methodName(full string) string { return full[strings.LastIndexByte(full, '/')+1:] }

func (m *metrics) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	method := methodName(info.FullMethod)
	m.rpcLatency.WithLabelValues(method).Observe(time.Since(start).Seconds())
	code := "transport_error"
	if r, ok := resp.(statusCarrier); ok && err == nil {
		code = r.GetStatus().String()
	}
	m.rpcs.WithLabelValues(method, code).Inc()
	return resp, err
}

// streamInterceptor times Read streams; a Write stream lives as long as
// its writer, so packets are timed one by one instead.
func (m *metrics) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	if method := methodName(info.FullMethod); method != "Write" {
		m.rpcLatency.WithLabelValues(method).Observe(time.Since(start).Seconds())
	}
	return err
}
