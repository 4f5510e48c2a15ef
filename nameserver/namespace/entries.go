package namespace

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Defaults and limits of new entries.
const (
	DefaultFileMode    = 0o644
	DefaultDirMode     = 0o755
	DefaultReplication = 3
	MaxReplication     = 16
	maxMode            = 0o7777
	maxSessionIDLen    = 255
)

func newEntry(parent uint64, name string, id uint64, t bfspb.FileType, mode uint32, now int64) *bfspb.FileInfo {
	return &bfspb.FileInfo{
		EntryId:  id,
		ParentId: parent,
		Name:     name,
		Type:     t,
		Mode:     mode,
		CtimeNs:  now,
		MtimeNs:  now,
	}
}

func applyMkdir(st *step, c *bfspb.MkdirCmd) (*Result, error) {
	mode, err := checkMode(c.Mode, DefaultDirMode)
	if err != nil {
		return nil, err
	}
	if c.Path == fspath.Root {
		if c.Parents {
			return lookupResult(st.r, c.Path)
		}
		return nil, ErrExists
	}
	comps := fspath.Split(c.Path)
	dir, err := getInfo(st.r, entryKey(rootParentID, ""))
	if err != nil {
		return nil, err
	}
	for i, name := range comps {
		last := i == len(comps)-1
		next, err := getInfo(st.r, entryKey(dir.EntryId, name))
		switch {
		case err == nil && next.Type != bfspb.FileType_FILE_TYPE_DIR:
			if last {
				return nil, ErrExists
			}
			return nil, ErrNotDirectory
		case err == nil && last && !c.Parents:
			return nil, ErrExists
		case err == nil:
			dir = next
			continue
		case !errors.Is(err, ErrNotFound):
			return nil, err
		case !last && !c.Parents:
			return nil, ErrNotFound
		}
		next = newEntry(dir.EntryId, name, st.newID(), bfspb.FileType_FILE_TYPE_DIR, mode, st.now)
		if err := putEntry(st.b, next); err != nil {
			return nil, err
		}
		dir = next
	}
	return &Result{Info: dir}, nil
}

