package namespace

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/dirlock"
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

// Result is what a command did.
type Result struct {
	// Info is the entry the command created or changed (nil for deletes).
	Info *bfspb.FileInfo
	// Freed lists the blocks of files the command removed (deleted or
	// overwritten); their replicas can be dropped.
	Freed []*bfspb.BlockMeta
	// Lock is the state a lock command left the directory in.
	Lock *dirlock.Lock
	// Cleaning is what an UnlockDir must drain (nil if nothing: the
	// directory is UNLOCKED already) or what FinishCleaning drained.
	Cleaning *bfspb.CleaningRecord

	// SetLocks and RemovedLocks are the lock table changes the command
	// made (after the batch committed): locks now LOCKED or CLEANING, and
	// paths now UNLOCKED.
	SetLocks     []dirlock.Lock
	RemovedLocks []string
}

// Apply executes cmd as one Pebble batch committed with pebble.Sync. When it
// returns nil the mutation is durable.
func (s *Store) Apply(cmd *bfspb.Command) (*Result, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if err := validate(cmd); err != nil {
		return nil, err
	}
	for {
		reads, writes, err := s.lockSet(cmd)
		if err != nil {
			return nil, err
		}
		release := s.paths.acquire(reads, writes)
		res, err := s.applyLocked(cmd, reads, writes)
		release()
		if !errors.Is(err, errRetry) {
			return res, err
		}
	}
}

// errRetry says the lock set chosen before locking no longer fits the state.
var errRetry = errors.New("namespace: retry with a new lock set")

func (s *Store) applyLocked(cmd *bfspb.Command, reads, writes []string) (*Result, error) {
	// Reads go to the committed state: the path locks keep what this
	// command reads from changing, and no command reads its own writes.
	r := s.reader()
	b := s.db.NewBatch()
	defer b.Close()
	if m := cmd.GetMkdir(); m != nil && m.Parents && !stillFits(r, m.Path, writes) {
		return nil, errRetry
	}
	if err := guard(s.locks, cmd); err != nil {
		return nil, err
	}
	if l := cmd.GetLockDir(); l != nil && l.Epoch == 0 {
		l.Epoch = s.allocEpoch()
	}
	res, err := apply(r, b, s.locks, cmd)
	if err != nil {
		return res, err
	}
	// The directory cache lets go of what b deletes before anyone can see
	// it deleted, and takes it back once they all can: see dirCache.
	forgotten := s.dirs.forget(b)
	err = b.Commit(pebble.Sync)
	s.dirs.release(forgotten)
	if err != nil {
		return nil, fmt.Errorf("namespace: commit: %w", err)
	}
	for _, id := range commandIDs(cmd) {
		s.observeID(id)
	}
	s.updateLocks(cmd, res)
	if s.onLocks != nil && (len(res.SetLocks) > 0 || len(res.RemovedLocks) > 0) {
		s.onLocks(cmd, res) // still under the path locks: in commit order
	}
	return res, nil
}

// updateLocks brings the lock table in line with a committed command,
// still under its path locks.
func (s *Store) updateLocks(cmd *bfspb.Command, res *Result) {
	switch op := cmd.Op.(type) {
	case *bfspb.Command_DeleteDir:
		// The holder deleted its locked directory: the locks end with it.
		// Like every lock that ends, each is in SetLocks as it was and in
		// RemovedLocks (see finishCleaning).
		for _, l := range s.locks.Subtree(op.DeleteDir.Path) {
			res.SetLocks = append(res.SetLocks, l)
			res.RemovedLocks = append(res.RemovedLocks, l.Path)
		}
	case *bfspb.Command_LockDir:
		s.observeEpoch(op.LockDir.Epoch)
	}
	for _, l := range res.SetLocks {
		s.locks.Set(l)
	}
	for _, p := range res.RemovedLocks {
		s.locks.Remove(p)
	}
}

func (s *Store) observeEpoch(e uint64) {
	for {
		cur := s.lastEpoch.Load()
		if cur >= e || s.lastEpoch.CompareAndSwap(cur, e) {
			return
		}
	}
}

