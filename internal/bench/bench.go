// Package bench runs closed-loop benchmark workloads: N clients each
// repeat an operation back to back for a duration, and the run reports
// throughput and latency percentiles. It also summarizes latency samples
// taken one at a time (Summarize) and medians of per-trial figures. The
// bfsbench tool and the repository's Go benchmarks share it.
package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Result is what one measurement found. It is one of three shapes:
//
//   - a closed-loop run (Run): Ops operations in Elapsed, with latency
//     percentiles;
//   - a latency distribution (Summarize): Ops samples with percentiles and
//     Elapsed zero, as the samples were taken with setup work between them
//     and have no meaningful throughput;
//   - a single figure (Unit set): Value in Unit, such as "MB/s" for one
//     transfer or "x" for a ratio of two other results.
type Result struct {
	Name    string
	Clients int
	// Param names the point of a sweep other than the client count
	// ("files=100", "trial 2"); empty when there is none.
	Param   string
	Ops     int64
	Errors  int64
	Elapsed time.Duration
	// P50, P90 and P99 are zero when the result has no latencies.
	P50 time.Duration
	P90 time.Duration
	P99 time.Duration
	// Value in Unit replaces the throughput of Ops when Unit is set.
	Value float64
	Unit  string
	// Note says what exactly was measured, where the name cannot.
	Note string
	// Samples are the latencies of the successful operations, for Merge;
	// Run and Summarize keep them. Reports do not print them.
	Samples []time.Duration
}

// OpsPerSec is the throughput of the run (0 without an elapsed time).
func (r Result) OpsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// HasLatency reports whether the result carries latency percentiles.
func (r Result) HasLatency() bool { return r.P99 > 0 }

// Op is one operation of client c; i counts that client's operations.
type Op func(ctx context.Context, c, i int) error

// Run runs op from clients goroutines for d, or for ops operations in all
// when ops > 0 (whichever ends first). Clients stop starting operations
// once d has passed; an operation under way then runs to its end, so
// every client completes at least one operation however slow the machine,
// and the elapsed time runs to the last one's end. An operation that fails
// is counted as an error and its latency is left out; the first error is
// returned with the result so a broken workload is never reported as fast.
func Run(ctx context.Context, name string, clients int, d time.Duration, ops int64, op Op) (Result, error) {
	if clients <= 0 {
		return Result{}, fmt.Errorf("bench: %d clients", clients)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		all      []time.Duration
		failures int64
		firstErr error
		issued   = make(chan struct{}, 1)
		count    int64
	)
	issued <- struct{}{}
	take := func() bool { // claims one operation of the ops budget
		if ops <= 0 {
			return true
		}
		<-issued
		defer func() { issued <- struct{}{} }()
		if count >= ops {
			return false
		}
		count++
		return true
	}
	start := time.Now()
	deadline := start.Add(d)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			var fails int64
			var err1 error
			for i := 0; ctx.Err() == nil && time.Now().Before(deadline) && take(); i++ {
				t := time.Now()
				if err := op(ctx, c, i); err != nil {
					if ctx.Err() != nil {
						break // the caller ended the run under the operation
					}
					fails++
					if err1 == nil {
						err1 = err
					}
					continue
				}
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			all = append(all, lat...)
			failures += fails
			if firstErr == nil {
				firstErr = err1
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	r := Result{Name: name, Clients: clients, Ops: int64(len(all)), Errors: failures, Elapsed: time.Since(start), Samples: all}
	r.P50, r.P90, r.P99 = Percentiles(all)
	return r, firstErr
}
