package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i))
	}
	for q, want := range map[float64]time.Duration{0.5: 50, 0.9: 90, 0.99: 99, 1: 100} {
		if got := percentile(s, q); got != want {
			t.Errorf("percentile(%v) = %v, want %v", q, got, want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("empty input")
	}
}

func TestRunCountsEveryOperation(t *testing.T) {
	var n atomic.Int64
	r, err := Run(context.Background(), "count", 4, time.Minute, 1000, func(context.Context, int, int) error {
		n.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != 1000 || n.Load() != 1000 {
		t.Fatalf("ops %d, calls %d; want 1000", r.Ops, n.Load())
	}
	if r.OpsPerSec() <= 0 || r.P99 < r.P50 {
		t.Fatalf("bad result %+v", r)
	}
}

func TestRunReportsErrors(t *testing.T) {
	boom := errors.New("boom")
	r, err := Run(context.Background(), "fail", 2, time.Minute, 10, func(_ context.Context, _, i int) error {
		if i%2 == 0 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if r.Errors == 0 || r.Ops+r.Errors != 10 {
		t.Fatalf("ops %d errors %d", r.Ops, r.Errors)
	}
}

func TestPercentileNearestRank(t *testing.T) {
	ds := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x)
		}
		return out
	}
	for _, tc := range []struct {
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{ds(7), 0.5, 7},
		{ds(7), 0.99, 7},
		{ds(1, 2), 0.5, 1},
		{ds(1, 2, 3), 0.5, 2},
		{ds(1, 2, 3, 4, 5, 6), 0.9, 6}, // rank ceil(5.4) = 6
		{ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.9, 9},
		{ds(1, 2, 3), 0.99, 3}, // few samples: the p99 is the maximum
		{ds(1, 2, 3, 4, 5), 0, 1},
	} {
		if got := percentile(tc.sorted, tc.q); got != tc.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.sorted, tc.q, got, tc.want)
		}
	}
}

func TestSummarizeSortsACopy(t *testing.T) {
	samples := []time.Duration{30, 10, 20}
	r := Summarize("s", 1, samples, 2)
	if r.P50 != 20 || r.P90 != 30 || r.P99 != 30 || r.Ops != 3 || r.Errors != 2 || r.Elapsed != 0 {
		t.Fatalf("%+v", r)
	}
	if samples[0] != 30 {
		t.Error("Summarize reordered its input")
	}
	if r.OpsPerSec() != 0 || !r.HasLatency() {
		t.Errorf("a distribution has latencies and no throughput: %+v", r)
	}
}

func TestMerge(t *testing.T) {
	a := Result{Name: "w", Clients: 2, Ops: 2, Errors: 1, Elapsed: time.Second, Samples: []time.Duration{1, 2}}
	b := Result{Name: "w", Clients: 2, Ops: 3, Elapsed: time.Second, Samples: []time.Duration{100, 101, 102}}
	m := Merge(a, b)
	if m.Ops != 5 || m.Errors != 1 || m.Elapsed != 2*time.Second || m.Clients != 2 || m.Name != "w" {
		t.Fatalf("%+v", m)
	}
	// Percentiles of all samples together, not an average of the parts'.
	if m.P50 != 100 || m.P99 != 102 {
		t.Fatalf("p50 %v p99 %v", m.P50, m.P99)
	}
	if m.OpsPerSec() != 2.5 {
		t.Fatalf("ops/s %v", m.OpsPerSec())
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{5}, 5}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.xs); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

func TestRunKeepsSamples(t *testing.T) {
	r, err := Run(context.Background(), "s", 2, time.Minute, 10, func(context.Context, int, int) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Samples) != 10 {
		t.Fatalf("%d samples for 10 ops", len(r.Samples))
	}
}

// Ended by its duration, a run counts exactly the operations that
// completed without error, and its percentiles are ordered.
func TestRunForADurationCountsCompletedOperations(t *testing.T) {
	var done atomic.Int64
	r, err := Run(context.Background(), "timed", 3, 50*time.Millisecond, 0, func(_ context.Context, _, i int) error {
		time.Sleep(time.Duration(i%3) * 100 * time.Microsecond) // a spread of latencies
		done.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops == 0 || r.Ops != done.Load() || int64(len(r.Samples)) != r.Ops || r.Errors != 0 {
		t.Fatalf("ops %d, samples %d, errors %d; %d operations completed", r.Ops, len(r.Samples), r.Errors, done.Load())
	}
	if !(0 < r.P50 && r.P50 <= r.P90 && r.P90 <= r.P99) {
		t.Errorf("percentiles out of order: %v %v %v", r.P50, r.P90, r.P99)
	}
	if r.Elapsed < 50*time.Millisecond || r.Clients != 3 {
		t.Errorf("elapsed %v, clients %d", r.Elapsed, r.Clients)
	}
}

// The end of the run stops clients starting operations; one under way
// runs to its end and counts, so a machine slower than the duration still
// measures something.
func TestRunLetsTheLastOperationFinish(t *testing.T) {
	r, err := Run(context.Background(), "slow", 2, 20*time.Millisecond, 0, func(ctx context.Context, _, _ int) error {
		select {
		case <-time.After(60 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err != nil || r.Ops != 2 || r.Errors != 0 || r.Elapsed < 60*time.Millisecond {
		t.Fatalf("ops %d errors %d elapsed %v err %v, want 2 ops after 60ms", r.Ops, r.Errors, r.Elapsed, err)
	}
}

// An operation the caller's context interrupts is neither an op nor an
// error.
func TestRunCancelDoesNotCountInterruptedOperations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r, err := Run(ctx, "blocked", 2, time.Minute, 0, func(ctx context.Context, _, _ int) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if err != nil || r.Ops != 0 || r.Errors != 0 {
		t.Fatalf("ops %d errors %d err %v, want none", r.Ops, r.Errors, err)
	}
}
