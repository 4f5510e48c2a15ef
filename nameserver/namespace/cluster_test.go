package namespace

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
)

func TestClusterIDKeptAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, format(s))
	id := s.ClusterID()
	require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{32}$`), id)
	require.NoError(t, s.Close())

	s = open(t, dir)
	require.Equal(t, id, s.ClusterID(), "after a reopen")
	other := open(t, t.TempDir())
	require.NotEqual(t, id, other.ClusterID(), "two formatted stores share a cluster id")
}

// TestNewStoreIsEmptyUntilFormatted: a new store has no root and no
// cluster id; nothing applies in it but a format (and what needs no
// tree); the format makes both, and a format of a formatted store
// changes nothing, whatever id it carries.
func TestNewStoreIsEmptyUntilFormatted(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	require.False(t, s.Formatted())
	require.Empty(t, s.ClusterID())
	_, err = s.Stat("/")
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, mkdir(s, "/a", true), ErrNotFormatted)
	require.ErrorIs(t, mkdir(s, "/a/b", true), ErrNotFormatted)
	require.ErrorIs(t, lockOperator(s, "/"), ErrNotFormatted)
	require.ErrorIs(t, create(s, "/f", false), ErrNotFormatted)
	require.Empty(t, dump(t, s), "a refused command wrote nothing")
	_, err = s.apply(cmdOf(1, &bfspb.FormatCmd{}))
	require.ErrorIs(t, err, ErrInvalid, "a format without a cluster id")

	res, err := s.apply(cmdOf(3, &bfspb.FormatCmd{ClusterId: "c1"}))
	require.NoError(t, err)
	require.Equal(t, RootID, res.Info.EntryId)
	require.True(t, s.Formatted())
	require.Equal(t, "c1", s.ClusterID())
	root := mustStat(t, s, "/")
	require.Equal(t, bfspb.FileType_FILE_TYPE_DIR, root.Type)
	require.EqualValues(t, 3, root.CtimeNs, "the root's time is the command's")
	require.NoError(t, mkdir(s, "/a", false))
	before := withoutApplied(dump(t, s))

	res, err = s.apply(cmdOf(4, &bfspb.FormatCmd{ClusterId: "c2"}))
	require.NoError(t, err, "a format applied again (a replayed log) is no error")
	require.Equal(t, root.CtimeNs, res.Info.CtimeNs)
	require.Equal(t, "c1", s.ClusterID())
	require.Empty(t, diffState(before, withoutApplied(dump(t, s))), "a second format changed the state")
	require.NoError(t, s.Close())

	s = open(t, dir)
	require.Equal(t, "c1", s.ClusterID())
	require.Equal(t, []string{"a"}, names(t, s, "/"))
}

// TestCreateBeforeFormat: a create in the root of a store not yet
// formatted must fail like a mkdir there, not store an entry under a
// root that does not exist.
func TestCreateBeforeFormat(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir()})
	require.NoError(t, err)
	defer s.Close()
	require.ErrorIs(t, create(s, "/f", false), ErrNotFormatted)
	require.Empty(t, dump(t, s), "a refused command wrote nothing")
}

// TestFormatGivesALegacyStoreItsClusterID: a store formatted before
// cluster ids existed (a root, entries, no id) keeps everything and gets
// the id of the first FormatCmd.
func TestFormatGivesALegacyStoreItsClusterID(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	b := s.db.NewBatch()
	root := &bfspb.FileInfo{EntryId: RootID, Type: bfspb.FileType_FILE_TYPE_DIR, Mode: DefaultDirMode, CtimeNs: 11, MtimeNs: 11}
	require.NoError(t, putInfo(b, entryKey(rootParentID, ""), root))
	require.NoError(t, putEntry(b, newEntry(RootID, "old", firstID, bfspb.FileType_FILE_TYPE_DIR, DefaultDirMode, 11)))
	// Stores written before the counters were set at apply max-merged
	// every entry's id into the counter.
	require.NoError(t, b.Merge(keyNextID, encodeUint64(firstID), nil))
	require.NoError(t, b.Commit(pebble.Sync))
	require.NoError(t, b.Close())
	require.NoError(t, s.Close())

	s, err = Open(Options{Dir: dir})
	require.NoError(t, err)
	defer s.Close()
	require.False(t, s.Formatted(), "a root without a cluster id")
	require.Equal(t, []string{"old"}, names(t, s, "/"))
	before := dump(t, s)

	_, err = s.apply(cmdOf(20, &bfspb.FormatCmd{ClusterId: "legacy"}))
	require.NoError(t, err)
	require.True(t, s.Formatted())
	require.Equal(t, "legacy", s.ClusterID())
	require.EqualValues(t, 11, mustStat(t, s, "/").CtimeNs, "the root was kept")
	// What the format added: the id and the applied index, nothing else.
	var added []string
	after := dump(t, s)
	for _, e := range after {
		if !containsKey(before, e.k) {
			added = append(added, string(e.k))
		}
	}
	require.ElementsMatch(t, []string{string(keyClusterID), string(keyApplied)}, added)
	require.Len(t, after, len(before)+2)

	res, err := s.apply(cmdOf(21, &bfspb.MkdirCmd{Path: "/new"}))
	require.NoError(t, err)
	require.Equal(t, firstID+1, res.Info.EntryId, "ids go on from the legacy store's counter")
}

func containsKey(kvs []kv, k []byte) bool {
	for _, e := range kvs {
		if bytes.Equal(e.k, k) {
			return true
		}
	}
	return false
}

// withoutApplied is a dump without the applied index (which every
// command that applies moves).
func withoutApplied(kvs []kv) []kv {
	var out []kv
	for _, e := range kvs {
		if !bytes.Equal(e.k, keyApplied) {
			out = append(out, e)
		}
	}
	return out
}

// TestFateUnknownAboveCounter: an id the store handed out and no file
// holds as a block is gone; one above every id handed out is unknown.
func TestFateUnknownAboveCounter(t *testing.T) {
	s := open(t, t.TempDir())
	openSessions(t, s, "s1")
	require.NoError(t, mkdir(s, "/d", false))
	blockOf := func(path string) int64 {
		_, err := s.apply(cmdOf(1, &bfspb.CreateCmd{Path: path, SessionId: "s1", OpenForWrite: true}))
		require.NoError(t, err)
		res, err := s.apply(cmdOf(1, &bfspb.AddBlockCmd{Path: path, SessionId: "s1", Block: &bfspb.BlockMeta{WriteSet: []string{"a"}}}))
		require.NoError(t, err)
		return res.Info.Blocks[0].Id
	}
	gone, live := blockOf("/d/gone"), blockOf("/d/live")
	require.NoError(t, del(s, "/d/gone"))
	dirID := int64(mustStat(t, s, "/d").EntryId)
	for _, tc := range []struct {
		id   int64
		want BlockFate
	}{
		{gone, BlockGone},
		{dirID, BlockGone}, // an entry's id, never a block's
		{live, BlockLive},
		{live + 1, BlockUnknown},
		{1 << 40, BlockUnknown},
		{0, BlockUnknown},
	} {
		got, err := s.Fate(tc.id)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "Fate(%d)", tc.id)
	}
}
