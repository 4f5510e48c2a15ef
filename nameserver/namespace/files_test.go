package namespace

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
)

func TestOpenFileLifecycle(t *testing.T) {
	s := open(t, t.TempDir())
	openSessions(t, s, "s1", "s2")
	require.NoError(t, mkdir(s, "/d", false))
	res, err := apply1(t, s, &bfspb.CreateCmd{Path: "/d/f", SessionId: "s1", OpenForWrite: true})
	require.NoError(t, err)
	id := res.Info.EntryId

	open, err := s.OpenFiles("s1")
	require.NoError(t, err)
	require.Equal(t, []OpenFile{{Session: "s1", EntryID: id}}, open)
	none, err := s.OpenFiles("s2")
	require.NoError(t, err)
	require.Empty(t, none)

	_, err = apply1(t, s, &bfspb.AddBlockCmd{Path: "/d/f", SessionId: "s2", Block: &bfspb.BlockMeta{WriteSet: []string{"a", "b", "c"}}})
	require.ErrorIs(t, err, ErrNotOpen, "another session cannot add a block")
	res, err = apply1(t, s, &bfspb.AddBlockCmd{Path: "/d/f", SessionId: "s1", Block: &bfspb.BlockMeta{WriteSet: []string{"a", "b", "c"}}})
	require.NoError(t, err)
	blk := res.Info.Blocks[0]
	require.Equal(t, int64(id)+1, blk.Id, "the block's id is the next one")
	require.Equal(t, []string{"a", "b", "c"}, blk.WriteSet)
	// A retried AddBlock keeps the first block, and takes no id.
	res, err = apply1(t, s, &bfspb.AddBlockCmd{Path: "/d/f", SessionId: "s1",
		Block: &bfspb.BlockMeta{WriteSet: []string{"x"}}})
	require.NoError(t, err)
	require.Len(t, res.Info.Blocks, 1)
	require.Equal(t, blk.Id, res.Info.Blocks[0].Id)
	require.Equal(t, uint64(blk.Id), s.lastID.Load())
	owner, err := s.BlockOwner(blk.Id)
	require.NoError(t, err)
	require.Equal(t, id, owner)

	_, err = apply1(t, s, &bfspb.SyncBlockCmd{Path: "/d/f", SessionId: "s1", BlockId: blk.Id, Size: 100, Dropped: []string{"b"}})
	require.NoError(t, err)
	info, err := s.Stat("/d/f")
	require.NoError(t, err)
	require.EqualValues(t, 100, info.Size)
	require.Equal(t, []string{"a", "c"}, info.Blocks[0].WriteSet)

	// Renaming keeps the file findable by id.
	require.NoError(t, mkdir(s, "/e", false))
	require.NoError(t, rename(s, "/d", "/e/d2"))
	path, got, err := s.PathOf(id)
	require.NoError(t, err)
	require.Equal(t, "/e/d2/f", path)
	require.Equal(t, "s1", got.WriterSession)

	_, err = apply1(t, s, &bfspb.CloseFileCmd{Path: "/e/d2/f", EntryId: id + 1000, BlockSize: 90})
	require.ErrorIs(t, err, ErrNotFound, "close names the entry it means")
	_, err = apply1(t, s, &bfspb.CloseFileCmd{Path: "/e/d2/f", EntryId: id, BlockSize: 90})
	require.ErrorIs(t, err, ErrBlockChanged, "a close decided before the file had a block does not close it")
	res, err = apply1(t, s, &bfspb.CloseFileCmd{Path: "/e/d2/f", EntryId: id, BlockId: blk.Id, BlockSize: 90})
	require.NoError(t, err)
	require.Empty(t, res.Info.WriterSession)
	require.EqualValues(t, 90, res.Info.Size)
	open, err = s.OpenFiles("")
	require.NoError(t, err)
	require.Empty(t, open)
	_, err = apply1(t, s, &bfspb.SyncBlockCmd{Path: "/e/d2/f", SessionId: "s1", BlockId: blk.Id, Size: 100})
	require.ErrorIs(t, err, ErrNotOpen, "a closed file takes no more syncs")

	require.NoError(t, rmdir(s, "/e", true))
	_, err = s.BlockOwner(blk.Id)
	require.ErrorIs(t, err, ErrNotFound)
	_, _, err = s.PathOf(id)
	require.ErrorIs(t, err, ErrNotFound)
}

func TestDeleteOpenFileClearsIndex(t *testing.T) {
	s := open(t, t.TempDir())
	openSessions(t, s, "s1")
	_, err := apply1(t, s, &bfspb.CreateCmd{Path: "/f", SessionId: "s1", OpenForWrite: true})
	require.NoError(t, err)
	// Overwriting an open file drops it from the open-file index.
	_, err = apply1(t, s, &bfspb.CreateCmd{Path: "/f", Overwrite: true})
	require.NoError(t, err)
	open, err := s.OpenFiles("")
	require.NoError(t, err)
	require.Empty(t, open)
	_, err = apply1(t, s, &bfspb.CreateCmd{Path: "/g", OpenForWrite: true})
	require.ErrorIs(t, err, ErrInvalid, "open for write needs a session")
}