func applyCreate(st *step, c *bfspb.CreateCmd) (*Result, error) {
	mode, err := checkMode(c.Mode, DefaultFileMode)
	if err != nil {
		return nil, err
	}
	repl := c.Replication
	if repl == 0 {
		repl = DefaultReplication
	}
	if repl > MaxReplication {
		return nil, fmt.Errorf("%w: replication %d over %d", ErrInvalid, repl, MaxReplication)
	}
	if len(c.SessionId) > maxSessionIDLen {
		return nil, fmt.Errorf("%w: session id longer than %d bytes", ErrInvalid, maxSessionIDLen)
	}
	if c.OpenForWrite && c.SessionId == "" {
		return nil, fmt.Errorf("%w: opening a file for write needs a session", ErrInvalid)
	}
	if c.Path == fspath.Root {
		return nil, ErrIsDirectory
	}
	parent, err := dirID(st.r, fspath.Dir(c.Path))
	if err != nil {
		return nil, err
	}
	res := &Result{}
	old, err := getInfo(st.r, entryKey(parent, fspath.Base(c.Path)))
	switch {
	case err == nil && old.Type == bfspb.FileType_FILE_TYPE_DIR:
		return nil, ErrIsDirectory
	case err == nil && !c.Overwrite:
		return nil, ErrExists
	case err == nil:
		res.Freed = old.Blocks
		if err := deleteEntry(st.b, old); err != nil {
			return nil, err
		}
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	info := newEntry(parent, fspath.Base(c.Path), st.newID(), bfspb.FileType_FILE_TYPE_FILE, mode, st.now)
	info.Replication = repl
	if c.OpenForWrite {
		info.WriterSession = c.SessionId
	}
	res.Info = info
	return res, putEntry(st.b, info)
}

func applyDeleteFile(st *step, c *bfspb.DeleteFileCmd) (*Result, error) {
	info, err := lookup(st.r, c.Path)
	if err != nil {
		return nil, err
	}
	if info.Type == bfspb.FileType_FILE_TYPE_DIR {
		return nil, ErrIsDirectory
	}
	return &Result{Freed: info.Blocks}, deleteEntry(st.b, info)
}

func applyDeleteDir(st *step, c *bfspb.DeleteDirCmd) (*Result, error) {
	if c.Path == fspath.Root {
		return nil, fmt.Errorf("%w: cannot delete the root directory", ErrInvalid)
	}
	dir, err := lookupDir(st.r, c.Path)
	if err != nil {
		return nil, err
	}
	if !c.Recursive {
		empty, err := isEmpty(st.r, dir)
		if err != nil {
			return nil, err
		}
		if !empty {
			return nil, ErrNotEmpty
		}
	}
	// Collect first: a batch must not change under its own iterator.
	var doomed []*bfspb.FileInfo
	res := &Result{}
	err = walk(st.r, dir, func(_ []byte, info *bfspb.FileInfo) {
		doomed = append(doomed, info)
		res.Freed = append(res.Freed, info.Blocks...)
	})
	if err != nil {
		return nil, err
	}
	for _, info := range doomed {
		if err := deleteEntry(st.b, info); err != nil {
			return nil, err
		}
	}
	// The holder deleted its locked directory: the locks end with it.
	// Like every lock that ends, each is in SetLocks as it was and in
	// RemovedLocks (see finishCleaning).
	for _, l := range st.locks.Subtree(c.Path) {
		res.SetLocks = append(res.SetLocks, l)
		res.RemovedLocks = append(res.RemovedLocks, l.Path)
	}
	return res, nil
}

func isEmpty(r pebble.Reader, dir *bfspb.FileInfo) (bool, error) {
	lower, upper := childBounds(dir.EntryId)
	empty := true
	err := scan(r, lower, upper, func([]byte, *bfspb.FileInfo) bool {
		empty = false
		return false
	})
	return empty, err
}

func applyRename(st *step, c *bfspb.RenameCmd) (*Result, error) {
	if c.Src == fspath.Root || c.Dst == fspath.Root {
		return nil, fmt.Errorf("%w: cannot rename the root directory", ErrInvalid)
	}
	src, err := lookup(st.r, c.Src)
	if err != nil {
		return nil, err
	}
	if c.Src == c.Dst {
		return &Result{Info: src}, nil
	}
	if src.Type == bfspb.FileType_FILE_TYPE_DIR && fspath.Within(c.Dst, c.Src) {
		return nil, fmt.Errorf("%w: cannot move %s into its own subtree", ErrInvalid, c.Src)
	}
	parent, err := dirID(st.r, fspath.Dir(c.Dst))
	if err != nil {
		return nil, err
	}
	res := &Result{}
	old, err := getInfo(st.r, entryKey(parent, fspath.Base(c.Dst)))
	switch {
	case err == nil && old.Type == bfspb.FileType_FILE_TYPE_DIR:
		return nil, ErrExists
	case err == nil && src.Type == bfspb.FileType_FILE_TYPE_DIR:
		return nil, ErrNotDirectory
	case err == nil:
		res.Freed = old.Blocks
		if err := deleteEntry(st.b, old); err != nil {
			return nil, err
		}
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	if err := st.b.Delete(keyOf(src), nil); err != nil {
		return nil, err
	}
	moved := proto.Clone(src).(*bfspb.FileInfo)
	moved.ParentId, moved.Name, moved.CtimeNs = parent, fspath.Base(c.Dst), st.now
	res.Info = moved
	return res, putEntry(st.b, moved)
}

func applyChmod(st *step, c *bfspb.ChmodCmd) (*Result, error) {
	if c.Mode > maxMode {
		return nil, fmt.Errorf("%w: mode %o", ErrInvalid, c.Mode)
	}
	info, err := lookup(st.r, c.Path)
	if err != nil {
		return nil, err
	}
	info.Mode, info.CtimeNs = c.Mode, st.now
	return &Result{Info: info}, putEntry(st.b, info)
}

func lookupResult(r pebble.Reader, path string) (*Result, error) {
	info, err := lookup(r, path)
	if err != nil {
		return nil, err
	}
	return &Result{Info: info}, nil
}

// putEntry stores info, where it is, and its id in the counter.
func putEntry(b *pebble.Batch, info *bfspb.FileInfo) error {
	if err := putInfo(b, keyOf(info), info); err != nil {
		return err
	}
	if info.EntryId != RootID {
		if err := b.Set(idKey(info.EntryId), idValue(info.ParentId, info.Name), nil); err != nil {
			return err
		}
	}
	if info.WriterSession != "" {
		return b.Set(openKey(info.WriterSession, info.EntryId), nil, nil)
	}
	return nil
}

// deleteEntry removes info and every index record that points at it.
func deleteEntry(b *pebble.Batch, info *bfspb.FileInfo) error {
	keys := [][]byte{keyOf(info), idKey(info.EntryId)}
	for _, blk := range info.Blocks {
		keys = append(keys, blockKey(blk.Id))
	}
	if info.WriterSession != "" {
		keys = append(keys, openKey(info.WriterSession, info.EntryId))
	}
	if info.LockStatus != bfspb.LockStatus_LOCK_STATUS_UNLOCKED {
		keys = append(keys, lockKey(info.EntryId)) // the holder deleting its own locked directory
	}
	for _, k := range keys {
		if err := b.Delete(k, nil); err != nil {
			return err
		}
	}
	return nil
}

func checkMode(mode, def uint32) (uint32, error) {
	if mode == 0 {
		return def, nil
	}
	if mode > maxMode {
		return 0, fmt.Errorf("%w: mode %o", ErrInvalid, mode)
	}
	return mode, nil
}
