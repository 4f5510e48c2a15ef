package namespace

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Snapshots of the store for the command log: a checkpoint is a Pebble
// checkpoint (hard links to the store's tables and a copy of its log) as
// of a command applied; Restore replaces the store's whole state with
// one.

// keyRestoring marks a store whose state Restore is replacing. A store
// found with it (a crash in the middle of a restore) holds a mix of two
// states: it reports AppliedIndex 0 and Restoring, and its owner restores
// it again before it applies anything.
var keyRestoring = []byte{prefixSystem, 'r', 'e', 's', 't', 'o', 'r', 'i', 'n', 'g'}

// restoreBatchBytes bounds the batches a restore copies with.
const restoreBatchBytes = 4 << 20

// Sync makes every command applied so far durable in the store itself
// (Apply writes without fsync; the command log is the durable record).
func (s *Store) Sync() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("namespace: sync: %w", err)
	}
	return nil
}

// Checkpoint writes a copy of the store as of the last command applied
// into dir, which must not exist, and returns that command's index.
// Commands do not apply while it runs; it is quick (tables are linked,
// not copied). The store's own log is synced first, so the store itself
// holds every command up to the index too.
func (s *Store) Checkpoint(dir string) (uint64, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return 0, fmt.Errorf("namespace: checkpoint: %w", err)
	}
	return s.applied.Load(), nil
}

// Restore replaces the whole state of the store with that of the
// checkpoint in dir (made by Checkpoint, here or on another replica),
// and loads it: the applied index becomes the checkpoint's. A crash in
// the middle leaves the store Restoring (see keyRestoring). Commands do
// not apply while it runs; readers may see a mix of the two states
// meanwhile, so only a replica that answers no reads restores.
func (s *Store) Restore(dir string) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	src, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, FormatMajorVersion: FormatMajorVersion, Merger: maxMerger, Logger: quietLogger{}})
	if err != nil {
		return fmt.Errorf("namespace: open snapshot %s: %w", dir, err)
	}
	defer src.Close()
	// From the first batch on, the state is a mix until the last one:
	// nothing applies meanwhile, nor after a failure part way.
	s.restoring.Store(true)
	if err := s.replaceWith(src); err != nil {
		return err
	}
	s.dirs.reset()
	s.locks.Reset()
	s.open.reset()
	return s.load()
}

// replaceWith deletes everything the store holds and copies in every key
// of src, the restoring mark set first and removed last.
func (s *Store) replaceWith(src *pebble.DB) error {
	b := s.db.NewBatch()
	if err := b.DeleteRange([]byte{0}, bytes.Repeat([]byte{0xff}, 16), nil); err != nil {
		b.Close()
		return err
	}
	if err := b.Set(keyRestoring, nil, nil); err != nil {
		b.Close()
		return err
	}
	if err := commitClose(b, pebble.Sync); err != nil {
		return err
	}
	it, err := src.NewIter(nil)
	if err != nil {
		return fmt.Errorf("namespace: read snapshot: %w", err)
	}
	b = s.db.NewBatch()
	for it.First(); it.Valid() && err == nil; it.Next() {
		if bytes.Equal(it.Key(), keyRestoring) {
			continue
		}
		if err = b.Set(it.Key(), it.Value(), nil); err == nil && b.Len() >= restoreBatchBytes {
			err = commitClose(b, pebble.NoSync)
			b = s.db.NewBatch()
		}
	}
	if err := errors.Join(err, it.Error(), it.Close()); err != nil {
		b.Close()
		return fmt.Errorf("namespace: restore: %w", err)
	}
	if err := b.Delete(keyRestoring, nil); err != nil {
		b.Close()
		return err
	}
	return commitClose(b, pebble.Sync)
}

func commitClose(b *pebble.Batch, opts *pebble.WriteOptions) error {
	err := b.Commit(opts)
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("namespace: restore: %w", err)
	}
	return nil
}

// Restoring reports whether a restore was cut short: the store's state
// is a mix, to be restored again before anything applies.
func (s *Store) Restoring() (bool, error) {
	_, closer, err := s.db.Get(keyRestoring)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("namespace: read: %w", err)
	}
	return true, closer.Close()
}
