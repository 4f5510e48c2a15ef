package namespace

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
)

func TestOperations(t *testing.T) {
	s := open(t, t.TempDir())
	// Each step runs on the state the previous ones left.
	steps := []struct {
		name string
		do   func() error
		want error
	}{
		{"mkdir", func() error { return mkdir(s, "/a", false) }, nil},
		{"mkdir again", func() error { return mkdir(s, "/a", false) }, ErrExists},
		{"mkdir -p existing", func() error { return mkdir(s, "/a", true) }, nil},
		{"mkdir missing parent", func() error { return mkdir(s, "/x/y", false) }, ErrNotFound},
		{"mkdir -p deep", func() error { return mkdir(s, "/a/b/c/d", true) }, nil},
		{"mkdir root", func() error { return mkdir(s, "/", false) }, ErrExists},
		{"create", func() error { return create(s, "/a/f", false) }, nil},
		{"create exclusive", func() error { return create(s, "/a/f", false) }, ErrExists},
		{"create overwrite", func() error { return create(s, "/a/f", true) }, nil},
		{"create over dir", func() error { return create(s, "/a/b", true) }, ErrIsDirectory},
		{"create under file", func() error { return create(s, "/a/f/g", false) }, ErrNotDirectory},
		{"create missing parent", func() error { return create(s, "/nope/f", false) }, ErrNotFound},
		{"mkdir -p through file", func() error { return mkdir(s, "/a/f/x", true) }, ErrNotDirectory},
		{"mkdir over file", func() error { return mkdir(s, "/a/f", false) }, ErrExists},
		{"delete dir as file", func() error { return del(s, "/a/b") }, ErrIsDirectory},
		{"rmdir non-empty", func() error { return rmdir(s, "/a/b", false) }, ErrNotEmpty},
		{"rmdir file", func() error { return rmdir(s, "/a/f", false) }, ErrNotDirectory},
		{"rmdir root", func() error { return rmdir(s, "/", true) }, ErrInvalid},
		{"rename into own subtree", func() error { return rename(s, "/a", "/a/b/c/z") }, ErrInvalid},
		{"rename over dir", func() error { return rename(s, "/a/f", "/a/b") }, ErrExists},
		{"rename missing", func() error { return rename(s, "/zz", "/yy") }, ErrNotFound},
		{"rename to missing parent", func() error { return rename(s, "/a/f", "/q/f") }, ErrNotFound},
		{"rename dir", func() error { return rename(s, "/a/b", "/b") }, nil},
		{"delete file", func() error { return del(s, "/a/f") }, nil},
		{"delete missing", func() error { return del(s, "/a/f") }, ErrNotFound},
		{"rmdir recursive", func() error { return rmdir(s, "/b", true) }, nil},
		{"rmdir empty", func() error { return rmdir(s, "/a", false) }, nil},
	}
	for _, st := range steps {
		err := st.do()
		if st.want == nil {
			require.NoError(t, err, st.name)
		} else {
			require.ErrorIs(t, err, st.want, st.name)
		}
	}
	require.Empty(t, names(t, s, "/"))
}

func TestRenameDirectoryMovesSubtree(t *testing.T) {
	s := open(t, t.TempDir())
	require.NoError(t, mkdir(s, "/a/b/c", true))
	require.NoError(t, create(s, "/a/b/c/f", false))
	require.NoError(t, mkdir(s, "/z", false))
	require.NoError(t, rename(s, "/a/b", "/z/b2"))
	info, err := s.Stat("/z/b2/c/f")
	require.NoError(t, err)
	require.Equal(t, "f", info.Name)
	_, err = s.Stat("/a/b")
	require.ErrorIs(t, err, ErrNotFound)
	// A file renamed over a file replaces it.
	require.NoError(t, create(s, "/z/g", false))
	require.NoError(t, rename(s, "/z/g", "/z/b2/c/f"))
	require.Equal(t, []string{"f"}, names(t, s, "/z/b2/c"))
	require.Equal(t, []string{"b2"}, names(t, s, "/z"))
}

func TestChmodAndUsage(t *testing.T) {
	s := open(t, t.TempDir())
	require.NoError(t, mkdir(s, "/d/e", true))
	require.NoError(t, create(s, "/d/f", false))
	_, err := s.apply(cmdOf(1, &bfspb.ChmodCmd{Path: "/d/f", Mode: 0o600}))
	require.NoError(t, err)
	info, err := s.Stat("/d/f")
	require.NoError(t, err)
	require.EqualValues(t, 0o600, info.Mode)
	_, err = s.apply(cmdOf(1, &bfspb.ChmodCmd{Path: "/d/f", Mode: 0o17777}))
	require.ErrorIs(t, err, ErrInvalid)
	u, err := s.DiskUsage("/d")
	require.NoError(t, err)
	require.Equal(t, Usage{Files: 1, Dirs: 2}, u)
}

