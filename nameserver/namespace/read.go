package namespace

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// DefaultListLimit is the page size of List when the caller asks for none;
// MaxListLimit caps what a caller may ask for.
const (
	DefaultListLimit = 1000
	MaxListLimit     = 10000
)

// Usage is what DiskUsage adds up.
type Usage struct {
	Bytes, Files, Dirs int64
}

// lookup returns the entry at path: the directory it is in comes from
// dirID, the entry itself from Pebble.
func lookup(r pebble.Reader, path string) (*bfspb.FileInfo, error) {
	if path == fspath.Root {
		return getInfo(r, entryKey(rootParentID, ""))
	}
	parent, err := dirID(r, fspath.Dir(path))
	if err != nil {
		return nil, err
	}
	return getInfo(r, entryKey(parent, fspath.Base(path)))
}

// lookupDir is lookup that insists on a directory.
func lookupDir(r pebble.Reader, path string) (*bfspb.FileInfo, error) {
	info, err := lookup(r, path)
	if err != nil {
		return nil, err
	}
	if info.Type != bfspb.FileType_FILE_TYPE_DIR {
		return nil, ErrNotDirectory
	}
	return info, nil
}

// dirID returns the entry id of the directory at path. It walks path from
// the root, one key per component, taking the components it can from the
// directory cache of r (see dirCache) and filling in the others.
func dirID(r pebble.Reader, path string) (uint64, error) {
	dirs := dirsOf(r)
	id, rest, gen := RootID, path, uint64(0)
	if dirs != nil {
		id, rest, gen = dirs.resolve(path)
	} else if path == fspath.Root {
		rest = ""
	}
	for rest != "" {
		var name string
		name, rest = nextComponent(rest)
		info, err := getInfo(r, entryKey(id, name))
		if err != nil {
			return 0, err
		}
		if info.Type != bfspb.FileType_FILE_TYPE_DIR {
			return 0, ErrNotDirectory
		}
		if dirs != nil {
			dirs.fill(gen, id, name, info.EntryId)
		}
		id = info.EntryId
	}
	return id, nil
}

// keyOf is the key an entry is stored under.
func keyOf(info *bfspb.FileInfo) []byte {
	if info.EntryId == RootID {
		return entryKey(rootParentID, "")
	}
	return entryKey(info.ParentId, info.Name)
}

// CleanPath normalizes a path from outside (see fspath.Clean); a bad one
// is an error wrapping ErrInvalid.
func CleanPath(path string) (string, error) {
	p, err := fspath.Clean(path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return p, nil
}

// Stat returns the entry at path.
func (s *Store) Stat(path string) (*bfspb.FileInfo, error) {
	p, err := CleanPath(path)
	if err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, ErrClosed
	}
	return lookup(s.reader(), p)
}

// List returns up to limit entries of directory path whose names sort after
// startAfter, and whether more follow.
func (s *Store) List(path, startAfter string, limit int) ([]*bfspb.FileInfo, bool, error) {
	if limit <= 0 {
		limit = DefaultListLimit
	}
	if limit > MaxListLimit {
		return nil, false, fmt.Errorf("%w: list limit %d over %d", ErrInvalid, limit, MaxListLimit)
	}
	p, err := CleanPath(path)
	if err != nil {
		return nil, false, err
	}
	if s.closed.Load() {
		return nil, false, ErrClosed
	}
	dir, err := lookupDir(s.reader(), p)
	if err != nil {
		return nil, false, err
	}
	lower, upper := childBounds(dir.EntryId)
	if startAfter != "" {
		lower = append(entryKey(dir.EntryId, startAfter), 0)
	}
	var out []*bfspb.FileInfo
	more := false
	err = scan(s.db, lower, upper, func(_ []byte, info *bfspb.FileInfo) bool {
		if len(out) == limit {
			more = true
			return false
		}
		out = append(out, info)
		return true
	})
	return out, more, err
}

// DiskUsage adds up the sizes of the files under path.
func (s *Store) DiskUsage(path string) (Usage, error) {
	p, err := CleanPath(path)
	if err != nil {
		return Usage{}, err
	}
	if s.closed.Load() {
		return Usage{}, ErrClosed
	}
	info, err := lookup(s.reader(), p)
	if err != nil {
		return Usage{}, err
	}
	var u Usage
	err = walk(s.db, info, func(_ []byte, e *bfspb.FileInfo) {
		if e.Type == bfspb.FileType_FILE_TYPE_DIR {
			u.Dirs++
		} else {
			u.Files++
			u.Bytes += e.Size
		}
	})
	return u, err
}

// scan calls fn for each entry in [lower, upper) until fn returns false.
func scan(r pebble.Reader, lower, upper []byte, fn func(key []byte, info *bfspb.FileInfo) bool) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("namespace: iterate: %w", err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		key := append([]byte(nil), it.Key()...)
		info, err := decodeInfo(key, it.Value())
		if err != nil {
			it.Close()
			return err
		}
		if !fn(key, info) {
			break
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return fmt.Errorf("namespace: iterate: %w", err)
	}
	return it.Close()
}

// walk calls fn for root and every entry below it, depth first, parents
// before children.
func walk(r pebble.Reader, root *bfspb.FileInfo, fn func(key []byte, info *bfspb.FileInfo)) error {
	fn(keyOf(root), root)
	if root.Type != bfspb.FileType_FILE_TYPE_DIR {
		return nil
	}
	lower, upper := childBounds(root.EntryId)
	var dirs []*bfspb.FileInfo
	err := scan(r, lower, upper, func(key []byte, info *bfspb.FileInfo) bool {
		if info.Type == bfspb.FileType_FILE_TYPE_DIR {
			dirs = append(dirs, info)
		} else {
			fn(key, info)
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := walk(r, d, fn); err != nil {
			return err
		}
	}
	return nil
}

// scanKeys calls fn with every key and value in [lower, upper).
func scanKeys(r pebble.Reader, lower, upper []byte, fn func(k, v []byte) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("namespace: iterate: %w", err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		if err := fn(append([]byte(nil), it.Key()...), append([]byte(nil), it.Value()...)); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return fmt.Errorf("namespace: iterate: %w", err)
	}
	return it.Close()
}
