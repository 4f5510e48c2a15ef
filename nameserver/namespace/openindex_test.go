package namespace

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestUnlockFindsOpenFilesMovedWithTheirDirectory: a file open for write
// moves with the directory above it. An unlock of its new place finds it
// (and a lock by another session waits for it); the old place, even
// made again, finds nothing. So after a restart.
func TestUnlockFindsOpenFilesMovedWithTheirDirectory(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	openSessions(t, s, "W", "other")
	require.NoError(t, mkdir(s, "/a/b", true))
	require.NoError(t, mkdir(s, "/c", false))
	require.NoError(t, createAs(s, "/a/b/f", "W", true))
	f, err := s.Stat("/a/b/f")
	require.NoError(t, err)
	require.NoError(t, rename(s, "/a", "/c/a2"))
	require.NoError(t, mkdir(s, "/a/b", true))

	check := func(s *Store) {
		t.Helper()
		for _, p := range []string{"/a", "/a/b"} {
			_, err := lockDir(s, p, "W")
			require.NoError(t, err)
			res, err := unlockDir(s, p, "W", false)
			require.NoError(t, err)
			require.Equal(t, dirlock.Unlocked, res.Lock.Status, "%s: nothing open there", p)
		}
		res, err := lockDir(s, "/c/a2/b", "W")
		require.NoError(t, err)
		require.Equal(t, dirlock.Locked, res.Lock.Status, "the writer's own file does not hold up its grant")
		res, err = unlockDir(s, "/c/a2/b", "W", false)
		require.NoError(t, err)
		require.Equal(t, dirlock.Cleaning, res.Lock.Status)
		require.Equal(t, []uint64{f.EntryId}, res.Cleaning.Files)
		_, err = finishCleaningOf(s, "/c/a2/b", res.Cleaning.Epoch)
		require.NoError(t, err)

		res, err = lockDir(s, "/c", "other")
		require.NoError(t, err)
		require.Equal(t, dirlock.Cleaning, res.Lock.Status, "another session's grant waits for the file")
		require.Equal(t, []uint64{f.EntryId}, res.Cleaning.Files)
		_, err = finishCleaningOf(s, "/c", res.Cleaning.Epoch)
		require.NoError(t, err)
	}
	check(s)
	require.NoError(t, s.Close())
	check(open(t, dir))
}

// TestOpenIndexMatchesRecords drives the store through random creates,
// closes, overwrites, deletes and renames of files and directories, and
// checks after each step that the open files the index finds under every
// directory are those the stored records say (every open-file record
// whose path lies there, by a scan of them all), and that it keeps no
// node that leads to no open file. Then again after a restart.
func TestOpenIndexMatchesRecords(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	openSessions(t, s, "s0", "s1", "s2")
	rng := rand.New(rand.NewPCG(1, 2))
	w := &walker{t: t, s: s, rng: rng, dirs: []string{"/"}}
	for i := range 400 {
		w.step()
		if i%10 == 0 || i > 380 {
			checkOpenIndex(t, s)
		}
	}
	require.NoError(t, s.Close())
	s = open(t, dir)
	checkOpenIndex(t, s)
}

type walker struct {
	t     *testing.T
	s     *Store
	rng   *rand.Rand
	dirs  []string // every directory, "/" first
	files []string
	n     int
}

func (w *walker) pick(list []string) string { return list[w.rng.IntN(len(list))] }

func (w *walker) name() string {
	w.n++
	return fmt.Sprintf("n%d", w.n)
}

// step makes one random change that succeeds.
func (w *walker) step() {
	t, s := w.t, w.s
	switch k := w.rng.IntN(10); {
	case k < 2 || len(w.dirs) < 4:
		p := fspath.Join(append(fspath.Split(w.pick(w.dirs)), w.name()))
		require.NoError(t, mkdir(s, p, false))
		w.dirs = append(w.dirs, p)
	case k < 5 || len(w.files) == 0:
		p := fspath.Join(append(fspath.Split(w.pick(w.dirs)), w.name()))
		require.NoError(t, createAs(s, p, fmt.Sprintf("s%d", w.rng.IntN(3)), w.rng.IntN(4) > 0))
		w.files = append(w.files, p)
	case k == 5:
		p := w.pick(w.files)
		info, err := s.Stat(p)
		require.NoError(t, err)
		_, err = apply1(t, s, &bfspb.CloseFileCmd{Path: p, EntryId: info.EntryId})
		require.NoError(t, err)
	case k == 6:
		p := w.pick(w.files)
		_, err := s.apply(cmdOf(1, &bfspb.CreateCmd{Path: p, Overwrite: true, SessionId: "s1", OpenForWrite: w.rng.IntN(2) == 0}))
		require.NoError(t, err, "overwrite %s", p)
	case k == 7:
		p := w.pick(w.files)
		require.NoError(t, del(s, p))
		w.files = slices.DeleteFunc(w.files, func(q string) bool { return q == p })
	case k == 8:
		w.renameDir()
	default:
		p := w.pick(w.dirs[1:])
		require.NoError(t, rmdir(s, p, true))
		gone := func(q string) bool { return fspath.Within(q, p) }
		w.dirs = slices.DeleteFunc(w.dirs, gone)
		w.files = slices.DeleteFunc(w.files, gone)
	}
}

// renameDir moves a directory (and all below it) somewhere outside its
// own subtree, or a file into another directory.
func (w *walker) renameDir() {
	moveFile := len(w.files) > 0 && w.rng.IntN(3) == 0
	src := w.pick(w.dirs[1:])
	if moveFile {
		src = w.pick(w.files)
	}
	var to []string
	for _, d := range w.dirs {
		if !fspath.Within(d, src) {
			to = append(to, d)
		}
	}
	dst := fspath.Join(append(fspath.Split(w.pick(to)), w.name()))
	require.NoError(w.t, rename(w.s, src, dst), "rename %s %s", src, dst)
	move := func(list []string) {
		for i, q := range list {
			if fspath.Within(q, src) {
				list[i] = dst + q[len(src):]
			}
		}
	}
	move(w.dirs)
	move(w.files)
}

// checkOpenIndex compares the index with a scan of every open-file
// record.
func checkOpenIndex(t *testing.T, s *Store) {
	t.Helper()
	open, err := s.OpenFiles("")
	require.NoError(t, err)
	paths := make(map[uint64]string)
	nodes := make(map[uint64]bool)
	for _, f := range open {
		p, _, err := s.PathOf(f.EntryID)
		require.NoError(t, err)
		paths[f.EntryID] = p
		for id := f.EntryID; id != RootID; {
			nodes[id] = true
			id, err = parentOf(s.db, id)
			require.NoError(t, err)
		}
		nodes[RootID] = true
	}
	require.Equal(t, len(nodes), s.open.len(), "nodes of the index: every open file and the directories above it, no more")
	var dirs []string
	err = walk(s.db, mustStat(t, s, "/"), func(_ []byte, info *bfspb.FileInfo) {
		if info.Type == bfspb.FileType_FILE_TYPE_DIR {
			p, _, err := s.PathOf(info.EntryId)
			require.NoError(t, err)
			dirs = append(dirs, p)
		}
	})
	require.NoError(t, err)
	for _, d := range dirs {
		var want []uint64
		for _, f := range open { // in the order of the records
			if fspath.Within(paths[f.EntryID], d) {
				want = append(want, f.EntryID)
			}
		}
		got := s.open.under(mustStat(t, s, d).EntryId, nil)
		require.Equal(t, want, got, "open files under %s", d)
	}
}
