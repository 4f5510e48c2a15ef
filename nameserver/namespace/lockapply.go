package namespace

// The apply steps of the lock commands: LockDir grants (or, with other
// sessions' files open below, starts the cleaning a grant waits for),
// UnlockDir moves a subtree's locks to CLEANING with what it must drain,
// FinishCleaning unlocks what a cleaning drained.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

func applyLockDir(st *step, c *bfspb.LockDirCmd) (*Result, error) {
	// The epoch a grant takes (so does the cleaning before a grant); a
	// retried grant keeps its own and takes none.
	epoch := st.next.lastEpoch + 1
	session := c.SessionId
	switch {
	case c.Operator && c.Holder == "":
		return nil, fmt.Errorf("%w: an operator lock needs a holder", ErrInvalid)
	case c.Operator && session != "":
		return nil, fmt.Errorf("%w: an operator lock is bound to no session", ErrInvalid)
	case c.Operator:
		session = string(OperatorSession(epoch))
	case session == "":
		return nil, fmt.Errorf("%w: locking needs a session", ErrInvalid)
	}
	info, err := lookupDir(st.r, c.Path)
	if err != nil {
		return nil, err
	}
	held, err := st.locks.CanLock(c.Path, dirlock.SessionID(session))
	if err != nil {
		return nil, err
	}
	if held != nil {
		return &Result{Info: info, Lock: held}, nil // a retry: same epoch
	}
	st.newEpoch()
	foreign := st.open.under(info.EntryId, func(writer string) bool { return writer != session })
	if len(foreign) > 0 {
		return startGrantCleaning(st.b, c.Path, epoch, info, foreign, st.now)
	}
	info.LockStatus, info.Holder, info.HolderSession = bfspb.LockStatus_LOCK_STATUS_LOCKED, c.Holder, session
	info.Epoch, info.LockSinceNs = epoch, st.now
	if err := putInfo(st.b, keyOf(info), info); err != nil {
		return nil, err
	}
	if err := st.b.Set(lockKey(info.EntryId), nil, nil); err != nil {
		return nil, err
	}
	l := lockOf(c.Path, info)
	return &Result{Info: info, Lock: &l, SetLocks: []dirlock.Lock{l}}, nil
}

// ReasonGrant is the reason recorded for the cleaning that comes before
// a grant.
const ReasonGrant = "grant"

// startGrantCleaning moves directory info, about to be granted while other
// sessions have files open for write in its subtree, to CLEANING at the
// grant's epoch, holder-less, with those files recorded (SPEC §6: a grant
// starts clean). Once they are sealed and closed, FinishCleaning makes the
// directory UNLOCKED again, with the cleaning in its history (reason
// "grant"), and the LockDir is tried again.
func startGrantCleaning(b *pebble.Batch, path string, epoch uint64, info *bfspb.FileInfo, files []uint64, now int64) (*Result, error) {
	info.LockStatus, info.Holder, info.HolderSession = bfspb.LockStatus_LOCK_STATUS_CLEANING, "", ""
	info.Epoch, info.LockSinceNs = epoch, now
	if err := putInfo(b, keyOf(info), info); err != nil {
		return nil, err
	}
	if err := b.Set(lockKey(info.EntryId), nil, nil); err != nil {
		return nil, err
	}
	rec := &bfspb.CleaningRecord{Epoch: epoch, Reason: ReasonGrant, Files: files, Dirs: []uint64{info.EntryId}, StartedNs: now}
	if err := putCleaning(b, info.EntryId, rec); err != nil {
		return nil, err
	}
	l := lockOf(path, info)
	return &Result{Info: info, Lock: &l, SetLocks: []dirlock.Lock{l}, Cleaning: rec}, nil
}

