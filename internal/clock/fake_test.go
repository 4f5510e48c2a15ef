package clock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bfs-go/bfs/internal/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// received returns what c holds right now, without waiting.
func received(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimerFiresAtDeadline(t *testing.T) {
	tests := []struct {
		name     string
		d        time.Duration
		advances []time.Duration
		fired    bool
	}{
		{"not yet", 10 * time.Second, []time.Duration{9 * time.Second}, false},
		{"exactly due", 10 * time.Second, []time.Duration{10 * time.Second}, true},
		{"in steps", 10 * time.Second, []time.Duration{4 * time.Second, 6 * time.Second}, true},
		{"overshoot", 10 * time.Second, []time.Duration{time.Hour}, true},
		{"zero fires at once", 0, nil, true},
		{"negative fires at once", -time.Second, nil, true},
		{"negative advance ignored", time.Second, []time.Duration{-time.Hour}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := clock.NewFake(epoch)
			tm := f.NewTimer(tc.d)
			for _, d := range tc.advances {
				f.Advance(d)
			}
			v, ok := received(tm.C())
			if ok != tc.fired {
				t.Fatalf("fired = %v, want %v", ok, tc.fired)
			}
			if ok {
				if want := epoch.Add(max(tc.d, 0)); !v.Equal(want) {
					t.Fatalf("C carried %v, want the time it fired at, %v", v, want)
				}
			}
		})
	}
}

func TestFakeAdvanceRunsDueAfterFuncs(t *testing.T) {
	f := clock.NewFake(epoch)
	var (
		mu  sync.Mutex
		ran []int
		wg  sync.WaitGroup
	)
	for i, d := range []time.Duration{5, 1, 3, 3, 2, 4} {
		wg.Add(1)
		f.AfterFunc(d*time.Second, func() {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, i)
		})
	}
	late := f.AfterFunc(11*time.Second, func() { t.Error("not due yet") })
	if n := f.WaiterCount(); n != 7 {
		t.Fatalf("WaiterCount = %d, want 7", n)
	}

	f.Advance(10 * time.Second)
	wg.Wait()
	if n := f.WaiterCount(); n != 1 {
		t.Fatalf("WaiterCount = %d, want only the late timer armed", n)
	}
	slices.Sort(ran)
	if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
	if got, want := f.Now(), epoch.Add(10*time.Second); !got.Equal(want) {
		t.Fatalf("Now = %v, want %v", got, want)
	}
	if !late.Stop() {
		t.Fatal("late timer was not armed")
	}
}

func TestFakeFiringOrderIsStrict(t *testing.T) {
	// AfterFunc callbacks run in goroutines, so order is observed through
	// channel timers, which Advance fills synchronously: each one receives
	// the Now it fired at, which must be its own deadline.
	f := clock.NewFake(epoch)
	delays := []time.Duration{5, 1, 3, 2, 4}
	timers := make([]clock.Timer, len(delays))
	for i, d := range delays {
		timers[i] = f.NewTimer(d * time.Second)
	}
	f.Advance(time.Minute)
	for i, tm := range timers {
		v, ok := received(tm.C())
		if want := epoch.Add(delays[i] * time.Second); !ok || !v.Equal(want) {
			t.Fatalf("timer %d: fired %v at %v, want at %v", i, ok, v, want)
		}
	}
}

// must fails the test at once if ok is false.
func must(t *testing.T, ok bool, what string) {
	t.Helper()
	if !ok {
		t.Fatal(what)
	}
}

func TestFakeStopAndReset(t *testing.T) {
	f := clock.NewFake(epoch)
	tm := f.NewTimer(time.Second)

	must(t, tm.Stop(), "Stop of an armed timer returned false")
	must(t, !tm.Stop(), "second Stop returned true")
	f.Advance(time.Hour)
	_, ok := received(tm.C())
	must(t, !ok, "stopped timer fired")

	must(t, !tm.Reset(time.Second), "Reset of a stopped timer returned true")
	must(t, tm.Reset(2*time.Second), "Reset of an armed timer returned false")
	f.Advance(time.Second)
	_, ok = received(tm.C())
	must(t, !ok, "timer fired at the deadline Reset replaced")
	f.Advance(time.Second)

	// Fired but not received: Reset discards the stale value (Go 1.23+).
	must(t, tm.Reset(time.Second), "Reset of a fired, unreceived timer returned false")
	_, ok = received(tm.C())
	must(t, !ok, "stale value received after Reset")
	f.Advance(time.Second)
	_, ok = received(tm.C())
	must(t, ok, "re-armed timer did not fire")
}

func TestFakeAfterFuncStop(t *testing.T) {
	f := clock.NewFake(epoch)
	ran := make(chan struct{})
	tm := f.AfterFunc(time.Second, func() { close(ran) })
	must(t, tm.C() == nil, "AfterFunc timer has a channel")
	must(t, tm.Stop(), "Stop of an armed AfterFunc returned false")
	f.Advance(time.Hour)
	select {
	case <-ran:
		t.Fatal("stopped AfterFunc ran")
	default:
	}
	tm.Reset(time.Second)
	f.Advance(time.Second)
	<-ran
}

func TestFakeBlockUntil(t *testing.T) {
	f := clock.NewFake(epoch)
	armed := make(chan clock.Timer)
	go func() { armed <- f.NewTimer(time.Second) }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.BlockUntil(ctx, 1); err != nil {
		t.Fatalf("BlockUntil: %v", err)
	}
	must(t, f.WaiterCount() == 1, "BlockUntil returned before a timer was armed")
	tm := <-armed
	f.Advance(time.Second)
	<-tm.C()

	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if err := f.BlockUntil(done, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("BlockUntil with a cancelled context = %v, want context.Canceled", err)
	}
}
