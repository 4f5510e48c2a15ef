package blockstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/golang/glog"
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
		// durable is the size the meta (file or log) records; every byte
		// below it has been fdatasync'd.
		durable int64
		// writeback is the size below which writing out to disk has been
		// started (see startWriteback), or is done.
		writeback int64
		// writer sent the packet applied last (0: none since Open).
		writer WriterID
		// exists is set once the replica's files are created.
		exists bool
		// removed is set when the entry left the store's map (deleted, or
		// never created); whoever finds it so looks the id up again.
		removed bool
		// f is the data file while the replica is being written; nil when
		// sealed or not written since Open.
		f *os.File
		// crcs has one checksum per chunk of m.size while f is open or the
		// meta file is behind the log (logged is set); nil otherwise (they
		// are in the meta file).
		crcs []uint32
		// logged is the meta file image last made durable in the meta log
		// and not yet written to the meta file by a checkpoint; nil when
		// the meta file is current.
		logged []byte
		// gen is the meta log generation holding the replica's last
		// record (0: none since the store was opened).
		gen uint64
		// entry and ticket are set from the creation of the replica's
		// files until their directory entries are known durable.
		entry  *dirState
		ticket uint64
		// err is sticky: after a failed fdatasync nothing about the
		// unsynced bytes can be trusted, so the replica takes no more
		// writes and cannot be sealed.
		err error
		// corrupt is set by MarkCorrupt: the replica failed a checksum
		// and reads of it answer ErrCorrupt until it is deleted. Kept in
		// memory only: after a restart the scrubber finds it again.
		corrupt bool
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

// createLocked creates the (empty) files of a new replica. Their
// directory entries are made durable by the first sync.
func (s *Store) createLocked(b *block) error {
	ds, err := s.ensureDir(s.blockDir(b.id))
	if err != nil {
		return fmt.Errorf("blockstore: create block %d: %w", b.id, err)
	}
	f, err := os.OpenFile(s.base(b.id)+dataExt, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("blockstore: create block %d: %w", b.id, err)
	}
	b.mu.f, b.mu.crcs = f, []uint32{}
	b.mu.m = meta{id: b.id}
	b.mu.entry, b.mu.ticket = ds, ds.create()
	b.mu.exists = true
	s.blockCount.Add(1)
	return nil
}

// uncreateLocked takes back the files createLocked made, for a replica
// whose creation was not made durable; release then drops the entry.
func (s *Store) uncreateLocked(b *block) {
	b.mu.f.Close()
	if err := removeIfExists(s.base(b.id) + dataExt); err != nil {
		glog.Warningf("blockstore: block %d: removing the data file of a failed create: %v", b.id, err)
	}
	b.mu.f, b.mu.crcs, b.mu.entry, b.mu.err = nil, nil, nil, nil
	b.mu.exists = false
	s.blockCount.Add(-1)
}

// ensureDir creates a fan-out directory, makes its own entry durable and
// returns its state.
func (s *Store) ensureDir(dir string) (*dirState, error) {
	if ds, ok := s.dirs.Load(dir); ok {
		return ds.(*dirState), nil
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, d := range []string{parent, filepath.Dir(parent)} {
		if err := syncDir(d); err != nil {
			return nil, err
		}
	}
	ds, _ := s.dirs.LoadOrStore(dir, &dirState{})
	return ds.(*dirState), nil
}

// activateLocked opens the data file of a replica recovered by Open, so
// it can be written again.
func (s *Store) activateLocked(b *block) error {
	if b.mu.f != nil {
		return nil
	}
	crcs := b.mu.crcs
	if crcs == nil {
		var err error
		if crcs, err = s.readCRCs(b.id, 0, chunkCount(b.mu.m.size)); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(s.base(b.id)+dataExt, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("blockstore: open block %d: %w", b.id, err)
	}
	b.mu.f, b.mu.crcs, b.mu.writeback = f, crcs, b.mu.m.size
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
	if k, err := f.ReadAt(raw, headerSize+4*int64(first)); k < len(raw) {
		if !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("blockstore: block %d: read meta: %w", id, err)
		}
		return nil, fmt.Errorf("%w: block %d: meta holds too few checksums", ErrCorrupt, id)
	}
	return decodeCRCs(raw, n)
}
