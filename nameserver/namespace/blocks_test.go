package namespace

import (
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestFileBlocks: the pass over every block and the lookup of one agree,
// with each file's replication and open state.
func TestFileBlocks(t *testing.T) {
	s := open(t, t.TempDir())
	openSessions(t, s, "s1")
	require.NoError(t, mkdir(s, "/d", false))
	newBlock := func(path string, open bool) int64 {
		res, err := apply1(t, s, &bfspb.CreateCmd{Path: path, SessionId: "s1", OpenForWrite: true, Replication: 3})
		require.NoError(t, err)
		entry := res.Info.EntryId
		res, err = apply1(t, s, &bfspb.AddBlockCmd{Path: path, SessionId: "s1", Block: &bfspb.BlockMeta{Version: 1, WriteSet: []string{"a", "b"}}})
		require.NoError(t, err)
		blk := res.Info.Blocks[0]
		if !open {
			_, err = apply1(t, s, &bfspb.CloseFileCmd{Path: path, EntryId: entry, BlockId: blk.Id, BlockSize: 42})
			require.NoError(t, err)
		}
		return blk.Id
	}
	closed := newBlock("/d/closed", false)
	writing := newBlock("/writing", true)
	require.NoError(t, create(s, "/d/empty", false)) // no block

	got := map[int64]FileBlock{}
	require.NoError(t, s.FileBlocks(func(fb FileBlock) error { got[fb.ID] = fb; return nil }))
	require.Len(t, got, 2)
	require.Equal(t, FileBlock{ID: closed, Size: 42, Version: 1, Entry: got[closed].Entry, Replication: 3}, got[closed])
	require.False(t, got[closed].Open)
	require.True(t, got[writing].Open)
	for id, want := range got {
		require.Equal(t, 3, want.Replication)
		fb, err := s.Block(id)
		require.NoError(t, err)
		require.Equal(t, want, fb, "the pass and the lookup agree")
	}
	_, err := s.Block(closed + 1000)
	require.ErrorIs(t, err, ErrNotFound)

	stop := fmt.Errorf("enough")
	n := 0
	require.ErrorIs(t, s.FileBlocks(func(FileBlock) error { n++; return stop }), stop)
	require.Equal(t, 1, n)
}

// BenchmarkFileBlocks times the repair's full pass over a million closed
// files of one block each (the entries are written straight to Pebble).
func BenchmarkFileBlocks(b *testing.B) {
	const files = 1_000_000
	s := open(b, b.TempDir())
	ids := seedIDs(b, s, 2*files)
	for i := 0; i < files; i += 10_000 {
		batch := s.db.NewBatch()
		for j := i; j < min(i+10_000, files); j++ {
			info := &bfspb.FileInfo{EntryId: ids[2*j], ParentId: RootID, Name: fmt.Sprintf("f%07d", j),
				Type: bfspb.FileType_FILE_TYPE_FILE, Replication: 3,
				Blocks: []*bfspb.BlockMeta{{Id: int64(ids[2*j+1]), Size: 1 << 20, Version: 1, WriteSet: []string{"10.0.0.1:8830", "10.0.0.2:8830", "10.0.0.3:8830"}}}}
			require.NoError(b, putEntry(batch, info))
			require.NoError(b, batch.Set(blockKey(int64(ids[2*j+1])), encodeUint64(info.EntryId), nil))
		}
		require.NoError(b, batch.Commit(pebble.NoSync))
		batch.Close()
	}
	// Settled, as a nameserver's store is most of the time: no
	// compaction of the fill competes with the pass.
	require.NoError(b, s.db.Flush())
	require.NoError(b, s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true))
	b.ResetTimer()
	for b.Loop() {
		n := 0
		require.NoError(b, s.FileBlocks(func(FileBlock) error { n++; return nil }))
		require.Equal(b, files, n)
	}
}
