package blockmap

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// The scale figures (see BUILD.md, "Benchmarks"): run at a million
// blocks with
//
//	BFS_BLOCKMAP_BLOCKS=1000000 go test ./nameserver/blockmap -run 'TestMemoryPerBlock|TestReportLockHold' -v
//
// By default they run at a few thousand blocks, which checks the code
// path but measures nothing worth reading.
func scaleBlocks(t *testing.T) int {
	s := os.Getenv("BFS_BLOCKMAP_BLOCKS")
	if s == "" {
		return 3 * batch
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("BFS_BLOCKMAP_BLOCKS=%q: want a positive number", s)
	}
	return n
}

// fill registers servers 0..k-1 and has each report blocks 1..n.
func fill(m *Map, k, n int) []ServerID {
	ids := make([]ServerID, k)
	for i := range ids {
		addr := fmt.Sprintf("10.0.0.%d:7000", i)
		ids[i] = m.Register(addr, Usage{}, t0)
		report := make(map[BlockID]Replica, n)
		for b := 1; b <= n; b++ {
			report[BlockID(b)] = Replica{Size: 64 << 20, Version: 1, Sealed: true}
		}
		m.Report(ids[i], addr, report, t0)
	}
	return ids
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemoryPerBlock reports the heap a block with three replicas takes.
func TestMemoryPerBlock(t *testing.T) {
	n := scaleBlocks(t)
	before := heapInUse()
	m := New(t0)
	fill(m, 3, n)
	after := heapInUse()
	per := float64(after-before) / float64(n)
	t.Logf("%d blocks, 3 replicas each: %.1f MiB in use, %.1f B/block", n, float64(after-before)/(1<<20), per)
	if n >= 1000000 && per > 200 {
		t.Errorf("%.1f B/block, want at most 200", per)
	}
	runtime.KeepAlive(m)
}

// TestReportLockHold reports the longest hold of the map's mutex during
// a full report of n blocks by one of three chunkservers holding n blocks
// each, half of them new (so the other half is swept), in two pages,
// then during a Held and the expiry of the chunkservers. Received calls
// run beside the last page and must all land.
func TestReportLockHold(t *testing.T) {
	n := scaleBlocks(t)
	m := New(t0)
	ids := fill(m, 3, n)
	addr := "10.0.0.0:7000"
	// Two pages: the blocks n/2+1 .. n, then n+1 .. n+n/2.
	pages := []map[BlockID]Replica{make(map[BlockID]Replica, n/2), make(map[BlockID]Replica, n/2)}
	for b := n/2 + 1; b <= n+n/2; b++ {
		pages[(b-1)/n][BlockID(b)] = Replica{Size: 1, Version: 2}
	}
	measureHolds(m)
	start := time.Now()
	if _, err := m.ReportPage(ids[0], addr, Page{Report: 1, More: true}, pages[0], t0); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b := 1; b <= 100; b++ {
			m.Received(ids[0], addr, map[BlockID]Replica{BlockID(-b): {Sealed: true}})
		}
	}()
	if _, err := m.ReportPage(ids[0], addr, Page{Report: 1, Seq: 1}, pages[1], t0); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	<-done
	reportHold := longestHold(m)
	if got, want := len(m.Held(addr)), n+100; got != want {
		t.Fatalf("after the report %s holds %d blocks, want %d (the report's and every received one)", addr, got, want)
	}
	heldHold := longestHold(m)
	// A heartbeat that reports the volume of another server's replicas
	// failed: they go at once, the sweep frees them a batch at a time.
	if !m.Heartbeat(ids[1], "10.0.0.1:7000", Usage{Volumes: []Volume{{Index: 0, State: VolumeFailed}}}, t0) {
		t.Fatal("heartbeat refused")
	}
	if got := len(m.Held("10.0.0.1:7000")); got != 0 {
		t.Fatalf("%d replicas of the failed volume left", got)
	}
	failedHold := longestHold(m)
	m.Expire(t0.Add(time.Hour), time.Minute)
	t.Logf("report of %d blocks: %v in all, longest mutex hold %v; with Held: %v; with a volume of %d blocks failed: %v; with the expiry of 3 servers: %v",
		n, took.Round(time.Millisecond), reportHold, heldHold, n, failedHold, longestHold(m))
}

// measureHolds starts measuring m's mutex holds afresh.
func measureHolds(m *Map) {
	m.mu.Lock()
	m.mu.holds = holdMeter{on: true, since: time.Now()}
	m.unlock()
}

// longestHold returns the longest hold since measureHolds.
func longestHold(m *Map) time.Duration {
	m.lock()
	defer m.unlock()
	return m.mu.holds.max
}
