package nameserver

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestClaimMismatchIsCounted: a close whose replicas hold fewer bytes
// than the writer claimed synced is counted, and closes at the replicas'
// length, not at 0.
func TestClaimMismatchIsCounted(t *testing.T) {
	replicas := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"} // never called: the test reports for them
	cfg := DefaultConfig()
	cfg.DataDir, cfg.MetricsAddr, cfg.Insecure = t.TempDir(), "", true
	s, tm := startLone(t, cfg)
	openSession(t, s, "w")
	res, err := s.propose(&bfspb.Command{Op: &bfspb.Command_Create{Create: &bfspb.CreateCmd{
		Path: "/f", SessionId: "w", OpenForWrite: true}}})
	require.NoError(t, err)
	entry := res.Info.EntryId
	res, err = s.propose(&bfspb.Command{Op: &bfspb.Command_AddBlock{AddBlock: &bfspb.AddBlockCmd{Path: "/f", SessionId: "w",
		Block: &bfspb.BlockMeta{Version: 1, WriteSet: replicas}}}})
	require.NoError(t, err)
	block := res.Info.Blocks[0].Id
	for _, cmd := range []*bfspb.Command{
		{Op: &bfspb.Command_SyncBlock{SyncBlock: &bfspb.SyncBlockCmd{Path: "/f", SessionId: "w", BlockId: block, Size: 1000}}},
		{Op: &bfspb.Command_SyncBlock{SyncBlock: &bfspb.SyncBlockCmd{Path: "/f", SessionId: "w", BlockId: block, Size: 1 << 40}}},
	} {
		_, err := s.propose(cmd)
		require.NoError(t, err)
	}
	require.Zero(t, counterValue(t, s.metrics.claimMismatch))

	done := tm.closer.Await(entry)
	for _, addr := range replicas {
		tm.closer.Received(addr, block, 1000)
	}
	select {
	case <-done:
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