func applyUnlockDir(st *step, c *bfspb.UnlockDirCmd) (*Result, error) {
	l, err := st.locks.CanUnlock(c.Path, dirlock.SessionID(c.SessionId), c.Force, dirlock.Epoch(c.Epoch))
	if errors.Is(err, dirlock.ErrUnlocked) {
		// The lock table knows only locked paths: "unlocked" is the
		// answer for a directory, not for a path that is missing or a
		// file.
		if _, lerr := lookupDir(st.r, c.Path); lerr != nil {
			return nil, lerr
		}
	}
	if err != nil {
		return &Result{Lock: &l}, err
	}
	files := st.open.under(l.EntryID, nil)
	dirs, err := lockedDirs(st.r, st.locks.Subtree(c.Path))
	if err != nil {
		return nil, err
	}
	if files, err = takeOverCleanings(st.r, st.b, dirs, files); err != nil {
		return nil, err
	}
	rec := &bfspb.CleaningRecord{Epoch: uint64(l.Epoch), Reason: c.Reason, Files: files, StartedNs: st.now}
	for _, d := range dirs {
		rec.Dirs = append(rec.Dirs, d.info.EntryId)
	}
	if len(files) == 0 {
		return finishCleaning(st.r, st.b, c.Path, rec, dirs, 0, st.now)
	}
	res := &Result{Cleaning: rec}
	for _, d := range dirs {
		info := d.info
		if d.lock.Status == dirlock.Cleaning {
			continue // cleaning already, now as part of this one
		}
		info.LockStatus, info.LockSinceNs = bfspb.LockStatus_LOCK_STATUS_CLEANING, st.now
		if err := putInfo(st.b, keyOf(info), info); err != nil {
			return nil, err
		}
		cl := lockOf(d.lock.Path, info)
		res.SetLocks = append(res.SetLocks, cl)
		if d.lock.Path == c.Path {
			res.Info, res.Lock = info, &cl
		}
	}
	return res, putCleaning(st.b, res.Info.EntryId, rec)
}

