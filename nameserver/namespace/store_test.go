package namespace

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func mkdir(s *Store, path string, parents bool) error {
	_, err := s.Apply(&bfspb.Command{TimeNs: 1, Op: &bfspb.Command_Mkdir{Mkdir: &bfspb.MkdirCmd{
		Path: path, Parents: parents, Ids: s.AllocIDs(len(ancestors(path)) + 1)}}})
	return err
}

func create(s *Store, path string, overwrite bool) error {
	_, err := s.Apply(&bfspb.Command{TimeNs: 1, Op: &bfspb.Command_Create{Create: &bfspb.CreateCmd{
		Path: path, Overwrite: overwrite, Id: s.AllocIDs(1)[0]}}})
	return err
}

func del(s *Store, path string) error {
	_, err := s.Apply(&bfspb.Command{Op: &bfspb.Command_DeleteFile{DeleteFile: &bfspb.DeleteFileCmd{Path: path}}})
	return err
}

func rmdir(s *Store, path string, recursive bool) error {
	_, err := s.Apply(&bfspb.Command{Op: &bfspb.Command_DeleteDir{DeleteDir: &bfspb.DeleteDirCmd{Path: path, Recursive: recursive}}})
	return err
}

func rename(s *Store, src, dst string) error {
	_, err := s.Apply(&bfspb.Command{Op: &bfspb.Command_Rename{Rename: &bfspb.RenameCmd{Src: src, Dst: dst}}})
	return err
}

func names(t *testing.T, s *Store, dir string) []string {
	t.Helper()
	entries, _, err := s.List(dir, "", 0)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name)
	}
	return out
}

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
	_, err := s.Apply(&bfspb.Command{Op: &bfspb.Command_Chmod{Chmod: &bfspb.ChmodCmd{Path: "/d/f", Mode: 0o600}}})
	require.NoError(t, err)
	info, err := s.Stat("/d/f")
	require.NoError(t, err)
	require.EqualValues(t, 0o600, info.Mode)
	_, err = s.Apply(&bfspb.Command{Op: &bfspb.Command_Chmod{Chmod: &bfspb.ChmodCmd{Path: "/d/f", Mode: 0o17777}}})
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
	_, err := s.Apply(&bfspb.Command{Op: &bfspb.Command_Mkdir{Mkdir: &bfspb.MkdirCmd{Path: "/a//b", Ids: []uint64{100}}}})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = s.Apply(&bfspb.Command{})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = s.Apply(&bfspb.Command{Op: &bfspb.Command_Mkdir{Mkdir: &bfspb.MkdirCmd{Path: "/a", Parents: true}}})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = s.Apply(&bfspb.Command{Op: &bfspb.Command_Create{Create: &bfspb.CreateCmd{Path: "/a", Id: 50, Replication: 99}}})
	require.ErrorIs(t, err, ErrInvalid)
}

func TestReopenKeepsStateAndIDs(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, mkdir(s, "/a/b", true))
	require.NoError(t, create(s, "/a/b/f", false))
	info, err := s.Stat("/a/b/f")
	require.NoError(t, err)
	_, err = s.Apply(&bfspb.Command{Op: &bfspb.Command_OpenSession{OpenSession: &bfspb.OpenSessionCmd{
		Session: &bfspb.SessionRecord{SessionId: "s1", Holder: "h", TtlMs: 1000}}}})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = open(t, dir)
	got, err := s.Stat("/a/b/f")
	require.NoError(t, err)
	require.Equal(t, info.EntryId, got.EntryId)
	require.Greater(t, s.AllocIDs(1)[0], info.EntryId, "ids are never reused")
	sessions, err := s.Sessions()
	require.NoError(t, err)
	require.Len(t, sessions, 1)
	require.Equal(t, "h", sessions[0].Holder)
}

// TestConcurrentMkdirAll races many mkdir -p calls over shared prefixes:
// every directory must be created exactly once (one id) and all calls
// succeed.
func TestConcurrentMkdirAll(t *testing.T) {
	s := open(t, t.TempDir())
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- mkdir(s, fmt.Sprintf("/p/q/r%d/s", i%4), true)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, []string{"r0", "r1", "r2", "r3"}, names(t, s, "/p/q"))
	for i := range 4 {
		require.Equal(t, []string{"s"}, names(t, s, fmt.Sprintf("/p/q/r%d", i)))
	}
}

// TestConcurrentCreateAndDelete races creates in a directory against its
// recursive delete: afterwards no entry may be orphaned (a child whose
// parent is gone).
func TestConcurrentCreateAndDelete(t *testing.T) {
	s := open(t, t.TempDir())
	for round := range 20 {
		require.NoError(t, mkdir(s, "/d", false))
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := create(s, fmt.Sprintf("/d/f%d", i), false)
				if err != nil && !errors.Is(err, ErrNotFound) {
					t.Errorf("round %d: create: %v", round, err)
				}
			}()
		}
		require.NoError(t, rmdir(s, "/d", true))
		wg.Wait()
		// Whatever was created after the delete is under a new /d; clear it.
		if _, err := s.Stat("/d"); err == nil {
			t.Fatalf("round %d: /d reappeared", round)
		}
		orphans := 0
		lower, upper := []byte{prefixEntry}, []byte{prefixEntry + 1}
		require.NoError(t, scan(s.db, lower, upper, func(_ []byte, info *bfspb.FileInfo) bool {
			if info.EntryId != RootID && info.ParentId != RootID {
				orphans++
			}
			return true
		}))
		require.Zero(t, orphans, "round %d", round)
	}
}
