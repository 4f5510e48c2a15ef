package volume

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
)

// The calls about one block go to the volume holding it; an error that
// is not about the request itself asks for a check of that volume.

// Write applies a packet (see blockstore.Store.Write).
func (s *Set) Write(p blockstore.Packet) (int64, error) {
	v := s.find(p.BlockID)
	if v == nil {
		return 0, fmt.Errorf("%w: block %d: no replica to write; replicas are created by the nameserver when it allocates the block (AddBlock), never by a packet",
			blockstore.ErrNotFound, p.BlockID)
	}
	v.begin()
	size, err := v.store.Write(p)
	v.end()
	return size, s.note(v, err)
}

// Truncate cuts a replica (see blockstore.Store.Truncate).
func (s *Set) Truncate(id blockstore.BlockID, size int64) error {
	v := s.find(id)
	if v == nil {
		return notFound(id)
	}
	v.begin()
	defer v.end()
	return s.note(v, v.store.Truncate(id, size))
}

// Delete removes a replica (see blockstore.Store.Delete).
func (s *Set) Delete(id blockstore.BlockID) error {
	v := s.find(id)
	if v == nil {
		return notFound(id)
	}
	v.begin()
	defer v.end()
	return s.note(v, v.store.Delete(id))
}

// Info describes a replica.
func (s *Set) Info(id blockstore.BlockID) (blockstore.BlockInfo, error) {
	v := s.find(id)
	if v == nil {
		return blockstore.BlockInfo{}, notFound(id)
	}
	info, err := v.store.Info(id)
	return info, s.note(v, err)
}

// Volume returns the index of the volume holding block id, -1 if none.
func (s *Set) Volume(id blockstore.BlockID) int {
	if v := s.find(id); v != nil {
		return v.index
	}
	return -1
}

// ReadAt reads a replica (see blockstore.Store.ReadAt). A read that
// fails on an I/O error checks the volume first: if it fails, the replica
// went with it (ErrVolumeFailed); if not, the replica alone is unreadable,
// and the error wraps blockstore.ErrCorrupt. A read that waits on a disk
// that hangs ends with ErrVolumeFailed once the volume goes out of
// service (see read): p may then still be written by the read left
// behind, so the caller must not use p again after ErrVolumeFailed.
func (s *Set) ReadAt(id blockstore.BlockID, p []byte, off int64) (int, error) {
	v := s.find(id)
	if v == nil {
		return 0, notFound(id)
	}
	n, err := s.read(v, id, p, off)
	if errors.Is(err, ErrVolumeFailed) || !ioError(err) {
		return n, err
	}
	if cerr := s.checkNow(v); cerr != nil && !errors.Is(cerr, blockstore.ErrFull) {
		return n, fmt.Errorf("%w: %s, which held block %d: %v", ErrVolumeFailed, v.dir, id, err)
	}
	return n, fmt.Errorf("%w: block %d is unreadable on %s, which passes its check: %v", blockstore.ErrCorrupt, id, v.dir, err)
}

// read reads on an I/O goroutine, so that its caller can leave a read a
// hung disk holds once the volume goes out of service: after its check
// timed out, a check asked for by an error or by the stall of the
// volume's I/O (this read's among it).
func (s *Set) read(v *Volume, id blockstore.BlockID, p []byte, off int64) (int, error) {
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	v.begin()
	if !s.goIO(func() {
		n, err := v.store.ReadAt(id, p, off)
		v.end()
		done <- result{n, err}
	}) {
		v.end()
		return 0, fmt.Errorf("%w: block %d", blockstore.ErrClosed, id)
	}
	select {
	case r := <-done:
		return r.n, r.err
	case <-v.done:
	}
	select {
	case r := <-done: // it ended as the volume failed
		return r.n, r.err
	default:
	}
	return 0, fmt.Errorf("%w: %s, which holds block %d, went out of service while the read waited on its disk", ErrVolumeFailed, v.dir, id)
}

// MarkCorrupt marks a replica corrupt (see blockstore.Store.MarkCorrupt).
func (s *Set) MarkCorrupt(id blockstore.BlockID) error {
	v := s.find(id)
	if v == nil {
		return notFound(id)
	}
	return v.store.MarkCorrupt(id)
}

// Corrupt reports whether a replica is marked corrupt.
func (s *Set) Corrupt(id blockstore.BlockID) bool {
	v := s.find(id)
	return v != nil && v.store.Corrupt(id)
}

// note asks for a check of v if err says something of its disk, and
// returns err. A disk out of space makes the volume Full at once: it
// takes no new replica until a check finds room again.
func (s *Set) note(v *Volume, err error) error {
	if noSpace(err) && v.setFull(true, err.Error(), s.cfg.Clock.Now()) {
		glog.Warningf("volume %s is full: no new replica goes there until space is freed: %v", v.dir, err)
		s.cfg.OnChange()
	}
	if ioError(err) {
		v.ask(false)
	}
	return err
}

// ioError reports whether err may say something of the disk: it is none
// of the answers about the request itself.
func ioError(err error) bool {
	if err == nil {
		return false
	}
	for _, e := range []error{
		blockstore.ErrSealed, blockstore.ErrGap, blockstore.ErrOffset, blockstore.ErrMismatch,
		blockstore.ErrChecksum, blockstore.ErrCorrupt, blockstore.ErrNotFound, blockstore.ErrInvalid,
		blockstore.ErrClosed, context.Canceled, context.DeadlineExceeded, io.EOF,
	} {
		if errors.Is(err, e) {
			return false
		}
	}
	return true
}
