package retry_test

import (
	"context"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.uber.org/goleak"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestNewDelays checks the curve and the jitter: the n-th delay lies in
// [d/2, d] for d = min·2ⁿ capped at max, the delays of a step differ
// from run to run (each run is a client retrying at the same moment), and
// Reset starts over.
func TestNewDelays(t *testing.T) {
	const runs, steps = 200, 12
	for _, tc := range []struct{ min, max time.Duration }{
		{20 * time.Millisecond, 2 * time.Second},
		{50 * time.Millisecond, 2 * time.Second},
		{50 * time.Millisecond, 5 * time.Second},
		{time.Millisecond, time.Millisecond},
	} {
		lowest, highest := make([]time.Duration, steps), make([]time.Duration, steps)
		b := retry.New(tc.min, tc.max)
		for run := range runs {
			d := tc.min
			for n := range steps {
				got := b.NextBackOff()
				if got < d/2 || got > d {
					t.Fatalf("New(%v, %v): delay %d is %v, want it in [%v, %v]", tc.min, tc.max, n, got, d/2, d)
				}
				if run == 0 || got < lowest[n] {
					lowest[n] = got
				}
				highest[n] = max(highest[n], got)
				d = min(2*d, tc.max)
			}
			b.Reset()
		}
		// Uniform over [d/2, d]: 200 draws all within the same quarter
		// of it has a probability below 2^-300.
		d := tc.min
		for n := range steps {
			if spread := highest[n] - lowest[n]; spread < d/8 {
				t.Errorf("New(%v, %v): delay %d spread over %v only (from %v to %v); want jitter", tc.min, tc.max, n, spread, lowest[n], highest[n])
			}
			d = min(2*d, tc.max)
		}
	}
}

// TestSleepWaitsOnTheClock: Sleep waits the backoff's next delay on the
// clock it is given, and gives up when ctx ends.
func TestSleepWaitsOnTheClock(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := backoff.NewConstantBackOff(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	slept := make(chan bool)
	go func() { slept <- retry.Sleep(ctx, clk, b) }()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second - time.Nanosecond)
	select {
	case <-slept:
		t.Fatal("Sleep returned before the delay passed on the clock")
	default:
	}
	clk.Advance(time.Nanosecond)
	if !<-slept {
		t.Fatal("Sleep reported ctx ended; want the delay waited")
	}

	go func() { slept <- retry.Sleep(ctx, clk, b) }()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if <-slept {
		t.Fatal("Sleep waited the delay out after ctx ended")
	}
}
