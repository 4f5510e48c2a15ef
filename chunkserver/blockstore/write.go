package blockstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/golang/glog"
)

// Create makes an empty, unsealed replica of block id and makes it
// durable (its files' directory entries, and a record in the meta log)
// before it returns: it survives a crash and is listed. A packet never
// creates a replica; the nameserver creates them when it allocates the
// block (AddBlock). If the store has any record of the block (created,
// written, or sealed by a Seal that came first) Create changes nothing,
// so a sealed block stays sealed.
//
// ctx is checked once the block's entry is in the store, before its
// files are created: a Delete that arrives after the caller gave up
// either finds the replica or follows a Create that did nothing.
func (s *Store) Create(ctx context.Context, id BlockID) error {
	if id < 0 {
		return fmt.Errorf("%w: create block %d", ErrInvalid, id)
	}
	b, err := s.acquire(id, true, rwNone)
	if err != nil {
		return err
	}
	defer s.release(b, rwNone)
	if b.mu.exists {
		return b.mu.err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("blockstore: create block %d: %w", id, err)
	}
	if err := s.createLocked(b); err != nil {
		return err
	}
	if err := s.syncLocked(b); err != nil {
		// Never acknowledged: nothing of it stays, so a disk that only
		// filled leaves no empty replica behind to be reported.
		s.uncreateLocked(b)
		return err
	}
	return nil
}

// Write applies packet p to its block's replica and returns the replica's
// size afterwards (also alongside ErrSealed, ErrGap, ErrOffset and
// ErrMismatch).
//
// Packets are applied in sequence order from seq 1, to a replica Create
// made: a packet for a block the store has no record of is refused with
// ErrNotFound. A packet with the sequence number of one already applied
// is a retry: it is acknowledged again (after syncing, if it asks for a
// sync not yet done) only if its bytes are exactly what the replica holds
// at its offset (and, for a last packet, the replica is sealed where it
// ends); otherwise it is refused with ErrMismatch. A packet whose seq is
// past the next expected one is refused with ErrGap, one that does not
// start at the replica's size with ErrOffset, one whose data does not
// match its checksum with ErrChecksum, and any new packet for a sealed
// replica with ErrSealed. None of these changes the replica.
func (s *Store) Write(p Packet) (int64, error) {
	pieces, err := checkPacket(p)
	if err != nil {
		return 0, err
	}
	b, err := s.acquire(p.BlockID, false, rwNone)
	if errors.Is(err, ErrNotFound) {
		return 0, fmt.Errorf("%w: block %d: no replica to write; replicas are created by the nameserver when it allocates the block (AddBlock), never by a packet", ErrNotFound, p.BlockID)
	}
	if err != nil {
		return 0, err
	}
	defer s.release(b, rwNone)
	return s.writeLocked(b, p, pieces)
}

// checkPacket checks p and returns the checksums of its data cut at
// chunk boundaries (see pieceCRCs), what the meta keeps once p is
// applied: the data is read once for both.
func checkPacket(p Packet) ([]uint32, error) {
	switch {
	case p.Seq < 1:
		return nil, fmt.Errorf("%w: block %d: sequence number %d", ErrInvalid, p.BlockID, p.Seq)
	case p.Offset < 0:
		return nil, fmt.Errorf("%w: block %d: offset %d", ErrInvalid, p.BlockID, p.Offset)
	}
	pieces, crc := pieceCRCs(p.Offset, p.Data)
	if crc != p.CRC32C {
		return nil, fmt.Errorf("%w: block %d packet %d", ErrChecksum, p.BlockID, p.Seq)
	}
	return pieces, nil
}

