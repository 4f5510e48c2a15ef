package dirlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bfs-go/bfs/internal/clock"
)

// fakeStore records the ends of cleanings; answers, if set, decides each
// FinishCleaning in turn (the last one repeats).
type fakeStore struct {
	mu       sync.Mutex
	finished []string // "path epoch truncated"
	calls    int
	answers  []storeAnswer
	listed   []Job
}

type storeAnswer struct {
	unlocked bool
	err      error
}

func (s *fakeStore) FinishCleaning(_ context.Context, j Job, truncated int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := storeAnswer{unlocked: true}
	if len(s.answers) > 0 {
		a = s.answers[min(s.calls, len(s.answers)-1)]
	}
	s.calls++
	if a.err == nil {
		s.finished = append(s.finished, fmt.Sprintf("%s %d %d", j.Path, j.Epoch, truncated))
	}
	return a.unlocked, a.err
}

func (s *fakeStore) Cleanings(context.Context) ([]Job, error) { return s.listed, nil }

func (s *fakeStore) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// ends collects what OnEnd was told.
type ends struct {
	mu  sync.Mutex
	got []string
}

func (e *ends) add(j Job, end End) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, fmt.Sprintf("%s %v %d", j.Path, end.Outcome, end.Truncated))
}

func (e *ends) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

func newTestCleaner(t *testing.T, fc FileCloser, st Store, e *ends) (*Cleaner, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(0, 0))
	c, err := NewCleaner(CleanerConfig{Closer: fc, Store: st, Clock: clk, Concurrency: 2, OnEnd: e.add})
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// TestCleanerDrainsThenFinishes: a cleaning is known (Get) until its files
// are closed and its end is persisted with the bytes they cut; then
// OnEnd hears of it, once.
func TestCleanerDrainsThenFinishes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &fakeCloser{closed: map[uint64]bool{}, block: make(chan struct{})}
		st, e := &fakeStore{}, &ends{}
		c, _ := newTestCleaner(t, fc, st, e)
		defer c.Close()
		if !c.Start(Job{Path: "/t", Dir: 7, Epoch: 3, Reason: "force", Files: []uint64{1, 2, 3}}) {
			t.Fatal("a running Cleaner refused a cleaning")
		}
		synctest.Wait()
		if j, ok := c.Get(7); !ok || j.Path != "/t" || st.callCount() != 0 {
			t.Fatalf("while draining: Get = %v %v, %d ends persisted", j, ok, st.callCount())
		}
		if n := fc.busy(); n != 2 {
			t.Errorf("%d files closed at once, want the Concurrency, 2", n)
		}
		close(fc.block)
		synctest.Wait()
		if _, ok := c.Get(7); ok {
			t.Error("a finished cleaning is still known")
		}
		if want := []string{"/t 3 6"}; !equal(st.finished, want) {
			t.Errorf("persisted %v, want %v", st.finished, want)
		}
		if want := []string{"/t finished 6"}; !equal(e.list(), want) {
			t.Errorf("OnEnd heard %v, want %v", e.list(), want)
		}
	})
}

// TestCleanerRetriesTheEnd: a Store that fails is retried after a backoff
// on the Cleaner's clock, not in a loop; an answer that nothing was left
// to finish is a hand-over; ErrGone and ErrStaleEpoch end the cleaning
// without retries.
func TestCleanerRetriesTheEnd(t *testing.T) {
	busy := errors.New("store busy")
	for _, tc := range []struct {
		name    string
		answers []storeAnswer
		calls   int
		end     string
	}{
		{"busy twice", []storeAnswer{{err: busy}, {err: busy}, {unlocked: true}}, 3, "/t finished 1"},
		{"handed over", []storeAnswer{{unlocked: false}}, 1, "/t handed over 1"},
		{"gone", []storeAnswer{{err: fmt.Errorf("%w: deleted", ErrGone)}}, 1, "/t abandoned 1"},
		{"stale epoch", []storeAnswer{{err: fmt.Errorf("%w: epoch 4", ErrStaleEpoch)}}, 1, "/t abandoned 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fc := &fakeCloser{closed: map[uint64]bool{}}
				st, e := &fakeStore{answers: tc.answers}, &ends{}
				c, clk := newTestCleaner(t, fc, st, e)
				defer c.Close()
				c.Start(Job{Path: "/t", Dir: 7, Epoch: 3, Files: []uint64{1}})
				for i := 1; i < tc.calls; i++ {
					synctest.Wait()
					if st.callCount() != i {
						t.Fatalf("%d attempts before the clock moved, want %d", st.callCount(), i)
					}
					clk.Advance(2 * time.Second) // beyond any backoff
				}
				synctest.Wait()
				if st.callCount() != tc.calls {
					t.Errorf("%d attempts, want %d", st.callCount(), tc.calls)
				}
				if want := []string{tc.end}; !equal(e.list(), want) {
					t.Errorf("OnEnd heard %v, want %v", e.list(), want)
				}
			})
		})
	}
}

// TestCleanerCloseStopsCleanings: Close cuts the drains short and waits
// for them; the cleanings neither end (they resume after the restart) nor
// are new ones taken.
func TestCleanerCloseStopsCleanings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &fakeCloser{closed: map[uint64]bool{}, block: make(chan struct{})}
		st, e := &fakeStore{}, &ends{}
		c, _ := newTestCleaner(t, fc, st, e)
		c.Start(Job{Path: "/t", Dir: 7, Files: []uint64{1, 2, 3}})
		synctest.Wait()
		c.Close()
		if n := fc.busy(); n != 0 {
			t.Errorf("Close returned with %d files still being closed", n)
		}
		if c.Start(Job{Path: "/u", Dir: 8}) {
			t.Error("a closed Cleaner took a cleaning")
		}
		if st.callCount() != 0 || len(e.list()) != 0 {
			t.Errorf("a cleaning cut short ended: persisted %v, OnEnd %v", st.finished, e.list())
		}
	})
}

// TestCleanerResume: the cleanings the Store has in progress are started
// again, and a newer cleaning of a directory is the one Get answers.
func TestCleanerResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &fakeCloser{closed: map[uint64]bool{}, block: make(chan struct{})}
		st := &fakeStore{listed: []Job{
			{Path: "/a", Dir: 1, Epoch: 1, Files: []uint64{10}},
			{Path: "/b", Dir: 2, Epoch: 2, Files: []uint64{20}},
		}}
		e := &ends{}
		c, _ := newTestCleaner(t, fc, st, e)
		defer c.Close()
		n, err := c.Resume(context.Background())
		if err != nil || n != 2 {
			t.Fatalf("Resume = %d, %v", n, err)
		}
		c.Start(Job{Path: "/b", Dir: 2, Epoch: 5, Files: []uint64{21}})
		synctest.Wait()
		if j, _ := c.Get(2); j.Epoch != 5 {
			t.Errorf("Get answers epoch %d, want the newer cleaning's 5", j.Epoch)
		}
		close(fc.block)
		synctest.Wait()
		if len(e.list()) != 3 || fc.closedCount() != 3 {
			t.Errorf("OnEnd heard %v, %d files closed", e.list(), fc.closedCount())
		}
		if _, ok := c.Get(2); ok {
			t.Error("the newer cleaning is still known after both ended")
		}
	})
}
