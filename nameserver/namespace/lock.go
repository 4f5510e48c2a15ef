package namespace

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/golang/glog"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// MaxHistory is how many past locks are kept per directory.
const MaxHistory = 64

// Locks returns the in-memory lock table. It mirrors what is stored and is
// changed only by Apply (and by Open, which loads it).
func (s *Store) Locks() *dirlock.Table { return s.locks }

// allocEpoch reserves a new lock epoch. Like ids, epochs are handed out in
// memory and recorded by the batch that uses them, max-merged, so they
// never go back, also across restarts. Apply takes one for a LockDir under
// the directory's path lock, so the grants of one directory get epochs
// that grow in the order they commit.
func (s *Store) allocEpoch() uint64 { return s.lastEpoch.Add(1) }

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
// and the commit: the fences it carries (a client that lost a lock hears
// STALE_EPOCH, whoever holds the directory now), then the directory locks
// over (and for a recursive delete or a move, under) its paths.
func guard(locks *dirlock.Table, cmd *bfspb.Command) error {
	if len(cmd.Fences) > 0 {
		err := locks.CheckFences(commandPaths(cmd), dirlock.SessionID(commandSession(cmd)), Fences(cmd.Fences))
		if err != nil {
			return err
		}
	}
	return guardLocks(locks, cmd)
}

// Fences converts fences from the wire.
func Fences(in []*bfspb.Fence) []dirlock.Fence {
	out := make([]dirlock.Fence, len(in))
	for i, f := range in {
		out[i] = dirlock.Fence{Path: f.Path, Epoch: dirlock.Epoch(f.Epoch)}
	}
	return out
}

func guardLocks(locks *dirlock.Table, cmd *bfspb.Command) error {
	switch op := cmd.Op.(type) {
	case *bfspb.Command_DeleteDir:
		return locks.CheckSubtree(op.DeleteDir.Path, dirlock.SessionID(op.DeleteDir.SessionId))
	case *bfspb.Command_Rename:
		sid := dirlock.SessionID(op.Rename.SessionId)
		if err := locks.CheckMove(op.Rename.Src, sid); err != nil {
			return err
		}
		return locks.Check(op.Rename.Dst, sid)
	case *bfspb.Command_Mkdir, *bfspb.Command_Create, *bfspb.Command_DeleteFile,
		*bfspb.Command_Chmod, *bfspb.Command_AddBlock, *bfspb.Command_SyncBlock:
		return locks.Check(commandPaths(cmd)[0], dirlock.SessionID(commandSession(cmd)))
	}
	// CloseFile is the nameserver closing a file (it drains locks rather
	// than being stopped by them); sessions and lock commands decide for
	// themselves.
	return nil
}