// validate refuses commands with paths that are not normalized, so nothing
// unnormalized reaches the apply step, whoever built the command.
func validate(cmd *bfspb.Command) error {
	for _, p := range commandPaths(cmd) {
		if c, err := fspath.Clean(p); err != nil || c != p {
			return fmt.Errorf("%w: path %q is not normalized", ErrInvalid, p)
		}
	}
	for _, f := range cmd.Fences {
		if c, err := fspath.Clean(f.Path); err != nil || c != f.Path || f.Epoch == 0 {
			return fmt.Errorf("%w: fence %q at epoch %d", ErrInvalid, f.Path, f.Epoch)
		}
	}
	return nil
}

func commandPaths(cmd *bfspb.Command) []string {
	switch op := cmd.Op.(type) {
	case *bfspb.Command_Mkdir:
		return []string{op.Mkdir.Path}
	case *bfspb.Command_Create:
		return []string{op.Create.Path}
	case *bfspb.Command_DeleteFile:
		return []string{op.DeleteFile.Path}
	case *bfspb.Command_DeleteDir:
		return []string{op.DeleteDir.Path}
	case *bfspb.Command_Rename:
		return []string{op.Rename.Src, op.Rename.Dst}
	case *bfspb.Command_Chmod:
		return []string{op.Chmod.Path}
	case *bfspb.Command_AddBlock:
		return []string{op.AddBlock.Path}
	case *bfspb.Command_SyncBlock:
		return []string{op.SyncBlock.Path}
	case *bfspb.Command_CloseFile:
		return []string{op.CloseFile.Path}
	case *bfspb.Command_LockDir:
		return []string{op.LockDir.Path}
	case *bfspb.Command_UnlockDir:
		return []string{op.UnlockDir.Path}
	case *bfspb.Command_FinishCleaning:
		return []string{op.FinishCleaning.Path}
	}
	return nil
}

func commandIDs(cmd *bfspb.Command) []uint64 {
	switch op := cmd.Op.(type) {
	case *bfspb.Command_Mkdir:
		return op.Mkdir.Ids
	case *bfspb.Command_Create:
		return []uint64{op.Create.Id}
	case *bfspb.Command_AddBlock:
		return []uint64{uint64(op.AddBlock.GetBlock().GetId())}
	}
	return nil
}

// lockSet picks the paths cmd reads and writes. Every mutation read-locks
// the ancestors of what it changes, so nobody renames or deletes them
// underneath it, and write-locks the entries it changes, so nobody else
// creates, deletes or renames them at the same time.
func (s *Store) lockSet(cmd *bfspb.Command) (reads, writes []string, err error) {
	switch op := cmd.Op.(type) {
	case *bfspb.Command_Mkdir:
		if op.Mkdir.Parents {
			return s.mkdirAllLockSet(op.Mkdir.Path)
		}
	case *bfspb.Command_Rename:
		reads = append(ancestors(op.Rename.Src), ancestors(op.Rename.Dst)...)
		return reads, []string{op.Rename.Src, op.Rename.Dst}, nil
	case *bfspb.Command_OpenSession, *bfspb.Command_CloseSession:
		return nil, nil, nil
	}
	p := commandPaths(cmd)
	if len(p) != 1 {
		return nil, nil, fmt.Errorf("%w: unknown command %T", ErrInvalid, cmd.Op)
	}
	return ancestors(p[0]), p, nil
}

// mkdirAllLockSet write-locks the components of path that do not exist
// yet (they may be created) and read-locks the ones that do. What exists is
// read before locking; stillFits checks it again under the locks.
func (s *Store) mkdirAllLockSet(path string) (reads, writes []string, err error) {
	all := append(ancestors(path), path)
	n := existingPrefix(s.db, all)
	if n == len(all) {
		n-- // everything exists: lock the leaf to read it consistently
	}
	return all[:n], all[n:], nil
}

// stillFits reports whether the components of path that do not exist are
// all among the write-locked ones.
func stillFits(r pebble.Reader, path string, writes []string) bool {
	all := append(ancestors(path), path)
	return existingPrefix(r, all) >= len(all)-len(writes)
}

// existingPrefix returns how many leading paths of all exist as
// directories (all[0] is the root, which always does).
func existingPrefix(r pebble.Reader, all []string) int {
	info, err := getInfo(r, entryKey(rootParentID, ""))
	if err != nil {
		return 0
	}
	for i := 1; i < len(all); i++ {
		info, err = getInfo(r, entryKey(info.EntryId, fspath.Base(all[i])))
		if err != nil || info.Type != bfspb.FileType_FILE_TYPE_DIR {
			return i
		}
	}
	return len(all)
}

