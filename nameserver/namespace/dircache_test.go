package namespace

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
)

func TestDirCacheResolveFillInvalidate(t *testing.T) {
	c := newDirCache(16)
	id, rest, gen := c.resolve("/a/b")
	require.Equal(t, RootID, id)
	require.Equal(t, "/a/b", rest)
	c.fill(gen, RootID, "a", 10)
	c.fill(gen, 10, "b", 11)
	id, rest, _ = c.resolve("/a/b")
	require.Equal(t, uint64(11), id)
	require.Empty(t, rest)
	id, rest, _ = c.resolve("/a/x/y")
	require.Equal(t, uint64(10), id)
	require.Equal(t, "/x/y", rest)
	id, rest, _ = c.resolve("/")
	require.Equal(t, RootID, id)
	require.Empty(t, rest)

	// While a delete of /a commits, /a is neither served nor stored; a
	// fill that read Pebble before the delete was released is dropped.
	_, _, before := c.resolve("/a")
	b := newBatch(t)
	require.NoError(t, b.Delete(entryKey(RootID, "a"), nil))
	f := c.forget(b)
	id, rest, during := c.resolve("/a/b")
	require.Equal(t, RootID, id, "/a is being deleted")
	require.Equal(t, "/a/b", rest)
	c.fill(during, RootID, "a", 10)
	id, _, _ = c.resolve("/a")
	require.Equal(t, RootID, id, "no fill of a key being deleted")
	c.fill(during, RootID, "c", 12)
	id, _, _ = c.resolve("/c")
	require.Equal(t, uint64(12), id, "other keys fill as usual")
	c.release(f)
	c.fill(before, RootID, "a", 10)
	c.fill(during, RootID, "a", 10)
	id, _, after := c.resolve("/a")
	require.Equal(t, RootID, id, "fills that read before the release are stale")
	c.fill(after, RootID, "a", 20)
	id, _, _ = c.resolve("/a")
	require.Equal(t, uint64(20), id)
}

func TestDirCacheIgnoresOtherRecords(t *testing.T) {
	c := newDirCache(16)
	_, _, gen := c.resolve("/a")
	c.fill(gen, RootID, "a", 10)
	b := newBatch(t)
	require.NoError(t, b.Set(entryKey(RootID, "a"), []byte("x"), nil)) // a lock change: same entry
	require.NoError(t, b.Delete(idKey(10), nil))
	c.release(c.forget(b))
	id, _, gen2 := c.resolve("/a")
	require.Equal(t, uint64(10), id)
	require.Equal(t, gen, gen2, "nothing was invalidated")

	b = newBatch(t)
	require.NoError(t, b.DeleteRange([]byte{prefixEntry}, []byte{prefixEntry + 1}, nil))
	f := c.forget(b)
	require.Zero(t, c.len(), "a range delete empties the cache")
	_, _, gen = c.resolve("/a")
	c.fill(gen, RootID, "a", 10)
	require.Zero(t, c.len(), "and keeps it empty while it commits")
	c.release(f)
	_, _, gen = c.resolve("/a")
	c.fill(gen, RootID, "a", 10)
	require.Equal(t, 1, c.len())
}

func TestDirCacheBounded(t *testing.T) {
	c := newDirCache(4)
	for i := range 10 {
		_, _, gen := c.resolve("/x")
		c.fill(gen, RootID, fmt.Sprintf("d%d", i), uint64(100+i))
	}
	require.Equal(t, 4, c.len())
	_, err := Open(Options{Dir: t.TempDir(), DirCacheEntries: -1})
	require.ErrorIs(t, err, ErrInvalid)
}

func newBatch(t *testing.T) *pebble.Batch {
	t.Helper()
	s := open(t, t.TempDir())
	b := s.db.NewBatch()
	t.Cleanup(func() { b.Close() })
	return b
}

