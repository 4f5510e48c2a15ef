package e2e

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/bfs-go/bfs/cluster/e2e/tablet"
)

// tabletProc is a tablet server process and the events it has reported.
type tabletProc struct {
	*process
	t  *testing.T
	mu struct {
		sync.Mutex
		events []tablet.Event
		// changed is closed (and replaced) when an event arrives.
		changed chan struct{}
	}
}

// startTablet runs the tabletserver program against the nameservers of
// c (a cluster or a group) with the given flags.
func startTablet(t *testing.T, c interface{ nameservers() string }, name string, args ...string) *tabletProc {
	t.Helper()
	tp := &tabletProc{t: t}
	tp.mu.changed = make(chan struct{})
	args = append([]string{"--nameserver", c.nameservers()}, args...)
	tp.process = startProcess(t, name, tabletBin, args, tp.onLine)
	return tp
}

func (tp *tabletProc) onLine(line string) {
	var e tablet.Event
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		tp.t.Errorf("%s printed a line that is no event: %q: %v", tp.name, line, err)
		return
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.mu.events = append(tp.mu.events, e)
	close(tp.mu.changed)
	tp.mu.changed = make(chan struct{})
}

// events returns the events reported so far.
func (tp *tabletProc) events() []tablet.Event {
	evs, _ := tp.watch()
	return evs
}

// watch returns the events reported so far and a channel closed at the
// next one.
func (tp *tabletProc) watch() ([]tablet.Event, <-chan struct{}) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]tablet.Event(nil), tp.mu.events...), tp.mu.changed
}

// waitEvents waits up to d until cond holds of the events reported, and
// returns them. A fatal event, or the process exiting first, fails the
// test.
func (tp *tabletProc) waitEvents(d time.Duration, what string, cond func([]tablet.Event) bool) []tablet.Event {
	tp.t.Helper()
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		evs, changed := tp.watch()
		if cond(evs) {
			return evs
		}
		if n := len(evs); n > 0 && evs[n-1].Kind == tablet.KindFatal {
			tp.t.Fatalf("%s failed while the test waited for %s: %s", tp.name, what, evs[n-1].Err)
		}
		select {
		case <-changed:
		case <-tp.done:
			if evs := tp.events(); cond(evs) {
				return evs
			}
			tp.t.Fatalf("%s exited (%v) before %s", tp.name, tp.cmd.ProcessState, what)
		case <-timeout.C:
			tp.t.Fatalf("timed out after %v waiting for %s to report %s", d, tp.name, what)
		}
	}
}

// kindOf returns the events of one kind.
func kindOf(evs []tablet.Event, kind string) []tablet.Event {
	var out []tablet.Event
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// lockEpochs maps each directory the tablet server locked to the epoch.
func lockEpochs(evs []tablet.Event) map[string]uint64 {
	out := map[string]uint64{}
	for _, e := range kindOf(evs, tablet.KindLocked) {
		out[e.Path] = e.Epoch
	}
	return out
}

// openedFiles returns the files the tablet server opened, with their
// blocks and replicas.
func openedFiles(evs []tablet.Event) []tablet.Event {
	return kindOf(evs, tablet.KindOpened)
}

// syncedBytes maps each file to the largest offset the tablet server
// reported synced.
func syncedBytes(evs []tablet.Event) map[string]int64 {
	out := map[string]int64{}
	for _, e := range evs {
		if e.Kind == tablet.KindOp && e.Op == tablet.OpAppend && e.OK {
			out[e.Path] = max(out[e.Path], e.Synced)
		}
	}
	return out
}

// appendsPerFile counts the accepted appends to each file.
func appendsPerFile(evs []tablet.Event) map[string]int {
	out := map[string]int{}
	for _, e := range evs {
		if e.Kind == tablet.KindOp && e.Op == tablet.OpAppend && e.OK {
			out[e.Path]++
		}
	}
	return out
}
