package chunkserver

import (
	"github.com/bfs-go/bfs/chunkserver/volume"
	"github.com/bfs-go/bfs/internal/daemon"
	"github.com/bfs-go/bfs/internal/limit"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// metrics are the server's Prometheus collectors, in a registry of its own
// (no global registry: several servers can share a process).
type metrics struct {
	registry      *prometheus.Registry
	rpcs          *daemon.RPCMetrics
	packets       *prometheus.CounterVec
	packetLatency *prometheus.HistogramVec
	written, read prometheus.Counter
	seals         prometheus.Counter
	received      *prometheus.CounterVec
	nsCalls       *prometheus.CounterVec

	// Copies made for the nameserver (ReplicateBlock), by status code,
	// and their bytes.
	copies *prometheus.CounterVec
	copied prometheus.Counter
	// refused counts the calls refused for want of the nameserver's word
	// (a token, a nameserver's certificate), by operation.
	refused *prometheus.CounterVec

	// The scrubber's progress.
	scrubBytes, scrubReplicas, scrubCorrupt, scrubPasses prometheus.Counter
	scrubPassStart, scrubPosition                        prometheus.Gauge

	// limits counts what the limits refused or ended: messages over
	// --max-message-size, write streams idle past --write-idle-timeout.
	limits *daemon.Limits
}

// gauges reads the values the server exports as gauges.
type gauges struct {
	blocks, bytes, writeStreams, copies func() float64
}

func newMetrics(g gauges, vols *volume.Set) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		registry: reg,
		// A Write stream lives as long as its writer: packets are timed
		// one by one instead.
		rpcs:   daemon.NewRPCMetrics(reg, "bfs_chunkserver", "Write"),
		limits: daemon.NewLimits(reg, "bfs_chunkserver", limit.MessageSize, limit.WriteIdle),
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
		copies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bfs_chunkserver_copies_total",
			Help: "Block copies made here from another chunkserver for the nameserver (ReplicateBlock), by status code.",
		}, []string{"status"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bfs_chunkserver_refused_total",
			Help: "Calls refused for want of the nameserver's word: a Write or Read without a valid block token, a command from another certificate than a nameserver's; by operation.",
		}, []string{"op"}),
		copied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bfs_chunkserver_copied_bytes_total",
			Help: "Bytes copied here from other chunkservers (ReplicateBlock).",
		}),
		scrubBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bfs_chunkserver_scrub_verified_bytes_total",
			Help: "Bytes of sealed replicas the scrubber verified.",
		}),
		scrubReplicas: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bfs_chunkserver_scrub_verified_replicas_total",
			Help: "Sealed replicas the scrubber verified whole.",
		}),
		scrubCorrupt: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bfs_chunkserver_scrub_corrupt_replicas_total",
			Help: "Replicas the scrubber found corrupt.",
		}),
		scrubPasses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bfs_chunkserver_scrub_passes_total",
			Help: "Scrub passes completed (every sealed replica verified once).",
		}),
		scrubPassStart: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bfs_chunkserver_scrub_pass_start_seconds",
			Help: "Unix time the current scrub pass started.",
		}),
		scrubPosition: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bfs_chunkserver_scrub_position",
			Help: "Id of the last replica the current scrub pass verified (0: at the start).",
		}),
	}
	m.registry.MustRegister(m.packets, m.packetLatency,
		m.written, m.read, m.seals, m.received, m.nsCalls, m.copies, m.copied, m.refused,
		m.scrubBytes, m.scrubReplicas, m.scrubCorrupt, m.scrubPasses, m.scrubPassStart, m.scrubPosition,
		gauge("bfs_chunkserver_blocks", "Replicas stored.", g.blocks),
		gauge("bfs_chunkserver_used_bytes", "Bytes of the replicas stored.", g.bytes),
		gauge("bfs_chunkserver_write_streams", "Write streams open.", g.writeStreams),
		gauge("bfs_chunkserver_copies_in_flight", "Block copies under way (ReplicateBlock).", g.copies),
		newVolumeCollector(vols),
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

// volumeCollector exports, at scrape time, the volumes by state and each
// volume's capacity and free bytes.
type volumeCollector struct {
	vols                  *volume.Set
	count, capacity, free *prometheus.Desc
}

func newVolumeCollector(vols *volume.Set) *volumeCollector {
	return &volumeCollector{
		vols: vols,
		count: prometheus.NewDesc("bfs_chunkserver_volumes",
			"Volumes (data directories) by state: healthy, full (taking no new replica until space is freed), failed (out of service).",
			[]string{"state"}, nil),
		capacity: prometheus.NewDesc("bfs_chunkserver_volume_capacity_bytes",
			"Size of each volume's file system (0: it cannot tell, or the volume failed).", []string{"dir"}, nil),
		free: prometheus.NewDesc("bfs_chunkserver_volume_free_bytes",
			"Free bytes of each volume's file system.", []string{"dir"}, nil),
	}
}

func (c *volumeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.capacity
	ch <- c.free
}

func (c *volumeCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[volume.State]int{}
	for _, st := range c.vols.Status() {
		counts[st.State]++
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(st.Capacity), st.Dir)
		ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(st.Free), st.Dir)
	}
	for _, state := range []volume.State{volume.Healthy, volume.Full, volume.Failed} {
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(counts[state]), state.String())
	}
}
