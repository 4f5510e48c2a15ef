package namespace

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/bfs-go/bfs/dirlock"
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
// table and the open-file index as committed, the command's time, and
// the counters it takes new ids and epochs from.
type step struct {
	r     pebble.Reader
	b     *pebble.Batch
	locks *dirlock.Table
	open  *openIndex
	now   int64
	// next is the store's counters as this step leaves them: what it took
	// is written into its batch, and kept only if the batch commits.
	next counters
	// clusterID is the id a format wrote ("" if none).
	clusterID string
	// members is the member table as a member command leaves it (nil if
	// the command changed none).
	members []*bfspb.Member
}

// counters are the stored counters ids and epochs are taken from.
type counters struct {
	// lastID is the highest entry or block id handed out, lastEpoch the
	// highest lock epoch.
	lastID, lastEpoch uint64
}

// newID takes the next entry or block id.
func (st *step) newID() uint64 {
	st.next.lastID = max(st.next.lastID, firstID-1) + 1
	return st.next.lastID
}

// newEpoch takes the next lock epoch.
func (st *step) newEpoch() uint64 {
	st.next.lastEpoch++
	return st.next.lastEpoch
}

// Apply executes cmd, the command at position index of the command log,
// as one Pebble batch that also records index as applied. Commands apply
// one at a time, in log order: each sees everything the ones before it
// did. The apply step is deterministic: what it needs beyond the stored
// state (the time, a new cluster id) is in the command; new ids and
// epochs come from counters stored in the state, taken in the command's
// own batch.
//
// The batch is written without its own fsync: the command log is the
// durable record, and a command whose batch a crash lost is applied again
// from the log (AppliedIndex says where to start). A command that fails
// changes nothing and records nothing; applied again, it fails again.
//
// Apply refuses an index at or below AppliedIndex with ErrApplied. Any
// error that is not one of the namespace's or dirlock's domain errors is
// a storage failure (IsStorageError): the store can no longer follow the
// log, and its owner must stop it.
func (s *Store) Apply(index uint64, cmd *bfspb.Command) (*Result, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if s.restoring.Load() {
		return nil, errors.New("namespace: the store holds a restore cut short; restore it before applying")
	}
	if index <= s.applied.Load() {
		return nil, fmt.Errorf("%w: index %d, applied %d", ErrApplied, index, s.applied.Load())
	}
	o, err := bind(cmd)
	if err != nil {
		return nil, err
	}
	if _, format := o.msg.(*bfspb.FormatCmd); !format && !s.Formatted() {
		return nil, ErrNotFormatted
	}
	if err := validate(o.paths(), cmd.Fences); err != nil {
		return nil, err
	}
	return s.applyLocked(index, o)
}

func (s *Store) applyLocked(index uint64, o op) (*Result, error) {
	// Reads go to the committed state: no command reads its own writes.
	st := &step{r: s.reader(), b: s.db.NewBatch(), locks: s.locks, open: s.open, now: o.cmd.TimeNs, next: s.counters}
	defer st.b.Close()
	if err := checkSession(st.r, o.session()); err != nil {
		return nil, err
	}
	if err := s.guard(o); err != nil {
		return nil, err
	}
	res, err := o.d.apply(st, o.msg)
	if err != nil {
		return res, err
	}
	if err := st.record(index, s.counters); err != nil {
		return nil, err
	}
	moved, err := s.open.changes(st.r, st.b)
	if err != nil {
		return nil, err
	}
	// The directory cache lets go of what b deletes before anyone can see
	// it deleted, and takes it back once they all can: see dirCache.
	forgotten := s.dirs.forget(st.b)
	err = st.b.Commit(pebble.NoSync)
	s.dirs.release(forgotten)
	if err != nil {
		return nil, fmt.Errorf("namespace: commit: %w", err)
	}
	s.committed(index, st, res, moved)
	if s.onLocks != nil && (len(res.SetLocks) > 0 || len(res.RemovedLocks) > 0) {
		s.onLocks(o.cmd, res) // in log order
	}
	return res, nil
}

// record adds to the batch the log index it applies and the counters it
// moved.
func (st *step) record(index uint64, before counters) error {
	if err := st.b.Set(keyApplied, encodeUint64(index), nil); err != nil {
		return err
	}
	if st.next.lastID != before.lastID {
		if err := st.b.Set(keyNextID, encodeUint64(st.next.lastID), nil); err != nil {
			return err
		}
	}
	if st.next.lastEpoch != before.lastEpoch {
		return st.b.Set(keyEpoch, encodeUint64(st.next.lastEpoch), nil)
	}
	return nil
}

// checkSession refuses a command for a session the store does not hold
// (it ended, or never was): the check that a proposer's own view of the
// session cannot replace, since the session may end between the two.
func checkSession(r pebble.Reader, session string) error {
	if session == "" {
		return nil
	}
	_, closer, err := r.Get(sessionKey(session))
	if errors.Is(err, pebble.ErrNotFound) {
		return ErrSessionExpired
	}
	if err != nil {
		return fmt.Errorf("namespace: read: %w", err)
	}
	return closer.Close()
}

// committed brings what the store keeps in memory in line with a
// committed command: the applied index, the counters, the cluster id, the
// lock table, the open-file index.
func (s *Store) committed(index uint64, st *step, res *Result, open openChanges) {
	s.counters = st.next
	s.lastID.Store(st.next.lastID)
	if st.clusterID != "" {
		s.setClusterID(st.clusterID)
	}
	if st.members != nil {
		s.setMembers(st.members)
	}
	for _, l := range res.SetLocks {
		s.locks.Set(l)
	}
	for _, p := range res.RemovedLocks {
		s.locks.Remove(p)
	}
	s.open.apply(open)
	s.applied.Store(index)
}