// takeOverCleanings makes the cleaning an unlock starts the only one of
// its subtree: a directory below that is CLEANING already (its holder
// unlocked it first) hands its files over to it and its record is
// deleted in b. Its coordinator then finds nothing to finish, and no
// record of it is left to finish a later lock of that directory, here or
// after a restart. It returns files with the handed-over ones added.
func takeOverCleanings(r pebble.Reader, b *pebble.Batch, dirs []lockedDir, files []uint64) ([]uint64, error) {
	for _, d := range dirs {
		if d.lock.Status != dirlock.Cleaning {
			continue
		}
		rec, err := getCleaning(r, d.info.EntryId)
		if err != nil || rec == nil {
			return nil, err
		}
		for _, f := range rec.Files {
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
		if err := b.Delete(cleanKey(d.info.EntryId), nil); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// lockedDir is a directory an unlock releases: its lock as the table has
// it (inTable unset for a directory known by its entry id only) and its
// stored entry.
type lockedDir struct {
	lock    dirlock.Lock
	inTable bool
	info    *bfspb.FileInfo
}

// lockedDirs reads the directories of the given locks.
func lockedDirs(r pebble.Reader, locks []dirlock.Lock) ([]lockedDir, error) {
	out := make([]lockedDir, 0, len(locks))
	for _, l := range locks {
		info, err := getLockedDir(r, l)
		if err != nil {
			return nil, err
		}
		out = append(out, lockedDir{lock: l, inTable: true, info: info})
	}
	return out, nil
}

// getLockedDir reads the directory of a lock the table holds, by its
// path (a locked directory never moves), checking that it is still the
// locked directory.
func getLockedDir(r pebble.Reader, l dirlock.Lock) (*bfspb.FileInfo, error) {
	info, err := lookupDir(r, l.Path)
	if err == nil && info.EntryId == l.EntryID {
		return info, nil
	}
	_, info, err = pathOf(r, l.EntryID)
	if err != nil {
		return nil, fmt.Errorf("namespace: locked directory %s: %w", l.Path, err)
	}
	return info, nil
}

func applyFinishCleaning(st *step, c *bfspb.FinishCleaningCmd) (*Result, error) {
	info, err := lookupDir(st.r, c.Path)
	if err != nil {
		return nil, err
	}
	if info.EntryId != c.EntryId {
		return nil, fmt.Errorf("%w: %s is no longer directory %d", ErrNotFound, c.Path, c.EntryId)
	}
	rec, err := getCleaning(st.r, info.EntryId)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		// Finished already (a retry), or handed over to the cleaning of a
		// directory above (see takeOverCleanings): nothing of this epoch
		// is left to finish.
		return &Result{Info: info}, nil
	}
	if rec.Epoch != c.Epoch || info.LockStatus != bfspb.LockStatus_LOCK_STATUS_CLEANING || info.Epoch != c.Epoch {
		return nil, fmt.Errorf("%w: %s is %v at epoch %d (record of epoch %d), not cleaning epoch %d",
			dirlock.ErrStaleEpoch, c.Path, info.LockStatus, info.Epoch, rec.Epoch, c.Epoch)
	}
	if err := st.b.Delete(cleanKey(info.EntryId), nil); err != nil {
		return nil, err
	}
	dirs, err := cleanedDirs(st.r, st.locks, c.Path, rec)
	if err != nil {
		return nil, err
	}
	return finishCleaning(st.r, st.b, c.Path, rec, dirs, c.BytesTruncated, st.now)
}

// cleanedDirs reads the directories rec cleaned, in its order. Their
// locks are CLEANING under path in the table (nothing can move or delete
// them meanwhile); one that is not is read by its entry id.
func cleanedDirs(r pebble.Reader, locks *dirlock.Table, path string, rec *bfspb.CleaningRecord) ([]lockedDir, error) {
	byID := make(map[uint64]dirlock.Lock, len(rec.Dirs))
	for _, l := range locks.Subtree(path) {
		byID[l.EntryID] = l
	}
	out := make([]lockedDir, 0, len(rec.Dirs))
	for _, id := range rec.Dirs {
		if l, ok := byID[id]; ok {
			info, err := getLockedDir(r, l)
			if err != nil {
				return nil, err
			}
			out = append(out, lockedDir{lock: l, inTable: true, info: info})
			continue
		}
		p, info, err := pathOf(r, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, lockedDir{lock: dirlock.Lock{Path: p, EntryID: id}, info: info})
	}
	return out, nil
}

// finishCleaning unlocks the directories rec cleaned (dirs, read by the
// caller) and records their history.
//
// Each lock it ends is in both lists of the Result: in SetLocks as it was
// (LOCKED when the unlock had nothing to drain, else CLEANING), so the
// table records no change for it before RemovedLocks drops it, and in
// RemovedLocks. The SetLocks entry is how watchers learn which lock ended:
// its holder, session and epoch.
func finishCleaning(r pebble.Reader, b *pebble.Batch, path string, rec *bfspb.CleaningRecord, dirs []lockedDir, truncated, now int64) (*Result, error) {
	res := &Result{Cleaning: rec}
	for _, d := range dirs {
		info, id := d.info, d.info.EntryId
		entry := &bfspb.LockHistoryEntry{
			Holder: info.Holder, Epoch: info.Epoch, LockedAtNs: info.LockSinceNs, UnlockedAtNs: now,
			Reason: rec.Reason,
		}
		if id == rec.Dirs[0] {
			entry.FilesSealed, entry.BytesTruncated = int64(len(rec.Files)), truncated
		}
		if d.inTable {
			entry.LockedAtNs = d.lock.Since.UnixNano()
			res.SetLocks = append(res.SetLocks, d.lock)
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
		res.RemovedLocks = append(res.RemovedLocks, d.lock.Path)
		if d.lock.Path == path {
			res.Info = info
			res.Lock = &dirlock.Lock{Path: path, Status: dirlock.Unlocked, Epoch: dirlock.Epoch(info.Epoch), EntryID: id}
		}
	}
	return res, nil
}
