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
