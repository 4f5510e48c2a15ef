package blockstore

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
)

// checkFile, in the store's directory, is the file Check writes and
// reads back.
const checkFile = "CHECK.tmp"

// checkSample is how many replicas Check reads a little of, from the disk.
const checkSample = 8

// checkRead is how much of each sampled file Check reads.
const checkRead = 4096

// Check tests the disk under the store the way a failing disk shows
// itself, for a chunkserver that saw an I/O error on it: the meta log
// must still be persisting; a file must be written, fdatasync'd and read
// back from the disk (not the page cache) unchanged; and the first bytes
// of a few replicas, data and meta, must read from the disk. It returns
// nil for a healthy disk and an error wrapping ErrFull for one that only
// has no space left (the store takes writes again once space is freed:
// Check also restarts the checkpoints that waited for it). Any other
// error means the disk is failing: its volume should go out of service.
func (s *Store) Check() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.log.failed(); err != nil {
		return err
	}
	if err := s.probe(); err != nil {
		return err
	}
	kick(s.log.fullc)
	return s.sampleReads()
}

// probe writes the check file, syncs it, reads it back from the disk and
// removes it.
func (s *Store) probe() error {
	path := filepath.Join(s.dir, checkFile)
	want := make([]byte, checkRead)
	rand.Read(want)
	err := inject(s.fault, OpCheck, path)
	if err == nil {
		err = writeSynced(path, want)
	}
	if err != nil {
		os.Remove(path)
		if noSpace(err) {
			return fmt.Errorf("%w: %s: %w", ErrFull, s.dir, err)
		}
		return fmt.Errorf("blockstore: %s: write check: %w", s.dir, err)
	}
	got, err := readDirect(path, len(want))
	if rerr := os.Remove(path); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("blockstore: %s: read check: %w", s.dir, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("blockstore: %s: the check file read back is not what was written", s.dir)
	}
	return nil
}

// sampleReads reads the first bytes of the data and meta files of a few
// replicas picked at random, from the disk. A replica deleted meanwhile
// is no failure.
func (s *Store) sampleReads() error {
	blocks := s.snapshot()
	for range min(checkSample, len(blocks)) {
		b := blocks[mrand.IntN(len(blocks))]
		for _, ext := range []string{dataExt, metaExt} {
			_, err := readDirect(s.base(b.id)+ext, checkRead)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("blockstore: %s: read block %d: %w", s.dir, b.id, err)
			}
		}
	}
	return nil
}

// Abandon stops a store whose disk failed without writing anything more
// to it: no checkpoint, so the meta logs stay for the next Open to replay
// should the disk come back. Calls in progress end; later ones fail with
// ErrClosed. It is safe to call more than once, and after Close.
func (s *Store) Abandon() {
	if !s.closed.CompareAndSwap(false, true) {
		return
	}
	for _, b := range s.snapshot() {
		b.mu.Lock()
		if b.mu.f != nil {
			b.mu.f.Close()
			b.mu.f = nil
		}
		b.mu.Unlock()
	}
	s.log.abandon()
	if s.flock != nil {
		s.flock.Close()
	}
}

// Dir is the directory the store keeps its replicas in.
func (s *Store) Dir() string { return s.dir }