// commandSession is the session a mutation is made for ("" for commands
// of the nameserver's own).
func commandSession(cmd *bfspb.Command) string {
	switch op := cmd.Op.(type) {
	case *bfspb.Command_Mkdir:
		return op.Mkdir.SessionId
	case *bfspb.Command_Create:
		return op.Create.SessionId
	case *bfspb.Command_DeleteFile:
		return op.DeleteFile.SessionId
	case *bfspb.Command_DeleteDir:
		return op.DeleteDir.SessionId
	case *bfspb.Command_Rename:
		return op.Rename.SessionId
	case *bfspb.Command_Chmod:
		return op.Chmod.SessionId
	case *bfspb.Command_AddBlock:
		return op.AddBlock.SessionId
	case *bfspb.Command_SyncBlock:
		return op.SyncBlock.SessionId
	}
	return ""
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
	foreign, err := openFilesUnder(r, info.EntryId, func(writer string) bool { return writer != session })
	if err != nil {
		return nil, err
	}
	if len(foreign) > 0 {
		return startGrantCleaning(b, c, info, foreign, now)
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

// ReasonGrant is the reason recorded for the cleaning that comes before
// a grant.
const ReasonGrant = "grant"

// startGrantCleaning moves directory info, about to be granted while other
// sessions have files open for write in its subtree, to CLEANING at the
// grant's epoch, holder-less, with those files recorded (SPEC §6: a grant
// starts clean). Once they are sealed and closed, FinishCleaning makes the
// directory UNLOCKED again, with the cleaning in its history (reason
// "grant"), and the LockDir is tried again.
func startGrantCleaning(b *pebble.Batch, c *bfspb.LockDirCmd, info *bfspb.FileInfo, files []uint64, now int64) (*Result, error) {
	info.LockStatus, info.Holder, info.HolderSession = bfspb.LockStatus_LOCK_STATUS_CLEANING, "", ""
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
	rec := &bfspb.CleaningRecord{Epoch: c.Epoch, Reason: ReasonGrant, Files: files, Dirs: []uint64{info.EntryId}, StartedNs: now}
	v, err := proto.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if err := b.Set(cleanKey(info.EntryId), v, nil); err != nil {
		return nil, err
	}
	l := lockOf(c.Path, info)
	return &Result{Info: info, Lock: &l, SetLocks: []dirlock.Lock{l}, Cleaning: rec}, nil
}

func applyUnlockDir(r pebble.Reader, b *pebble.Batch, locks *dirlock.Table, c *bfspb.UnlockDirCmd, now int64) (*Result, error) {
	l, err := locks.CanUnlock(c.Path, dirlock.SessionID(c.SessionId), c.Force, dirlock.Epoch(c.Epoch))
	if errors.Is(err, dirlock.ErrUnlocked) {
		// The lock table knows only locked paths: "unlocked" is the
		// answer for a directory, not for a path that is missing or a
		// file.
		if _, lerr := lookupDir(r, c.Path); lerr != nil {
			return nil, lerr
		}
	}
	if err != nil {
		return &Result{Lock: &l}, err
	}
	files, err := openFilesUnder(r, l.EntryID, nil)
	if err != nil {
		return nil, err
	}
	dirs, err := lockedDirs(r, locks.Subtree(c.Path))
	if err != nil {
		return nil, err
	}
	if files, err = takeOverCleanings(r, b, dirs, files); err != nil {
		return nil, err
	}
	rec := &bfspb.CleaningRecord{Epoch: uint64(l.Epoch), Reason: c.Reason, Files: files, StartedNs: now}
	for _, d := range dirs {
		rec.Dirs = append(rec.Dirs, d.info.EntryId)
	}
	if len(files) == 0 {
		return finishCleaning(r, b, c.Path, rec, dirs, 0, now)
	}
	res := &Result{Cleaning: rec}
	for _, d := range dirs {
		info := d.info
		if d.lock.Status == dirlock.Cleaning {
			continue // cleaning already, now as part of this one
		}
		info.LockStatus, info.LockSinceNs = bfspb.LockStatus_LOCK_STATUS_CLEANING, now
		if err := putInfo(b, keyOf(info), info); err != nil {
			return nil, err
		}
		cl := lockOf(d.lock.Path, info)
		res.SetLocks = append(res.SetLocks, cl)
		if d.lock.Path == c.Path {
			res.Info, res.Lock = info, &cl
		}
	}
	v, err := proto.Marshal(rec)
	if err != nil {
		return nil, err
	}
	return res, b.Set(cleanKey(res.Info.EntryId), v, nil)
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

// getCleaning reads the cleaning record of directory dir; nil if it has
// none.
func getCleaning(r pebble.Reader, dir uint64) (*bfspb.CleaningRecord, error) {
	v, closer, err := r.Get(cleanKey(dir))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("namespace: read: %w", err)
	}
	defer closer.Close()
	rec := &bfspb.CleaningRecord{}
	if err := proto.Unmarshal(v, rec); err != nil {
		return nil, fmt.Errorf("namespace: corrupt cleaning record of directory %d: %w", dir, err)
	}
	return rec, nil
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

// openFilesUnder lists the files open for write in the subtree of
// directory dir, by the sessions keep accepts (nil: by any session). It
// reads where each open file is once per directory on the way up, not
// once per file.
func openFilesUnder(r pebble.Reader, dir uint64, keep func(writer string) bool) ([]uint64, error) {
	lower, upper := openBounds("")
	var ids []uint64
	err := scanKeys(r, lower, upper, func(k, _ []byte) error {
		writer, id := openKeyEntry(k)
		if keep == nil || keep(writer) {
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	under := map[uint64]bool{dir: true, RootID: dir == RootID}
	var out []uint64
	for _, id := range ids {
		in, err := isUnder(r, id, under)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if in {
			out = append(out, id)
		}
	}
	return out, nil
}

// isUnder reports whether entry id lies in the subtree whose answers
// known holds (the subtree's root true, the namespace's root false), and
// records the answer for the directories it walked through.
func isUnder(r pebble.Reader, id uint64, known map[uint64]bool) (bool, error) {
	var walked []uint64
	cur := id
	for {
		if in, ok := known[cur]; ok {
			for _, w := range walked {
				known[w] = in
			}
			return in, nil
		}
		v, closer, err := r.Get(idKey(cur))
		if errors.Is(err, pebble.ErrNotFound) {
			return false, ErrNotFound
		}
		if err != nil {
			return false, fmt.Errorf("namespace: read: %w", err)
		}
		parent := decodeUint64(v[:8])
		closer.Close()
		if cur != id {
			walked = append(walked, cur)
		}
		cur = parent
	}
}

func applyFinishCleaning(r pebble.Reader, b *pebble.Batch, locks *dirlock.Table, c *bfspb.FinishCleaningCmd, now int64) (*Result, error) {
	info, err := lookupDir(r, c.Path)
	if err != nil {
		return nil, err
	}
	if info.EntryId != c.EntryId {
		return nil, fmt.Errorf("%w: %s is no longer directory %d", ErrNotFound, c.Path, c.EntryId)
	}
	rec, err := getCleaning(r, info.EntryId)
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
	if err := b.Delete(cleanKey(info.EntryId), nil); err != nil {
		return nil, err
	}
	dirs, err := cleanedDirs(r, locks, c.Path, rec)
	if err != nil {
		return nil, err
	}
	return finishCleaning(r, b, c.Path, rec, dirs, c.BytesTruncated, now)
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

// addHistory appends entry to dir's history, dropping the oldest beyond
// MaxHistory.
//
// Entries are keyed by epoch, and only the oldest is ever dropped, so the
// tombstones of dropped entries all sort before the live ones: a read from
// the oldest end would step over every one of them not yet compacted away,
// thousands for a directory locked over and over. The newest entry says
// how many entries there are and which is the oldest (stored,
// oldest_epoch), so adding one reads the newest, and, once the history is
// full, the oldest two (the one dropped and the one after it): a few
// steps, whatever the history's length.
func addHistory(r pebble.Reader, b *pebble.Batch, dir uint64, entry *bfspb.LockHistoryEntry) error {
	lower, upper := historyBounds(dir)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("namespace: iterate: %w", err)
	}
	err = placeHistory(it, b, dir, entry)
	if cerr := it.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("namespace: iterate: %w", cerr)
	}
	if err != nil {
		return err
	}
	v, err := proto.Marshal(entry)
	if err != nil {
		return err
	}
	return b.Set(historyKey(dir, entry.Epoch), v, nil)
}

// placeHistory sets entry's bookkeeping, deleting in b the entry it
// pushes out of the history.
func placeHistory(it *pebble.Iterator, b *pebble.Batch, dir uint64, entry *bfspb.LockHistoryEntry) error {
	if !it.Last() {
		entry.Stored, entry.OldestEpoch = 1, entry.Epoch
		return it.Error()
	}
	newest := &bfspb.LockHistoryEntry{}
	if err := proto.Unmarshal(it.Value(), newest); err != nil {
		return fmt.Errorf("namespace: corrupt history %x: %w", it.Key(), err)
	}
	switch {
	case newest.Stored <= 0 || newest.Stored > MaxHistory:
		return recountHistory(it, b, entry) // stored without the bookkeeping
	case newest.Stored < MaxHistory:
		entry.Stored, entry.OldestEpoch = newest.Stored+1, newest.OldestEpoch
		return nil
	}
	if err := b.Delete(historyKey(dir, newest.OldestEpoch), nil); err != nil {
		return err
	}
	entry.Stored, entry.OldestEpoch = MaxHistory, entry.Epoch
	if it.SeekGE(historyKey(dir, newest.OldestEpoch+1)) {
		entry.OldestEpoch = historyEpoch(it.Key())
	}
	return it.Error()
}

// recountHistory sets entry's bookkeeping by reading the history from its
// newest end, dropping (in b) whatever lies beyond MaxHistory with entry.
func recountHistory(it *pebble.Iterator, b *pebble.Batch, entry *bfspb.LockHistoryEntry) error {
	entry.Stored, entry.OldestEpoch = 1, entry.Epoch
	for valid := it.Last(); valid; valid = it.Prev() {
		if entry.Stored == MaxHistory {
			if err := b.Delete(append([]byte(nil), it.Key()...), nil); err != nil {
				return err
			}
			continue
		}
		entry.Stored++
		entry.OldestEpoch = historyEpoch(it.Key())
	}
	return it.Error()
}

// historyEpoch is the epoch a history key ends with.
func historyEpoch(k []byte) uint64 { return decodeUint64(k[len(k)-8:]) }

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
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("namespace: iterate: %w", err)
	}
	defer it.Close()
	// Newest first, and no further than the history's length: below the
	// oldest entry lie only the tombstones of dropped ones.
	var out []*bfspb.LockHistoryEntry
	for valid := it.Last(); valid && len(out) < MaxHistory; valid = it.Prev() {
		e := &bfspb.LockHistoryEntry{}
		if err := proto.Unmarshal(it.Value(), e); err != nil {
			return nil, fmt.Errorf("namespace: corrupt history %x: %w", it.Key(), err)
		}
		e.Stored, e.OldestEpoch = 0, 0
		out = append(out, e)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("namespace: iterate: %w", err)
	}
	slices.Reverse(out)
	return out, nil
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
		if errors.Is(err, ErrNotFound) {
			// A record outliving its directory cannot finish anything;
			// refusing to start over it would take the namespace down.
			glog.Errorf("namespace: cleaning record of epoch %d names directory %d, which is gone; ignoring it", rec.Epoch, decodeUint64(k[1:]))
			return nil
		}
		if err != nil {
			return err
		}
		out = append(out, Cleaning{Path: path, Record: rec, Dir: info})
		return nil
	})
	return out, err
}