// ancestors returns the strict ancestors of a normalized path, root first.
// They are prefixes of p, not copies.
func ancestors(p string) []string {
	if p == fspath.Root {
		return nil
	}
	out := make([]string, 1, strings.Count(p, "/"))
	out[0] = fspath.Root
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}

// apply is the deterministic step: state + command -> batch contents.
func apply(r pebble.Reader, b *pebble.Batch, locks *dirlock.Table, cmd *bfspb.Command) (*Result, error) {
	switch op := cmd.Op.(type) {
	case *bfspb.Command_Mkdir:
		return applyMkdir(r, b, op.Mkdir, cmd.TimeNs)
	case *bfspb.Command_Create:
		return applyCreate(r, b, op.Create, cmd.TimeNs)
	case *bfspb.Command_DeleteFile:
		return applyDeleteFile(r, b, op.DeleteFile)
	case *bfspb.Command_DeleteDir:
		return applyDeleteDir(r, b, op.DeleteDir)
	case *bfspb.Command_Rename:
		return applyRename(r, b, op.Rename, cmd.TimeNs)
	case *bfspb.Command_Chmod:
		return applyChmod(r, b, op.Chmod, cmd.TimeNs)
	case *bfspb.Command_OpenSession:
		return applyOpenSession(r, b, op.OpenSession)
	case *bfspb.Command_CloseSession:
		return &Result{}, b.Delete(sessionKey(op.CloseSession.SessionId), nil)
	case *bfspb.Command_AddBlock:
		return applyAddBlock(r, b, op.AddBlock)
	case *bfspb.Command_SyncBlock:
		return applySyncBlock(r, b, op.SyncBlock)
	case *bfspb.Command_CloseFile:
		return applyCloseFile(r, b, op.CloseFile, cmd.TimeNs)
	case *bfspb.Command_LockDir:
		return applyLockDir(r, b, locks, op.LockDir, cmd.TimeNs)
	case *bfspb.Command_UnlockDir:
		return applyUnlockDir(r, b, locks, op.UnlockDir, cmd.TimeNs)
	case *bfspb.Command_FinishCleaning:
		return applyFinishCleaning(r, b, locks, op.FinishCleaning, cmd.TimeNs)
	}
	return nil, fmt.Errorf("%w: unknown command %T", ErrInvalid, cmd.Op)
}

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

func applyMkdir(r pebble.Reader, b *pebble.Batch, c *bfspb.MkdirCmd, now int64) (*Result, error) {
	mode, err := checkMode(c.Mode, DefaultDirMode)
	if err != nil {
		return nil, err
	}
	if c.Path == fspath.Root {
		if c.Parents {
			return lookupResult(r, c.Path)
		}
		return nil, ErrExists
	}
	comps := fspath.Split(c.Path)
	if len(c.Ids) < len(comps) && (c.Parents || len(c.Ids) < 1) {
		return nil, fmt.Errorf("%w: mkdir command carries %d ids", ErrInvalid, len(c.Ids))
	}
	dir, err := getInfo(r, entryKey(rootParentID, ""))
	if err != nil {
		return nil, err
	}
	for i, name := range comps {
		last := i == len(comps)-1
		next, err := getInfo(r, entryKey(dir.EntryId, name))
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
		id := c.Ids[0]
		if c.Parents {
			id = c.Ids[i]
		}
		next = newEntry(dir.EntryId, name, id, bfspb.FileType_FILE_TYPE_DIR, mode, now)
		if err := putEntry(b, next); err != nil {
			return nil, err
		}
		dir = next
	}
	return &Result{Info: dir}, nil
}

