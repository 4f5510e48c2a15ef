package nameserver

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestCloseStartsOverWhenABlockIsAdded: lease recovery looks at a file
// that has no block yet and decides its close at once, but the writer's
// AddBlock (checked before its session ended) commits in between. The
// close must not be persisted over the new block, leaving it unsealed
// and writable forever: it starts over, seals the new block, agrees on
// its length, and only then are the first close's waiters woken.
func TestCloseStartsOverWhenABlockIsAdded(t *testing.T) {
	const replica = "127.0.0.1:1" // never answers: the test reports for it
	var s *Server
	var once sync.Once
	var block int64
	added := make(chan error, 1)
	cfg := DefaultConfig()
	cfg.DataDir, cfg.MetricsAddr = t.TempDir(), ""
	cfg.TestingKnobs.BeforeClose = func(uint64) {
		once.Do(func() {
			block = int64(s.ns.AllocIDs(1)[0])
			_, err := s.ns.Apply(&bfspb.Command{Op: &bfspb.Command_AddBlock{AddBlock: &bfspb.AddBlockCmd{
				Path: "/f", SessionId: "gone", Block: &bfspb.BlockMeta{Id: block, WriteSet: []string{replica}}}}})
			added <- err
		})
	}
	s, err := New(cfg)
	require.NoError(t, err)
	defer s.Close()
	res, err := s.ns.Apply(&bfspb.Command{Op: &bfspb.Command_Create{Create: &bfspb.CreateCmd{
		Path: "/f", Id: s.ns.AllocIDs(1)[0], SessionId: "gone", OpenForWrite: true}}})
	require.NoError(t, err)
	entry := res.Info.EntryId

	f := s.closer.track(entry, true)
	require.NoError(t, <-added)
	require.Eventually(t, func() bool { return len(s.closer.pending()[entry]) == 1 }, 10*time.Second, time.Millisecond,
		"the close did not start over, waiting for the new block's replica")
	select {
	case <-f.done:
		t.Fatal("the file was closed before its new block was sealed")
	default:
	}
	s.closer.received(replica, block, 10)
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the first close's waiters were not woken when the file closed")
	}
	info, err := s.ns.Stat("/f")
	require.NoError(t, err)
	require.Empty(t, info.WriterSession)
	require.Equal(t, block, info.Blocks[0].Id)
	require.EqualValues(t, 10, info.Size)
}
