package namespace

import (
	"errors"
	"fmt"

	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Walk calls fn with the path and FileInfo of root and of every entry
// under it, in walk order (depth first, a directory before its children,
// the children of a directory by name), until fn returns false. With
// after set, the walk resumes after that path: only the entries that come
// after it in walk order are visited, so a caller can walk a big subtree
// a stretch at a time, whatever was created or removed in between. after
// must be root or lie under it.
//
// Each directory is read with an iterator of its own, so an entry
// created, removed or renamed while the walk runs may or may not be seen.
func (s *Store) Walk(root, after string, fn func(path string, info *bfspb.FileInfo) bool) error {
	p, err := CleanPath(root)
	if err != nil {
		return err
	}
	var rest []string
	if after != "" {
		a, err := CleanPath(after)
		if err != nil {
			return err
		}
		if !fspath.Within(a, p) {
			return fmt.Errorf("%w: walk resumes after %q, which is not under %q", ErrInvalid, a, p)
		}
		rest = fspath.Split(a)[len(fspath.Split(p)):]
	}
	if s.closed.Load() {
		return ErrClosed
	}
	info, err := lookup(s.reader(), p)
	if err != nil {
		return err
	}
	w := treeWalk{s: s, fn: fn}
	if after == "" && !fn(p, info) {
		return nil
	}
	if info.Type == bfspb.FileType_FILE_TYPE_DIR {
		w.dir(info, p, rest)
	}
	return w.err
}

// treeWalk is one Walk; err is the first failure, which stops it.
type treeWalk struct {
	s   *Store
	fn  func(path string, info *bfspb.FileInfo) bool
	err error
}

// dir visits the children of d (at path) that come after the path whose
// components below d are rest (all of them if rest is empty), and their
// subtrees. It returns false once the walk is to stop.
func (w *treeWalk) dir(d *bfspb.FileInfo, path string, rest []string) bool {
	lower, upper := childBounds(d.EntryId)
	if len(rest) > 0 {
		// Resume inside the entry the walk stopped in or under, then go on
		// with its later siblings.
		child, err := getInfo(w.s.db, entryKey(d.EntryId, rest[0]))
		switch {
		case err == nil && child.Type == bfspb.FileType_FILE_TYPE_DIR:
			if !w.dir(child, join(path, rest[0]), rest[1:]) {
				return false
			}
		case err != nil && !errors.Is(err, ErrNotFound):
			w.err = err
			return false
		}
		lower = append(entryKey(d.EntryId, rest[0]), 0)
	}
	more := true
	err := scan(w.s.db, lower, upper, func(_ []byte, info *bfspb.FileInfo) bool {
		p := join(path, info.Name)
		if !w.fn(p, info) {
			more = false
			return false
		}
		if info.Type == bfspb.FileType_FILE_TYPE_DIR && !w.dir(info, p, nil) {
			more = false
		}
		return more
	})
	if err != nil && w.err == nil {
		w.err = err
	}
	return more && w.err == nil
}

func join(dir, name string) string {
	if dir == fspath.Root {
		return "/" + name
	}
	return dir + "/" + name
}
