package nameserver

import "testing"

func TestSafeModeThreshold(t *testing.T) {
	for _, tc := range []struct {
		name      string
		threshold float64
		known     []int64
		reports   [][]int64
		wantOn    []bool // after each report
	}{
		{"empty namespace leaves at once", 0.999, nil, [][]int64{{}}, []bool{false}},
		{"every block needed", 1, []int64{1, 2, 3}, [][]int64{{1}, {1, 2}, {9}, {3}}, []bool{true, true, true, false}},
		{"a share", 0.5, []int64{1, 2, 3, 4}, [][]int64{{1}, {5, 6}, {2}}, []bool{true, true, false}},
		{"unknown ids do not count", 0.999, []int64{1}, [][]int64{{2, 3, 4}}, []bool{true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newSafeMode(tc.threshold, tc.known, 0, func() int { return 0 })
			for i, ids := range tc.reports {
				m.Reported(ids)
				if got := m.On(); got != tc.wantOn[i] {
					t.Fatalf("after report %d (%v): on = %v, want %v", i, ids, got, tc.wantOn[i])
				}
				if st := m.Status(); st.On != m.On() || st.Known != int64(len(tc.known)) {
					t.Fatalf("status %+v disagrees (known %d)", st, len(tc.known))
				}
			}
		})
	}
}

func TestSafeModeLeave(t *testing.T) {
	m := newSafeMode(0.999, []int64{1, 2}, 0, func() int { return 0 })
	m.Reported([]int64{1})
	m.Leave()
	st := m.Status()
	if st.On || m.On() || !st.LeftByOperator || st.Reported != 1 || st.Known != 2 {
		t.Fatalf("after leave: %+v", st)
	}
	m.Reported([]int64{2}) // no effect once over
	if st := m.Status(); st.Reported != 1 {
		t.Fatalf("a report after safe mode changed the counts: %+v", st)
	}
}

// TestSafeModeMinChunkservers: with --safemode-min-chunkservers, safe
// mode also waits until that many chunkservers have sent a full report,
// even when one report covers every block (the others, not heard from
// yet, hold replicas that fsck would call missing meanwhile).
func TestSafeModeMinChunkservers(t *testing.T) {
	servers := 0
	m := newSafeMode(0.999, []int64{1, 2}, 3, func() int { return servers })
	servers = 1
	m.Reported([]int64{1, 2})
	if !m.On() {
		t.Fatal("left safe mode with one chunkserver of three")
	}
	servers = 3
	m.Recheck()
	if st := m.Status(); st.On || st.Servers != 3 || st.MinServers != 3 {
		t.Fatalf("three chunkservers reported every block: %+v", st)
	}
	// An empty namespace waits for the chunkservers too.
	servers = 0
	m = newSafeMode(0.999, nil, 1, func() int { return servers })
	if !m.On() {
		t.Fatal("left safe mode with no chunkserver")
	}
	servers = 1
	m.Recheck()
	if m.On() {
		t.Fatal("still in safe mode")
	}
}
