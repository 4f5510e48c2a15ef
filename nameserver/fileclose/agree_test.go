package fileclose

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAgree: the closed length comes from what the replicas of the write
// set (a, b, c) reported; the writer's claim only chooses the rule, and
// never makes a replica holding the claimed bytes lose any.
func TestAgree(t *testing.T) {
	for _, tc := range []struct {
		name     string
		claim    int64
		reports  map[string]int64 // absent: did not report
		size     int64
		dropped  []string
		mismatch bool
	}{
		{"consistent: the shortest", 1000, map[string]int64{"a": 1000, "b": 1200, "c": 1100}, 1000, nil, false},
		{"consistent, nothing written", 0, map[string]int64{"a": 0, "b": 0, "c": 0}, 0, nil, false},
		{"consistent, one did not report", 1000, map[string]int64{"a": 1200, "b": 1100}, 1100, []string{"c"}, false},
		{"one short of the claim is dropped", 1000, map[string]int64{"a": 900, "b": 1200, "c": 1100}, 1100, []string{"a"}, true},
		{"two short of the claim", 1000, map[string]int64{"a": 900, "b": 1200, "c": 0}, 1200, []string{"a", "c"}, true},
		{"none reaches the claim, three: the second longest", 1 << 40, map[string]int64{"a": 1500, "b": 1000, "c": 500}, 1000, []string{"c"}, true},
		{"none reaches the claim, all equal", 1 << 40, map[string]int64{"a": 1000, "b": 1000, "c": 1000}, 1000, nil, true},
		{"none reaches the claim, two: the shorter", 4096, map[string]int64{"a": 1000, "c": 500}, 500, []string{"b"}, true},
		{"none reaches the claim, one: its own", 4096, map[string]int64{"b": 100}, 100, []string{"a", "c"}, true},
		{"no report", 100, map[string]int64{}, 0, []string{"a", "b", "c"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &closing{block: 1, synced: tc.claim, writeSet: []string{"a", "b", "c"}, reports: tc.reports}
			size, dropped, mismatch := f.agree()
			require.Equal(t, tc.size, size)
			require.Equal(t, tc.dropped, dropped)
			require.Equal(t, tc.mismatch, mismatch)
		})
	}
}
