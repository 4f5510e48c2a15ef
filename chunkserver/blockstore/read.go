package blockstore

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ReadAt reads len(p) bytes of block id starting at off into p, verifying
// the checksum of every chunk it touches: a damaged chunk is ErrCorrupt,
// never bad bytes. Like io.ReaderAt it returns io.EOF with fewer bytes
// when the replica ends first. An unsealed replica reads as the bytes
// written so far.
func (s *Store) ReadAt(id BlockID, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: block %d: read at %d", ErrInvalid, id, off)
	}
	b, err := s.acquire(id, false, rwShared)
	if err != nil {
		return 0, err
	}
	defer b.rw.RUnlock() // b.mu is released below, before any I/O on data
	if b.mu.corrupt {
		b.mu.Unlock()
		return 0, fmt.Errorf("%w: block %d: marked corrupt", ErrCorrupt, id)
	}
	size, sealed := b.mu.m.size, b.mu.m.sealed
	end := min(off+int64(len(p)), size)
	switch {
	case off > size:
		b.mu.Unlock()
		return 0, fmt.Errorf("%w: block %d: read at %d past its %d bytes", ErrInvalid, id, off, size)
	case off == end:
		b.mu.Unlock()
		return 0, io.EOF
	}
	first, last := int(off/ChunkSize), int((end-1)/ChunkSize)
	var crcs []uint32
	inFile := sealed && b.mu.crcs == nil
	if !inFile {
		// The last chunk's checksum changes as the writer appends: take it
		// together with the size.
		crcs, err = s.crcsLocked(b, first, last-first+1)
	}
	b.mu.Unlock()
	if inFile {
		// Immutable but for Truncate and Delete, which rw excludes.
		crcs, err = s.readCRCs(id, first, last-first+1)
	}
	if err != nil {
		return 0, err
	}
	n, err := s.readChunks(id, p[:end-off], off, min(int64(last+1)*ChunkSize, size), crcs)
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// MarkCorrupt records that the replica of block id failed a checksum:
// every later read of it is ErrCorrupt, whatever its bytes, until it is
// deleted. The mark is not persisted.
func (s *Store) MarkCorrupt(id BlockID) error {
	b, err := s.acquire(id, false, rwNone)
	if err != nil {
		return err
	}
	defer s.release(b, rwNone)
	b.mu.corrupt = true
	return nil
}

// Corrupt reports whether the replica of block id is marked corrupt.
func (s *Store) Corrupt(id BlockID) bool {
	b, err := s.acquire(id, false, rwNone)
	if err != nil {
		return false
	}
	defer s.release(b, rwNone)
	return b.mu.corrupt
}

// Read returns up to length bytes of block id from off; fewer only when
// the replica ends first.
func (s *Store) Read(id BlockID, off, length int64) ([]byte, error) {
	if length < 0 {
		return nil, fmt.Errorf("%w: block %d: read of %d bytes", ErrInvalid, id, length)
	}
	buf := make([]byte, length)
	n, err := s.ReadAt(id, buf, off)
	if err == io.EOF {
		err = nil
	}
	return buf[:n], err
}

// readChunks fills p with the bytes at off, reading and verifying whole
// chunks up to chunkEnd (the end of the last chunk touched). crcs start at
// off's chunk. When p covers exactly whole chunks it is read in place.
func (s *Store) readChunks(id BlockID, p []byte, off, chunkEnd int64, crcs []uint32) (int, error) {
	start := off - off%ChunkSize
	if start == off && off+int64(len(p)) == chunkEnd {
		if err := s.readInto(id, p, start, crcs); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	buf, err := s.readVerified(id, start, chunkEnd, crcs)
	if err != nil {
		return 0, err
	}
	return copy(p, buf[off-start:]), nil
}

// readVerified reads [start, end) of block id, start on a chunk boundary,
// and checks it against crcs.
func (s *Store) readVerified(id BlockID, start, end int64, crcs []uint32) ([]byte, error) {
	buf := make([]byte, end-start)
	return buf, s.readInto(id, buf, start, crcs)
}

// readInto reads buf at start and checks it against crcs. Bytes that are
// not there (a data file missing or short) are ErrCorrupt; a read that
// fails (an I/O error: the disk, not the replica, may be at fault) is
// returned as it is.
func (s *Store) readInto(id BlockID, buf []byte, start int64, crcs []uint32) error {
	f, err := os.Open(s.base(id) + dataExt)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: block %d: %v", ErrCorrupt, id, err)
	}
	if err != nil {
		return fmt.Errorf("blockstore: read block %d: %w", id, err)
	}
	defer f.Close()
	if err := inject(s.fault, OpRead, f.Name()); err != nil {
		return fmt.Errorf("blockstore: read block %d at %d: %w", id, start, err)
	}
	if n, err := f.ReadAt(buf, start); n < len(buf) {
		if !errors.Is(err, io.EOF) {
			return fmt.Errorf("blockstore: read block %d at %d: %w", id, start+int64(n), err)
		}
		return fmt.Errorf("%w: block %d: %d bytes missing at %d: %v", ErrCorrupt, id, len(buf)-n, start+int64(n), err)
	}
	for i := 0; len(buf) > 0; i++ {
		chunk := buf[:min(len(buf), ChunkSize)]
		if Checksum(chunk) != crcs[i] {
			return fmt.Errorf("%w: block %d: checksum mismatch in chunk at %d", ErrCorrupt, id, start+int64(i)*ChunkSize)
		}
		buf = buf[len(chunk):]
	}
	return nil
}
