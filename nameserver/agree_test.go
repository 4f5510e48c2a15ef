package nameserver

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
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

// TestClaimMismatchIsCounted: a close whose replicas hold fewer bytes
// than the writer claimed synced is counted, and closes at the replicas'
// length, not at 0.
func TestClaimMismatchIsCounted(t *testing.T) {
	replicas := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"} // never called: the test reports for them
	cfg := DefaultConfig()
	cfg.DataDir, cfg.MetricsAddr = t.TempDir(), ""
	s, err := New(cfg)
	require.NoError(t, err)
	defer s.Close()
	res, err := s.ns.Apply(&bfspb.Command{Op: &bfspb.Command_Create{Create: &bfspb.CreateCmd{
		Path: "/f", Id: s.ns.AllocIDs(1)[0], SessionId: "w", OpenForWrite: true}}})
	require.NoError(t, err)
	entry := res.Info.EntryId
	block := int64(s.ns.AllocIDs(1)[0])
	for _, cmd := range []*bfspb.Command{
		{Op: &bfspb.Command_AddBlock{AddBlock: &bfspb.AddBlockCmd{Path: "/f", SessionId: "w",
			Block: &bfspb.BlockMeta{Id: block, Version: 1, WriteSet: replicas}}}},
		{Op: &bfspb.Command_SyncBlock{SyncBlock: &bfspb.SyncBlockCmd{Path: "/f", SessionId: "w", BlockId: block, Size: 1000}}},
		{Op: &bfspb.Command_SyncBlock{SyncBlock: &bfspb.SyncBlockCmd{Path: "/f", SessionId: "w", BlockId: block, Size: 1 << 40}}},
	} {
		_, err := s.ns.Apply(cmd)
		require.NoError(t, err)
	}
	require.Zero(t, counterValue(t, s.metrics.claimMismatch))

	f := s.closer.track(entry, false)
	for _, addr := range replicas {
		s.closer.received(addr, block, 1000)
	}
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the file did not close")
	}
	info, err := s.ns.Stat("/f")
	require.NoError(t, err)
	require.Empty(t, info.WriterSession)
	require.EqualValues(t, 1000, info.Size)
	require.Equal(t, replicas, info.Blocks[0].WriteSet, "no replica was dropped")
	require.EqualValues(t, 1, counterValue(t, s.metrics.claimMismatch))
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}