func (s *Store) writeLocked(b *block, p Packet, pieces []uint32) (int64, error) {
	m := &b.mu.m
	switch {
	case p.Seq <= m.seq:
		return s.retryLocked(b, p)
	case m.sealed:
		return m.size, sealedError(b, p)
	case b.mu.err != nil:
		return m.size, b.mu.err
	case p.Seq != m.seq+1:
		return m.size, refuseLocked(b, p, fmt.Errorf("%w: block %d: packet %d, expected %d", ErrGap, b.id, p.Seq, m.seq+1))
	case p.Offset != m.size:
		return m.size, refuseLocked(b, p, fmt.Errorf("%w: block %d: packet %d at offset %d, replica holds %d bytes", ErrOffset, b.id, p.Seq, p.Offset, m.size))
	}
	if err := s.appendLocked(b, p, pieces); err != nil {
		return m.size, err
	}
	switch {
	case p.Last:
		return s.sealLocked(b)
	case p.Sync:
		return m.size, s.syncLocked(b)
	}
	return m.size, nil
}

func sealedError(b *block, p Packet) error {
	return fmt.Errorf("%w: block %d at %d bytes, packet %d refused", ErrSealed, b.id, b.mu.m.size, p.Seq)
}

// refuseLocked returns err, which names the replica's sequence numbers,
// to the replica's writer, and a refusal that names none to anyone else.
func refuseLocked(b *block, p Packet, err error) error {
	if p.Writer != 0 && p.Writer == b.mu.writer {
		return err
	}
	return &refusal{id: b.id, reason: err}
}

// appendLocked writes p's data at the end of the replica.
func (s *Store) appendLocked(b *block, p Packet, pieces []uint32) error {
	if err := s.activateLocked(b); err != nil {
		return err
	}
	// A failed write changes nothing we track: the packet is not applied
	// and a retry overwrites whatever part of it reached the file.
	if err := inject(s.fault, OpWrite, b.mu.f.Name()); err != nil {
		return fmt.Errorf("blockstore: write block %d: %w", b.id, err)
	}
	if _, err := b.mu.f.WriteAt(p.Data, p.Offset); err != nil {
		return fmt.Errorf("blockstore: write block %d: %w", b.id, err)
	}
	m := &b.mu.m
	b.mu.crcs = appendPieces(b.mu.crcs, m.size, p.Data, pieces)
	m.size += int64(len(p.Data))
	m.seq = p.Seq
	m.version = max(m.version, p.Version)
	b.mu.writer = p.Writer
	s.byteCount.Add(int64(len(p.Data)))
	s.writebackLocked(b)
	return nil
}

// writebackBytes is how many unsynced bytes a replica accumulates before
// their writing out is started (Pebble's BytesPerSync): the disk works
// while packets still arrive, instead of all at the next sync or seal.
const writebackBytes = 256 << 10

func (s *Store) writebackLocked(b *block) {
	start, size := b.mu.writeback, b.mu.m.size
	if size-start < writebackBytes {
		return
	}
	if err := startWriteback(b.mu.f, start, size-start); err != nil {
		glog.V(1).Infof("blockstore: block %d: start writeback: %v", b.id, err) // only a hint
	}
	b.mu.writeback = size
}

// retryLocked answers a packet whose seq was applied before: if its bytes
// are there, make them durable if it asks for that and it has not
// happened yet; if not, refuse it.
func (s *Store) retryLocked(b *block, p Packet) (int64, error) {
	m := &b.mu.m
	held, err := s.holdsLocked(b, p)
	switch {
	case err != nil:
		return m.size, err
	case !held && m.sealed:
		return m.size, sealedError(b, p)
	case !held:
		return m.size, refuseLocked(b, p, fmt.Errorf("%w: block %d: packet %d (%d bytes at %d) is not what the replica holds, which has %d bytes, the last of them from packet %d",
			ErrMismatch, b.id, p.Seq, len(p.Data), p.Offset, m.size, m.seq))
	}
	if m.sealed || !(p.Sync || p.Last) || b.mu.durable >= p.Offset+int64(len(p.Data)) {
		return m.size, nil
	}
	if b.mu.err != nil {
		return m.size, b.mu.err
	}
	return m.size, s.syncLocked(b)
}

