package blockstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// syncLocked makes every written byte durable: fdatasync the data, then
// log the meta. A failure is sticky.
func (s *Store) syncLocked(b *block) error {
	crcs, err := s.crcsLocked(b, 0, chunkCount(b.mu.m.size))
	if err == nil {
		var data *os.File
		if b.mu.durable < b.mu.m.size {
			data = b.mu.f
		}
		err = s.persistLocked(b, b.mu.m, crcs, data)
	}
	if err != nil {
		b.mu.err = fmt.Errorf("blockstore: sync block %d: %w", b.id, err)
		return b.mu.err
	}
	b.mu.durable = b.mu.m.size
	b.mu.writeback = max(b.mu.writeback, b.mu.durable)
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
		b.mu.f = nil // crcs stay until a checkpoint writes the meta file
	}
	return b.mu.m.size, nil
}

// persistLocked makes m (with crcs) the durable state of b. In order:
// the bytes m counts are on disk (data, when non-nil, is fdatasync'd),
// and so is the data file's directory entry; then the meta goes into the
// meta log, in one group commit with whatever other records are pending.
// A record in the log therefore never claims a byte that is not durable,
// even one a crash leaves behind before its commit was acknowledged.
func (s *Store) persistLocked(b *block, m meta, crcs []uint32, data *os.File) error {
	if err := s.syncFilesLocked(b, data); err != nil {
		return err
	}
	rec, img := metaRecord(m, crcs)
	gen, err := s.log.append(b, rec)
	if err != nil {
		return err
	}
	b.mu.logged, b.mu.gen = img, gen
	return nil
}

// syncFilesLocked fdatasyncs data (if non-nil) and, the first time after
// the replica's files were created, their directory, both at once.
func (s *Store) syncFilesLocked(b *block, data *os.File) error {
	if b.mu.entry == nil {
		if data == nil {
			return nil
		}
		return s.syncData(data)
	}
	var datac chan error
	if data != nil {
		datac = make(chan error, 1)
		go func() { datac <- s.syncData(data) }()
	}
	err := b.mu.entry.sync(s.blockDir(b.id), b.mu.ticket)
	if datac != nil {
		if derr := <-datac; err == nil {
			err = derr
		}
	}
	if err == nil {
		b.mu.entry, b.mu.ticket = nil, 0
	}
	return err
}

// syncData fdatasyncs a data file.
func (s *Store) syncData(f *os.File) error {
	if err := inject(s.fault, OpSync, f.Name()); err != nil {
		return err
	}
	return fdatasync(f)
}

// dirState makes the entries of files created in a fan-out directory
// durable, one fsync of the directory for all the creations before it.
// Each creation takes a ticket; a sync covers every ticket taken before
// it started.
type dirState struct {
	created atomic.Uint64
	synced  atomic.Uint64
	// mu serializes the fsyncs: a caller that waited for one usually
	// finds its ticket covered when it gets the lock.
	mu sync.Mutex
}

// create records a file just created in the directory and returns its
// ticket.
func (d *dirState) create() uint64 { return d.created.Add(1) }

// sync returns once the creation of ticket is durable.
func (d *dirState) sync(dir string, ticket uint64) error {
	if d.synced.Load() >= ticket {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.synced.Load() >= ticket {
		return nil
	}
	upTo := d.created.Load()
	if err := syncDir(dir); err != nil {
		return err
	}
	d.synced.Store(upTo)
	return nil
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

// readStart reads up to n bytes from the start of the file at path.
func readStart(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	k, err := io.ReadFull(f, buf)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil
	}
	return buf[:k], err
}
