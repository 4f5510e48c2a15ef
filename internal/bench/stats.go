package bench

import (
	"math"
	"slices"
	"time"
)

// Summarize is the Result of latency samples taken one at a time (a
// distribution: Elapsed stays zero). samples is not modified.
func Summarize(name string, clients int, samples []time.Duration, errors int64) Result {
	r := Result{Name: name, Clients: clients, Ops: int64(len(samples)), Errors: errors, Samples: slices.Clone(samples)}
	r.P50, r.P90, r.P99 = Percentiles(samples)
	return r
}

// Merge combines runs of one workload taken in pieces (to interleave two
// workloads being compared, so that drift in the system under test does
// not favor the one run last): operations, errors and elapsed times add
// up, and the percentiles are those of all the samples together. The
// result takes its name and client count from the first run.
func Merge(rs ...Result) Result {
	if len(rs) == 0 {
		return Result{}
	}
	m := Result{Name: rs[0].Name, Clients: rs[0].Clients, Param: rs[0].Param, Note: rs[0].Note}
	for _, r := range rs {
		m.Ops += r.Ops
		m.Errors += r.Errors
		m.Elapsed += r.Elapsed
		m.Samples = append(m.Samples, r.Samples...)
	}
	m.P50, m.P90, m.P99 = Percentiles(m.Samples)
	return m
}

// Percentiles returns the 50th, 90th and 99th percentiles of samples
// (nearest rank; zeros when there are none). samples is not modified.
func Percentiles(samples []time.Duration) (p50, p90, p99 time.Duration) {
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	return percentile(sorted, 0.50), percentile(sorted, 0.90), percentile(sorted, 0.99)
}

// percentile returns the q-quantile of sorted by nearest rank: the
// smallest sample with at least a fraction q of the samples at or below
// it. (With 20 samples the p99 is the largest; read it as a maximum.)
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// The epsilon keeps q*n that is an integer in exact arithmetic (0.9*100)
	// from rounding up to the next rank.
	rank := int(math.Ceil(q*float64(len(sorted)) - 1e-9))
	return sorted[min(max(rank-1, 0), len(sorted)-1)]
}

// Median returns the median of xs (the mean of the middle two for an even
// count; 0 when empty). xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
