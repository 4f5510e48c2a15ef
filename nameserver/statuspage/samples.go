package statuspage

import (
	"sync"
	"time"

	"github.com/golang/glog"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The counters the charts draw, summed over their labels. Their rates
// are what Grafana draws from the same counters (deploy/grafana).
const (
	metricGrants      = "bfs_nameserver_lock_grants_total"
	metricRefusals    = "bfs_nameserver_lock_refusals_total"
	metricRepairBytes = "bfs_nameserver_repair_bytes_total"
)

// charted are the counters a sample holds, in the order of its values.
var charted = [...]string{metricGrants, metricRefusals, metricRepairBytes}

// sample is the charted counters at one time.
type sample struct {
	at     time.Time
	values [len(charted)]float64
}

// sampler keeps the last samples in a ring. It is safe for concurrent
// use: the page's goroutine adds, requests read.
type sampler struct {
	metrics prometheus.Gatherer
	mu      struct {
		sync.Mutex
		ring []sample
		// next is where the next sample goes; full once the ring wrapped.
		next int
		full bool
	}
}

func newSampler(metrics prometheus.Gatherer, n int) *sampler {
	s := &sampler{metrics: metrics}
	s.mu.ring = make([]sample, n)
	return s
}

// sample reads the counters now.
func (s *sampler) sample(now time.Time) {
	families, err := s.metrics.Gather()
	if err != nil {
		glog.Warningf("status page: reading the metrics: %v", err)
	}
	byName := familiesByName(families)
	smp := sample{at: now}
	for i, name := range charted {
		smp.values[i] = sum(byName[name])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.ring[s.mu.next] = smp
	s.mu.next = (s.mu.next + 1) % len(s.mu.ring)
	s.mu.full = s.mu.full || s.mu.next == 0
}

// all returns the samples, oldest first.
func (s *sampler) all() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.full {
		return append([]sample(nil), s.mu.ring[:s.mu.next]...)
	}
	return append(append([]sample(nil), s.mu.ring[s.mu.next:]...), s.mu.ring[:s.mu.next]...)
}

// Rate is the rates of the charted counters over one sampling interval,
// ending at Time.
type Rate struct {
	Time                 time.Time `json:"time"`
	GrantsPerSecond      float64   `json:"grants_per_second"`
	RefusalsPerSecond    float64   `json:"refusals_per_second"`
	RepairBytesPerSecond float64   `json:"repair_bytes_per_second"`
}

// rates returns the rate over each interval between two samples, oldest
// first.
func rates(samples []sample) []Rate {
	if len(samples) < 2 {
		return nil
	}
	out := make([]Rate, 0, len(samples)-1)
	for i := 1; i < len(samples); i++ {
		prev, cur := samples[i-1], samples[i]
		secs := cur.at.Sub(prev.at).Seconds()
		if secs <= 0 {
			continue
		}
		var per [len(charted)]float64
		for j := range charted {
			// A counter never goes down in one process; a drop would be a
			// reset, whose rate is unknown: 0 rather than a negative rate.
			per[j] = max(cur.values[j]-prev.values[j], 0) / secs
		}
		out = append(out, Rate{Time: cur.at, GrantsPerSecond: per[0], RefusalsPerSecond: per[1], RepairBytesPerSecond: per[2]})
	}
	return out
}

// familiesByName indexes gathered metric families by name.
func familiesByName(families []*dto.MetricFamily) map[string]*dto.MetricFamily {
	out := make(map[string]*dto.MetricFamily, len(families))
	for _, f := range families {
		out[f.GetName()] = f
	}
	return out
}

// sum adds up a counter's or gauge's values over all its labels (0 for a
// family not exported, such as a labelled counter nothing has counted
// yet).
func sum(f *dto.MetricFamily) float64 {
	return sumWhere(f, "", "")
}

// sumWhere is sum over the metrics whose label is value ("" matches
// all).
func sumWhere(f *dto.MetricFamily, label, value string) float64 {
	var total float64
	for _, m := range f.GetMetric() {
		if label != "" && labelValue(m, label) != value {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Untyped != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return total
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
