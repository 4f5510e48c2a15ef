package namespace

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/proto/bfspb"
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

// step is what an apply step works with: the committed state (paths
// looked up through the directory cache), the batch it fills, the lock
// table and the open-file index as committed, and the command's time.
// The command's path locks keep what it reads of them from changing.
type step struct {
	r     pebble.Reader
	b     *pebble.Batch
	locks *dirlock.Table
	open  *openIndex
	now   int64
}

// Apply executes cmd as one Pebble batch committed with pebble.Sync. When it
// returns nil the mutation is durable.
func (s *Store) Apply(cmd *bfspb.Command) (*Result, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	o, err := bind(cmd)
	if err != nil {
		return nil, err
	}
	if err := validate(o.paths(), cmd.Fences); err != nil {
		return nil, err
	}
	for {
		reads, writes := o.d.lockSet(s.db, o.msg)
		release := s.paths.acquire(reads, writes)
		res, err := s.applyLocked(o, writes)
		release()
		if !errors.Is(err, errRetry) {
			return res, err
		}
	}
}

// errRetry says the lock set chosen before locking no longer fits the state.
var errRetry = errors.New("namespace: retry with a new lock set")

func (s *Store) applyLocked(o op, writes []string) (*Result, error) {
	// Reads go to the committed state: the path locks keep what this
	// command reads from changing, and no command reads its own writes.
	st := &step{r: s.reader(), b: s.db.NewBatch(), locks: s.locks, open: s.open, now: o.cmd.TimeNs}
	defer st.b.Close()
	if !o.d.fits(st.r, o.msg, writes) {
		return nil, errRetry
	}
	if err := s.guard(o); err != nil {
		return nil, err
	}
	if e := o.d.epoch(o.msg); e != nil && *e == 0 {
		*e = s.allocEpoch()
	}
	res, err := o.d.apply(st, o.msg)
	if err != nil {
		return res, err
	}
	moved, err := s.open.changes(st.r, st.b)
	if err != nil {
		return nil, err
	}
	// The directory cache lets go of what b deletes before anyone can see
	// it deleted, and takes it back once they all can: see dirCache.
	forgotten := s.dirs.forget(st.b)
	err = st.b.Commit(pebble.Sync)
	s.dirs.release(forgotten)
	if err != nil {
		return nil, fmt.Errorf("namespace: commit: %w", err)
	}
	s.committed(o, res, moved)
	if s.onLocks != nil && (len(res.SetLocks) > 0 || len(res.RemovedLocks) > 0) {
		s.onLocks(o.cmd, res) // still under the path locks: in commit order
	}
	return res, nil
}

// committed brings what the store keeps in memory in line with a
// committed command, still under its path locks: the id and epoch
// counters, the lock table, the open-file index.
func (s *Store) committed(o op, res *Result, open openChanges) {
	for _, id := range o.d.ids(o.msg) {
		s.observeID(id)
	}
	if e := o.d.epoch(o.msg); e != nil {
		s.observeEpoch(*e)
	}
	for _, l := range res.SetLocks {
		s.locks.Set(l)
	}
	for _, p := range res.RemovedLocks {
		s.locks.Remove(p)
	}
	s.open.apply(open)
}

// pathLockSet is the path locks of a command that changes paths: every
// mutation read-locks the ancestors of what it changes, so nobody renames
// or deletes them underneath it, and write-locks the entries it changes,
// so nobody else creates, deletes or renames them at the same time.
func pathLockSet(paths []string) (reads, writes []string) {
	for _, p := range paths {
		reads = append(reads, ancestors(p)...)
	}
	return reads, paths
}

// mkdirLockSet is the path locks of a mkdir: with parents, the components
// of its path that do not exist yet are write-locked (they may be
// created) and the ones that do are read-locked. What exists is read
// before locking; mkdirFits checks it again under the locks.
func mkdirLockSet(r pebble.Reader, c *bfspb.MkdirCmd) (reads, writes []string) {
	if !c.Parents {
		return pathLockSet([]string{c.Path})
	}
	all := append(ancestors(c.Path), c.Path)
	n := existingPrefix(r, all)
	if n == len(all) {
		n-- // everything exists: lock the leaf to read it consistently
	}
	return all[:n], all[n:]
}

// mkdirFits reports whether the components of a mkdir's path that do not
// exist are all among the write-locked ones.
func mkdirFits(r pebble.Reader, c *bfspb.MkdirCmd, writes []string) bool {
	if !c.Parents {
		return true
	}
	all := append(ancestors(c.Path), c.Path)
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
