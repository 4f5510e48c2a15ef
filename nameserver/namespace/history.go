package namespace

// The lock history: the past locks of each directory, its last
// MaxHistory, keyed by epoch.

import (
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// MaxHistory is how many past locks are kept per directory.
const MaxHistory = 64

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
	p, err := CleanPath(path)
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