// holdsLocked reports whether the replica holds exactly p's data at p's
// offset, and for a last packet, is sealed where p ends. The stored bytes
// are read back (verified against their checksums) and compared: retries
// are rare, and a packet's sequence number says nothing about whose bytes
// it carries.
func (s *Store) holdsLocked(b *block, p Packet) (bool, error) {
	m := &b.mu.m
	end := p.Offset + int64(len(p.Data))
	switch {
	case end > m.size:
		return false, nil
	case p.Last && !(m.sealed && m.size == end):
		return false, nil
	case len(p.Data) == 0:
		return true, nil
	}
	first, last := int(p.Offset/ChunkSize), int((end-1)/ChunkSize)
	crcs, err := s.crcsLocked(b, first, last-first+1)
	if err != nil {
		return false, err
	}
	start := int64(first) * ChunkSize
	stored, err := s.readVerified(b.id, start, min(int64(last+1)*ChunkSize, m.size), crcs)
	if err != nil {
		return false, err
	}
	return bytes.Equal(stored[p.Offset-start:end-start], p.Data), nil
}

// Seal stops all writing to block id: every packet not applied when Seal
// takes the replica is refused with ErrSealed, now and after a restart.
// It syncs, records the replica as sealed and returns its final size and
// version. Sealing a sealed replica returns the same answer; sealing a
// block never seen records it sealed at size 0, so a late first packet is
// refused too.
func (s *Store) Seal(id BlockID) (size int64, version uint64, err error) {
	b, err := s.acquire(id, true, rwNone)
	if err != nil {
		return 0, 0, err
	}
	defer s.release(b, rwNone)
	if !b.mu.exists {
		if err := s.createLocked(b); err != nil {
			return 0, 0, err
		}
	}
	size, err = s.sealLocked(b)
	return size, b.mu.m.version, err
}

// Truncate cuts the replica of block id to size bytes, which may not be
// more than it holds. It is how the nameserver makes every replica agree
// on a sealed block's length; the replica stays sealed (or unsealed).
func (s *Store) Truncate(id BlockID, size int64) error {
	if size < 0 {
		return fmt.Errorf("%w: block %d: truncate to %d", ErrInvalid, id, size)
	}
	b, err := s.acquire(id, false, rwExclusive)
	if err != nil {
		return err
	}
	defer s.release(b, rwExclusive)
	old := b.mu.m.size
	switch {
	case b.mu.err != nil:
		return b.mu.err
	case size > old:
		return fmt.Errorf("%w: block %d: truncate to %d would grow it from %d", ErrInvalid, id, size, old)
	case size == old:
		return nil
	}
	if err := s.truncateLocked(b, size); err != nil {
		return fmt.Errorf("blockstore: truncate block %d: %w", id, err)
	}
	s.byteCount.Add(size - old)
	return nil
}

func (s *Store) truncateLocked(b *block, size int64) error {
	crcs, err := s.truncatedCRCs(b, size)
	if err != nil {
		return err
	}
	m := b.mu.m
	m.size = size
	var data *os.File
	if b.mu.durable < size {
		data = b.mu.f // bytes the new size keeps were never synced
	}
	// Meta first: a crash before the data is cut leaves a data file longer
	// than its meta, which Open cuts.
	if err := s.persistLocked(b, m, crcs, data); err != nil {
		return err
	}
	if err := os.Truncate(s.base(b.id)+dataExt, size); err != nil {
		return err
	}
	// The checksums stay in memory until a checkpoint writes the meta file.
	b.mu.m, b.mu.durable, b.mu.crcs = m, size, crcs
	b.mu.writeback = min(b.mu.writeback, size)
	return nil
}

// truncatedCRCs returns the checksums of the replica cut to size. A cut
// inside a chunk needs that chunk's checksum recomputed, from bytes
// verified against the old one first: a damaged chunk must not get a
// checksum that vouches for it.
func (s *Store) truncatedCRCs(b *block, size int64) ([]uint32, error) {
	n := chunkCount(size)
	crcs, err := s.crcsLocked(b, 0, n)
	if err != nil || size%ChunkSize == 0 {
		return crcs, err
	}
	start := int64(n-1) * ChunkSize
	buf, err := s.readVerified(b.id, start, min(start+ChunkSize, b.mu.m.size), crcs[n-1:])
	if err != nil {
		return nil, err
	}
	crcs[n-1] = Checksum(buf[:size-start])
	return crcs, nil
}