// TestLookupsAfterDirectoryChanges warms the cache with every directory,
// then renames, deletes and recreates directories: each lookup after a
// change must see the change, through the cache or around it.
func TestLookupsAfterDirectoryChanges(t *testing.T) {
	for _, entries := range []int{0, 2} { // 0: the default; 2: constant eviction
		t.Run(fmt.Sprintf("entries=%d", entries), func(t *testing.T) {
			s := openWith(t, Options{Dir: t.TempDir(), DirCacheEntries: entries})
			stat := func(p string) error { _, err := s.Stat(p); return err }

			require.NoError(t, mkdir(s, "/a/b/c", true))
			require.NoError(t, create(s, "/a/b/c/f", false))
			require.NoError(t, stat("/a/b/c/f"))

			require.NoError(t, rename(s, "/a/b", "/a/b2"))
			require.ErrorIs(t, stat("/a/b/c/f"), ErrNotFound)
			require.ErrorIs(t, create(s, "/a/b/c/g", false), ErrNotFound)
			require.NoError(t, stat("/a/b2/c/f"))

			// A new directory under the old name is a different directory.
			require.NoError(t, mkdir(s, "/a/b/c", true))
			require.ErrorIs(t, stat("/a/b/c/f"), ErrNotFound)
			require.NoError(t, create(s, "/a/b/c/g", false))
			require.Equal(t, []string{"g"}, names(t, s, "/a/b/c"))
			require.Equal(t, []string{"f"}, names(t, s, "/a/b2/c"))

			require.NoError(t, rmdir(s, "/a/b2", true))
			require.ErrorIs(t, stat("/a/b2/c/f"), ErrNotFound)
			require.ErrorIs(t, create(s, "/a/b2/c/f", false), ErrNotFound)

			// A directory replaced by a file of the same name.
			require.NoError(t, rmdir(s, "/a/b", true))
			require.NoError(t, create(s, "/a/b", false))
			require.ErrorIs(t, stat("/a/b/c"), ErrNotDirectory)
			require.ErrorIs(t, create(s, "/a/b/c/g", false), ErrNotDirectory)

			// And a file renamed away, a directory renamed into its place.
			require.NoError(t, mkdir(s, "/d/e", true))
			require.NoError(t, stat("/d/e"))
			require.NoError(t, del(s, "/a/b"))
			require.NoError(t, rename(s, "/d", "/a/b"))
			require.NoError(t, create(s, "/a/b/e/h", false))
			require.NoError(t, stat("/a/b/e/h"))
			require.ErrorIs(t, stat("/d/e"), ErrNotFound)
		})
	}
}

// TestLookupsRaceRenames renames a directory back and forth while readers
// stat below it without locks, filling the cache as they go. After each
// rename returns, the renamer's own lookups must see it: no reader may
// have put back a binding the rename removed.
func TestLookupsRaceRenames(t *testing.T) {
	s := open(t, t.TempDir())
	require.NoError(t, mkdir(s, "/p/x/y", true))
	require.NoError(t, create(s, "/p/x/y/f", false))
	var stop atomic.Bool
	var wg sync.WaitGroup
	defer func() { stop.Store(true); wg.Wait() }()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				for _, p := range []string{"/p/x/y/f", "/p/z/y/f"} {
					if _, err := s.Stat(p); err != nil && !errors.Is(err, ErrNotFound) {
						t.Errorf("stat %s: %v", p, err)
					}
				}
			}
		}()
	}
	from, to := "/p/x", "/p/z"
	for i := range 100 {
		require.NoError(t, rename(s, from, to))
		_, err := s.Stat(from + "/y/f")
		require.ErrorIs(t, err, ErrNotFound, "round %d: %s was renamed away", i, from)
		_, err = s.Stat(to + "/y/f")
		require.NoError(t, err, "round %d", i)
		from, to = to, from
	}
}

// TestCreateUsesCachedParents checks that a create deep in the tree reads
// Pebble once the cache holds its parents: the cache must be used, or the
// performance it exists for is lost.
func TestCreateUsesCachedParents(t *testing.T) {
	s := open(t, t.TempDir())
	require.NoError(t, mkdir(s, "/a/b/c/d", true))
	require.NoError(t, create(s, "/a/b/c/d/f0", false))
	require.Equal(t, 4, s.dirs.len())
	id, rest, _ := s.dirs.resolve("/a/b/c/d")
	require.Empty(t, rest)
	info, err := s.Stat("/a/b/c/d")
	require.NoError(t, err)
	require.Equal(t, info.EntryId, id)
	require.Equal(t, bfspb.FileType_FILE_TYPE_DIR, info.Type)
}