func applyCreate(r pebble.Reader, b *pebble.Batch, c *bfspb.CreateCmd, now int64) (*Result, error) {
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
	parent, err := dirID(r, fspath.Dir(c.Path))
	if err != nil {
		return nil, err
	}
	res := &Result{}
	old, err := getInfo(r, entryKey(parent, fspath.Base(c.Path)))
	switch {
	case err == nil && old.Type == bfspb.FileType_FILE_TYPE_DIR:
		return nil, ErrIsDirectory
	case err == nil && !c.Overwrite:
		return nil, ErrExists
	case err == nil:
		res.Freed = old.Blocks
		if err := deleteEntry(b, old); err != nil {
			return nil, err
		}
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	info := newEntry(parent, fspath.Base(c.Path), c.Id, bfspb.FileType_FILE_TYPE_FILE, mode, now)
	info.Replication = repl
	if c.OpenForWrite {
		info.WriterSession = c.SessionId
	}
	res.Info = info
	return res, putEntry(b, info)
}

func applyDeleteFile(r pebble.Reader, b *pebble.Batch, c *bfspb.DeleteFileCmd) (*Result, error) {
	info, err := lookup(r, c.Path)
	if err != nil {
		return nil, err
	}
	if info.Type == bfspb.FileType_FILE_TYPE_DIR {
		return nil, ErrIsDirectory
	}
	return &Result{Freed: info.Blocks}, deleteEntry(b, info)
}

func applyDeleteDir(r pebble.Reader, b *pebble.Batch, c *bfspb.DeleteDirCmd) (*Result, error) {
	if c.Path == fspath.Root {
		return nil, fmt.Errorf("%w: cannot delete the root directory", ErrInvalid)
	}
	dir, err := lookupDir(r, c.Path)
	if err != nil {
		return nil, err
	}
	if !c.Recursive {
		empty, err := isEmpty(r, dir)
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
	err = walk(r, dir, func(_ []byte, info *bfspb.FileInfo) {
		doomed = append(doomed, info)
		res.Freed = append(res.Freed, info.Blocks...)
	})
	if err != nil {
		return nil, err
	}
	for _, info := range doomed {
		if err := deleteEntry(b, info); err != nil {
			return nil, err
		}
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

func applyRename(r pebble.Reader, b *pebble.Batch, c *bfspb.RenameCmd, now int64) (*Result, error) {
	if c.Src == fspath.Root || c.Dst == fspath.Root {
		return nil, fmt.Errorf("%w: cannot rename the root directory", ErrInvalid)
	}
	src, err := lookup(r, c.Src)
	if err != nil {
		return nil, err
	}
	if c.Src == c.Dst {
		return &Result{Info: src}, nil
	}
	if src.Type == bfspb.FileType_FILE_TYPE_DIR && fspath.Within(c.Dst, c.Src) {
		return nil, fmt.Errorf("%w: cannot move %s into its own subtree", ErrInvalid, c.Src)
	}
	parent, err := dirID(r, fspath.Dir(c.Dst))
	if err != nil {
		return nil, err
	}
	res := &Result{}
	old, err := getInfo(r, entryKey(parent, fspath.Base(c.Dst)))
	switch {
	case err == nil && old.Type == bfspb.FileType_FILE_TYPE_DIR:
		return nil, ErrExists
	case err == nil && src.Type == bfspb.FileType_FILE_TYPE_DIR:
		return nil, ErrNotDirectory
	case err == nil:
		res.Freed = old.Blocks
		if err := deleteEntry(b, old); err != nil {
			return nil, err
		}
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	if err := b.Delete(keyOf(src), nil); err != nil {
		return nil, err
	}
	moved := proto.Clone(src).(*bfspb.FileInfo)
	moved.ParentId, moved.Name, moved.CtimeNs = parent, fspath.Base(c.Dst), now
	res.Info = moved
	return res, putEntry(b, moved)
}

func applyChmod(r pebble.Reader, b *pebble.Batch, c *bfspb.ChmodCmd, now int64) (*Result, error) {
	if c.Mode > maxMode {
		return nil, fmt.Errorf("%w: mode %o", ErrInvalid, c.Mode)
	}
	info, err := lookup(r, c.Path)
	if err != nil {
		return nil, err
	}
	info.Mode, info.CtimeNs = c.Mode, now
	return &Result{Info: info}, putEntry(b, info)
}

func applyOpenSession(r pebble.Reader, b *pebble.Batch, c *bfspb.OpenSessionCmd) (*Result, error) {
	if c.Session.GetSessionId() == "" {
		return nil, fmt.Errorf("%w: session without id", ErrInvalid)
	}
	v, err := proto.Marshal(c.Session)
	if err != nil {
		return nil, err
	}
	return &Result{}, b.Set(sessionKey(c.Session.SessionId), v, nil)
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
		if err := b.Set(openKey(info.WriterSession, info.EntryId), nil, nil); err != nil {
			return err
		}
	}
	return b.Merge(keyNextID, encodeUint64(info.EntryId), nil)
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
