package taskgroup

import (
	"context"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStopWaitsAndRefuses: Stop ends the context of the running
// goroutines, returns only once they have, and refuses any asked for after.
func TestStopWaitsAndRefuses(t *testing.T) {
	g := New()
	started, returned := make(chan struct{}), make(chan struct{})
	if !g.Go(func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		close(returned)
	}) {
		t.Fatal("a running group refused a goroutine")
	}
	<-started
	g.Stop()
	select {
	case <-returned:
	default:
		t.Fatal("Stop returned before the goroutine did")
	}
	if g.Go(func(context.Context) { t.Error("ran after Stop") }) {
		t.Fatal("a stopped group took a goroutine")
	}
	if g.Context().Err() == nil {
		t.Fatal("the context outlived Stop")
	}
	g.Stop() // again: a no-op
}
