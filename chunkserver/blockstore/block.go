package blockstore

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

const (
	blocksDir = "blocks"
	dataExt   = ".data"
	metaExt   = ".meta"
	tmpExt    = ".meta.tmp"
)

// block is the in-memory state of one replica.
type block struct {
	id BlockID

	// rw is held shared by readers and exclusively by Truncate and Delete,
	// which shrink or remove the files readers use. Taken before mu.
	// Writers do not take it: they only append past what readers look at.
	rw sync.RWMutex

	mu struct {
		sync.Mutex
		// m is the replica's state: m.size counts the bytes written,
		// m.seq the last packet applied.
		m meta
		// durable is the size the meta file on disk records; every byte
		// below it has been fdatasync'd.
		durable int64
		// exists is set once the replica's files are created.
		exists bool
		// removed is set when the entry left the store's map (deleted, or
		// never created); whoever finds it so looks the id up again.
		removed bool
		// f is the data file while the replica is being written; nil when
		// sealed or not written since Open.
		f *os.File
		// crcs has one checksum per chunk of m.size while f is open; nil
		// otherwise (they are in the meta file).
		crcs []uint32
		// err is sticky: after a failed fdatasync nothing about the
		// unsynced bytes can be trusted, so the replica takes no more
		// writes and cannot be sealed.
		err error
	}
}

func (b *block) lock(mode rwMode) {
	switch mode {
	case rwShared:
		b.rw.RLock()
	case rwExclusive:
		b.rw.Lock()
	}
	b.mu.Lock()
}

func (b *block) unlock(mode rwMode) {
	b.mu.Unlock()
	switch mode {
	case rwShared:
		b.rw.RUnlock()
	case rwExclusive:
		b.rw.Unlock()
	}
}

func (b *block) infoLocked() BlockInfo {
	m := b.mu.m
	return BlockInfo{ID: b.id, Size: m.size, Version: m.version, Sealed: m.sealed}
}

// blockDir returns the fan-out directory of id: two levels keyed by bits
// 16-23 and 8-15 of the id. Ids are allocated in sequence, so 256
// consecutive blocks share a leaf (few directories to create while a
// cluster is young) and the 65536 leaves fill evenly as it grows: at 100
// million replicas a leaf holds about 1500 of them.
func (s *Store) blockDir(id BlockID) string {
	u := uint64(id)
	return filepath.Join(s.dir, blocksDir, fmt.Sprintf("%02x", (u>>16)&0xff), fmt.Sprintf("%02x", (u>>8)&0xff))
}

// base returns the path of id's files without extension.
func (s *Store) base(id BlockID) string {
	return filepath.Join(s.blockDir(id), fmt.Sprintf("%016x", uint64(id)))
}

// createLocked creates the (empty) files of a new replica.
func (s *Store) createLocked(b *block) error {
	if err := s.ensureDir(s.blockDir(b.id)); err != nil {
		return fmt.Errorf("blockstore: create block %d: %w", b.id, err)
	}
	f, err := os.OpenFile(s.base(b.id)+dataExt, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("blockstore: create block %d: %w", b.id, err)
	}
	b.mu.f, b.mu.crcs = f, []uint32{}
	b.mu.m = meta{id: b.id}
	b.mu.exists = true
	s.blockCount.Add(1)
	return nil
}

// ensureDir creates a fan-out directory and makes its entry durable.
func (s *Store) ensureDir(dir string) error {
	if _, ok := s.dirs.Load(dir); ok {
		return nil
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range []string{parent, filepath.Dir(parent)} {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	s.dirs.Store(dir, struct{}{})
	return nil
}

// activateLocked opens the data file of a replica recovered by Open, so
// it can be written again.
func (s *Store) activateLocked(b *block) error {
	if b.mu.f != nil {
		return nil
	}
	crcs, err := s.readCRCs(b.id, 0, chunkCount(b.mu.m.size))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(s.base(b.id)+dataExt, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("blockstore: open block %d: %w", b.id, err)
	}
	b.mu.f, b.mu.crcs = f, crcs
	return nil
}

// crcsLocked returns the checksums of chunks [first, first+n), copied.
func (s *Store) crcsLocked(b *block, first, n int) ([]uint32, error) {
	if b.mu.crcs != nil {
		return slices.Clone(b.mu.crcs[first : first+n]), nil
	}
	return s.readCRCs(b.id, first, n)
}

// readCRCs reads the checksums of chunks [first, first+n) from the meta
// file. Only their offsets are trusted: a damaged checksum reads as a
// damaged chunk, never as good data.
func (s *Store) readCRCs(id BlockID, first, n int) ([]uint32, error) {
	f, err := os.Open(s.base(id) + metaExt)
	if err != nil {
		return nil, fmt.Errorf("blockstore: block %d: %w", id, err)
	}
	defer f.Close()
	raw := make([]byte, 4*n)
	if k, _ := f.ReadAt(raw, headerSize+4*int64(first)); k < len(raw) {
		return nil, fmt.Errorf("%w: block %d: meta holds too few checksums", ErrCorrupt, id)
	}
	return decodeCRCs(raw, n)
}

// syncLocked makes every written byte durable: fdatasync the data, then
// persist the meta. A failure is sticky.
func (s *Store) syncLocked(b *block) error {
	crcs, err := s.crcsLocked(b, 0, chunkCount(b.mu.m.size))
	if err == nil {
		var data *os.File
		if b.mu.durable < b.mu.m.size {
			data = b.mu.f
		}
		err = s.persist(b.mu.m, crcs, data)
	}
	if err != nil {
		b.mu.err = fmt.Errorf("blockstore: sync block %d: %w", b.id, err)
		return b.mu.err
	}
	b.mu.durable = b.mu.m.size
	return nil
}

// sealLocked seals the replica at its current size.
func (s *Store) sealLocked(b *block) (int64, error) {
	if b.mu.err != nil {
		return b.mu.m.size, b.mu.err
	}
	if b.mu.m.sealed {
		return b.mu.m.size, nil
	}
	// From here on no packet is accepted, even if the sync below fails.
	b.mu.m.sealed = true
	if err := s.syncLocked(b); err != nil {
		return b.mu.m.size, err
	}
	if b.mu.f != nil {
		b.mu.f.Close()
		b.mu.f, b.mu.crcs = nil, nil
	}
	return b.mu.m.size, nil
}

// persist atomically replaces the meta file of m.id: write a temporary
// file, fdatasync it, rename it over the old one, fsync the directory.
// With data non-nil, the data file is fdatasync'd too, at the same time
// as the temporary meta (one flush less of latency on a seal); the rename
// waits for both, so the meta never claims bytes that are not durable.
func (s *Store) persist(m meta, crcs []uint32, data *os.File) error {
	var datac chan error
	if data != nil {
		datac = make(chan error, 1)
		go func() { datac <- fdatasync(data) }()
	}
	base := s.base(m.id)
	err := writeSynced(base+tmpExt, encodeMeta(m, crcs))
	if datac != nil {
		if derr := <-datac; derr != nil {
			err = derr
		}
	}
	if err == nil {
		err = os.Rename(base+tmpExt, base+metaExt)
	}
	if err == nil {
		err = syncDir(s.blockDir(m.id))
	}
	return err
}

// writeSynced creates path holding buf, fdatasync'd.
func writeSynced(path string, buf []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(buf)
	if err == nil {
		err = fdatasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
