package namespace

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// MaxHistory is how many past locks are kept per directory.
const MaxHistory = 64

// Locks returns the in-memory lock table. It mirrors what is stored and is
// changed only by Apply (and by Open, which loads it).
func (s *Store) Locks() *dirlock.Table { return s.locks }

// AllocEpoch reserves a new lock epoch. Like ids, epochs are handed out in
// memory and recorded by the batch that uses them, max-merged, so they
// never go back, also across restarts.
func (s *Store) AllocEpoch() uint64 { return s.lastEpoch.Add(1) }

// loadLocks fills the lock table from the lock index.
func (s *Store) loadLocks() error {
	lower, upper := prefixBounds(prefixLock)
	var ids []uint64
	if err := scanKeys(s.db, lower, upper, func(k, _ []byte) error {
		ids = append(ids, decodeUint64(k[1:]))
		return nil
	}); err != nil {
		return err
	}
	for _, id := range ids {
		path, info, err := pathOf(s.db, id)
		if err != nil {
			return fmt.Errorf("namespace: locked directory %d: %w", id, err)
		}
		s.locks.Set(lockOf(path, info))
	}
	return nil
}

func lockOf(path string, info *bfspb.FileInfo) dirlock.Lock {
	st := dirlock.Locked
	if info.LockStatus == bfspb.LockStatus_LOCK_STATUS_CLEANING {
		st = dirlock.Cleaning
	}
	return dirlock.Lock{
		Path: path, Status: st, Holder: info.Holder, Session: dirlock.SessionID(info.HolderSession),
		Epoch: dirlock.Epoch(info.Epoch), Since: time.Unix(0, info.LockSinceNs), EntryID: info.EntryId,
	}
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

// guard is the lock check of every namespace mutation, run under the
// command's path locks so no lock transition can slip in between the check
// and the commit.
func guard(locks *dirlock.Table, cmd *bfspb.Command) error {
	switch op := cmd.Op.(type) {
	case *bfspb.Command_Mkdir:
		return locks.Check(op.Mkdir.Path, dirlock.SessionID(op.Mkdir.SessionId))
	case *bfspb.Command_Create:
		return locks.Check(op.Create.Path, dirlock.SessionID(op.Create.SessionId))
	case *bfspb.Command_DeleteFile:
		return locks.Check(op.DeleteFile.Path, dirlock.SessionID(op.DeleteFile.SessionId))
	case *bfspb.Command_DeleteDir:
		return locks.CheckSubtree(op.DeleteDir.Path, dirlock.SessionID(op.DeleteDir.SessionId))
	case *bfspb.Command_Rename:
		sid := dirlock.SessionID(op.Rename.SessionId)
		if err := locks.CheckSubtree(op.Rename.Src, sid); err != nil {
			return err
		}
		return locks.Check(op.Rename.Dst, sid)
	case *bfspb.Command_Chmod:
		return locks.Check(op.Chmod.Path, dirlock.SessionID(op.Chmod.SessionId))
	case *bfspb.Command_AddBlock:
		return locks.Check(op.AddBlock.Path, dirlock.SessionID(op.AddBlock.SessionId))
	case *bfspb.Command_SyncBlock:
		return locks.Check(op.SyncBlock.Path, dirlock.SessionID(op.SyncBlock.SessionId))
	}
	// CloseFile is the nameserver closing a file (it drains locks rather
	// than being stopped by them); sessions and lock commands decide for
	// themselves.
	return nil
}

// OperatorSession is the session id recorded for an operator lock: no
// client ever has it, so nobody mutates under such a lock, and no session
// expiry releases it.
func OperatorSession(epoch uint64) string { return fmt.Sprintf("operator-%d", epoch) }

func applyLockDir(r pebble.Reader, b *pebble.Batch, locks *dirlock.Table, c *bfspb.LockDirCmd, now int64) (*Result, error) {
	session := c.SessionId
	switch {
	case c.Epoch == 0:
		return nil, fmt.Errorf("%w: lock command without an epoch", ErrInvalid)
	case c.Operator && c.Holder == "":
		return nil, fmt.Errorf("%w: an operator lock needs a holder", ErrInvalid)
	case c.Operator:
		session = OperatorSession(c.Epoch)
	case session == "":
		return nil, fmt.Errorf("%w: locking needs a session", ErrInvalid)
	}
	info, err := lookupDir(r, c.Path)
	if err != nil {
		return nil, err
	}
	held, err := locks.CanLock(c.Path, dirlock.SessionID(session))
	if err != nil {
		return nil, err
	}
	if held != nil {
		return &Result{Info: info, Lock: held}, nil // a retry: same epoch
	}
	info.LockStatus, info.Holder, info.HolderSession = bfspb.LockStatus_LOCK_STATUS_LOCKED, c.Holder, session
	info.Epoch, info.LockSinceNs = c.Epoch, now
	if err := putInfo(b, keyOf(info), info); err != nil {
		return nil, err
	}
	if err := b.Set(lockKey(info.EntryId), nil, nil); err != nil {
		return nil, err
	}
	if err := b.Merge(keyEpoch, encodeUint64(c.Epoch), nil); err != nil {
		return nil, err
	}
	l := lockOf(c.Path, info)
	return &Result{Info: info, Lock: &l, SetLocks: []dirlock.Lock{l}}, nil
}

func applyUnlockDir(r pebble.Reader, b *pebble.Batch, locks *dirlock.Table, c *bfspb.UnlockDirCmd, now int64) (*Result, error) {
	l, err := locks.CanUnlock(c.Path, dirlock.SessionID(c.SessionId), c.Force, dirlock.Epoch(c.Epoch))
	if err != nil {
		return &Result{Lock: &l}, err
	}
	files, err := openFilesUnder(r, c.Path)
	if err != nil {
		return nil, err
	}
	rec := &bfspb.CleaningRecord{Epoch: uint64(l.Epoch), Reason: c.Reason, Files: files, StartedNs: now}
	res := &Result{Cleaning: rec}
	for _, sub := range locks.Subtree(c.Path) {
		info, err := getLockedDir(r, sub)
		if err != nil {
			return nil, err
		}
		rec.Dirs = append(rec.Dirs, info.EntryId)
		info.LockStatus, info.LockSinceNs = bfspb.LockStatus_LOCK_STATUS_CLEANING, now
		if err := putInfo(b, keyOf(info), info); err != nil {
			return nil, err
		}
		cl := lockOf(sub.Path, info)
		res.SetLocks = append(res.SetLocks, cl)
		if sub.Path == c.Path {
			res.Info, res.Lock = info, &cl
		}
	}
	if len(files) == 0 {
		return finishCleaning(r, b, locks, c.Path, rec, 0, now)
	}
	v, err := proto.Marshal(rec)
	if err != nil {
		return nil, err
	}
	return res, b.Set(cleanKey(res.Info.EntryId), v, nil)
}

// getLockedDir reads the directory of a lock the table holds.
func getLockedDir(r pebble.Reader, l dirlock.Lock) (*bfspb.FileInfo, error) {
	_, info, err := pathOf(r, l.EntryID)
	if err != nil {
		return nil, fmt.Errorf("namespace: locked directory %s: %w", l.Path, err)
	}
	return info, nil
}

// openFilesUnder lists the files open for write (by any session) at or
// below dir.
func openFilesUnder(r pebble.Reader, dir string) ([]uint64, error) {
	lower, upper := openBounds("")
	var ids []uint64
	err := scanKeys(r, lower, upper, func(k, _ []byte) error {
		_, id := openKeyEntry(k)
		ids = append(ids, id)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, id := range ids {
		p, _, err := pathOf(r, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if fspath.Within(p, dir) {
			out = append(out, id)
		}
	}
	return out, nil
}

func applyFinishCleaning(r pebble.Reader, b *pebble.Batch, locks *dirlock.Table, c *bfspb.FinishCleaningCmd, now int64) (*Result, error) {
	info, err := lookupDir(r, c.Path)
	if err != nil {
		return nil, err
	}
	if info.EntryId != c.EntryId {
		return nil, fmt.Errorf("%w: %s is no longer directory %d", ErrNotFound, c.Path, c.EntryId)
	}
	v, closer, err := r.Get(cleanKey(info.EntryId))
	if errors.Is(err, pebble.ErrNotFound) {
		return &Result{Info: info}, nil // finished already: a retry
	}
	if err != nil {
		return nil, fmt.Errorf("namespace: read: %w", err)
	}
	rec := &bfspb.CleaningRecord{}
	err = proto.Unmarshal(v, rec)
	closer.Close()
	if err != nil {
		return nil, fmt.Errorf("namespace: corrupt cleaning record of %s: %w", c.Path, err)
	}
	if rec.Epoch != c.Epoch {
		return nil, fmt.Errorf("%w: %s is cleaning epoch %d, not %d", dirlock.ErrStaleEpoch, c.Path, rec.Epoch, c.Epoch)
	}
	if err := b.Delete(cleanKey(info.EntryId), nil); err != nil {
		return nil, err
	}
	return finishCleaning(r, b, locks, c.Path, rec, c.BytesTruncated, now)
}

// finishCleaning unlocks every directory rec cleaned and records history.
func finishCleaning(r pebble.Reader, b *pebble.Batch, locks *dirlock.Table, path string, rec *bfspb.CleaningRecord, truncated, now int64) (*Result, error) {
	res := &Result{Cleaning: rec}
	for i, id := range rec.Dirs {
		p, info, err := pathOf(r, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		entry := &bfspb.LockHistoryEntry{
			Holder: info.Holder, Epoch: info.Epoch, LockedAtNs: info.LockSinceNs, UnlockedAtNs: now,
			Reason: rec.Reason,
		}
		if i == 0 {
			entry.FilesSealed, entry.BytesTruncated = int64(len(rec.Files)), truncated
		}
		if l, ok := locks.Get(p); ok {
			entry.LockedAtNs = l.Since.UnixNano()
		}
		if err := addHistory(r, b, id, entry); err != nil {
			return nil, err
		}
		info.LockStatus, info.Holder, info.HolderSession, info.LockSinceNs = bfspb.LockStatus_LOCK_STATUS_UNLOCKED, "", "", now
		if err := putInfo(b, keyOf(info), info); err != nil {
			return nil, err
		}
		if err := b.Delete(lockKey(id), nil); err != nil {
			return nil, err
		}
		res.RemovedLocks = append(res.RemovedLocks, p)
		if p == path {
			res.Info = info
			res.Lock = &dirlock.Lock{Path: p, Status: dirlock.Unlocked, Epoch: dirlock.Epoch(info.Epoch), EntryID: id}
		}
	}
	return res, nil
}

// addHistory appends entry to dir's history, dropping the oldest beyond
// MaxHistory.
func addHistory(r pebble.Reader, b *pebble.Batch, dir uint64, entry *bfspb.LockHistoryEntry) error {
	v, err := proto.Marshal(entry)
	if err != nil {
		return err
	}
	if err := b.Set(historyKey(dir, entry.Epoch), v, nil); err != nil {
		return err
	}
	lower, upper := historyBounds(dir)
	var keys [][]byte
	if err := scanKeys(r, lower, upper, func(k, _ []byte) error { keys = append(keys, k); return nil }); err != nil {
		return err
	}
	for i := 0; i < len(keys)+1-MaxHistory; i++ {
		if err := b.Delete(keys[i], nil); err != nil {
			return err
		}
	}
	return nil
}

// History returns the past locks of the directory path, oldest first.
func (s *Store) History(path string) ([]*bfspb.LockHistoryEntry, error) {
	p, err := clean(path)
	if err != nil {
		return nil, err
	}
	info, err := lookupDir(s.db, p)
	if err != nil {
		return nil, err
	}
	lower, upper := historyBounds(info.EntryId)
	var out []*bfspb.LockHistoryEntry
	err = scanKeys(s.db, lower, upper, func(k, v []byte) error {
		e := &bfspb.LockHistoryEntry{}
		if err := proto.Unmarshal(v, e); err != nil {
			return fmt.Errorf("namespace: corrupt history %x: %w", k, err)
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// Cleaning is a directory whose cleaning is in progress.
type Cleaning struct {
	Path   string
	Record *bfspb.CleaningRecord
	Dir    *bfspb.FileInfo
}

// Cleanings returns every directory found CLEANING (to resume after a
// restart).
func (s *Store) Cleanings() ([]Cleaning, error) {
	lower, upper := prefixBounds(prefixClean)
	var out []Cleaning
	err := scanKeys(s.db, lower, upper, func(k, v []byte) error {
		rec := &bfspb.CleaningRecord{}
		if err := proto.Unmarshal(v, rec); err != nil {
			return fmt.Errorf("namespace: corrupt cleaning record %x: %w", k, err)
		}
		path, info, err := pathOf(s.db, decodeUint64(k[1:]))
		if err != nil {
			return err
		}
		out = append(out, Cleaning{Path: path, Record: rec, Dir: info})
		return nil
	})
	return out, err
}