func TestListPaging(t *testing.T) {
	s := open(t, t.TempDir())
	require.NoError(t, mkdir(s, "/d", false))
	for i := range 25 {
		require.NoError(t, create(s, fmt.Sprintf("/d/f%02d", i), false))
	}
	var got []string
	after := ""
	for {
		page, more, err := s.List("/d", after, 10)
		require.NoError(t, err)
		for _, e := range page {
			got = append(got, e.Name)
		}
		if !more {
			break
		}
		after = page[len(page)-1].Name
	}
	require.Len(t, got, 25)
	require.Equal(t, "f00", got[0])
	require.Equal(t, "f24", got[24])
	_, _, err := s.List("/d", "", MaxListLimit+1)
	require.ErrorIs(t, err, ErrInvalid)
	_, _, err = s.List("/d/f00", "", 0)
	require.ErrorIs(t, err, ErrNotDirectory)
}

func TestBadInput(t *testing.T) {
	s := open(t, t.TempDir())
	for _, p := range []string{"", "rel", "/a/../b", "/a\x00"} {
		_, err := s.Stat(p)
		require.ErrorIs(t, err, ErrInvalid, p)
		_, _, err = s.List(p, "", 0)
		require.ErrorIs(t, err, ErrInvalid, p)
	}
	// Commands with paths that are not normalized never reach apply.
	_, err := s.apply(cmdOf(1, &bfspb.MkdirCmd{Path: "/a//b"}))
	require.ErrorIs(t, err, ErrInvalid)
	_, err = s.apply(&bfspb.Command{})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = s.apply(cmdOf(1, &bfspb.CreateCmd{Path: "/a", Replication: 99}))
	require.ErrorIs(t, err, ErrInvalid)
	// Ids are the store's to assign: a block that comes with one is refused.
	openSessions(t, s, "s1")
	_, err = s.apply(cmdOf(1, &bfspb.CreateCmd{Path: "/f", SessionId: "s1", OpenForWrite: true}))
	require.NoError(t, err)
	_, err = s.apply(cmdOf(1, &bfspb.AddBlockCmd{Path: "/f", SessionId: "s1", Block: &bfspb.BlockMeta{Id: 50, WriteSet: []string{"a"}}}))
	require.ErrorIs(t, err, ErrInvalid)
	_, err = s.apply(cmdOf(1, &bfspb.LockDirCmd{Path: "/", SessionId: "s1", Holder: "ops", Operator: true}))
	require.ErrorIs(t, err, ErrInvalid, "an operator lock bound to a session")
	_, err = s.apply(cmdOf(1, &bfspb.LockDirCmd{Path: "/", Holder: "ops"}))
	require.ErrorIs(t, err, ErrInvalid, "a lock for no session")
	require.Empty(t, s.Locks().List("/", false, 0))
}

func TestReopenKeepsStateAndIDs(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, format(s))
	require.NoError(t, mkdir(s, "/a/b", true))
	require.NoError(t, create(s, "/a/b/f", false))
	info, err := s.Stat("/a/b/f")
	require.NoError(t, err)
	require.NoError(t, create(s, "/a/b/gone", false))
	gone, err := s.Stat("/a/b/gone")
	require.NoError(t, err)
	require.NoError(t, del(s, "/a/b/gone"))
	openSessions(t, s, "s1")
	applied := s.AppliedIndex()
	require.NoError(t, s.Close())

	s = open(t, dir)
	require.Equal(t, applied, s.AppliedIndex())
	got, err := s.Stat("/a/b/f")
	require.NoError(t, err)
	require.Equal(t, info.EntryId, got.EntryId)
	res, err := s.apply(cmdOf(1, &bfspb.CreateCmd{Path: "/a/b/new"}))
	require.NoError(t, err)
	require.Equal(t, gone.EntryId+1, res.Info.EntryId, "ids are never reused, not even those of deleted entries")
	sessions, err := s.Sessions()
	require.NoError(t, err)
	require.Len(t, sessions, 1)
	require.Equal(t, "h-s1", sessions[0].Holder)
}
