package blockstore

import (
	"errors"
	"fmt"
)

// Sentinel errors. The chunkserver maps each to one protocol status code;
// errors are wrapped with %w and carry the block id in their message.
var (
	// ErrSealed: the replica is sealed; no byte is accepted any more (I4).
	ErrSealed = errors.New("block sealed")
	// ErrGap: the packet's sequence number is past the next expected one.
	ErrGap = errors.New("packet sequence gap")
	// ErrOffset: the packet does not start at the replica's current size.
	ErrOffset = errors.New("packet offset does not match replica size")
	// ErrMismatch: a packet with the sequence number of one already
	// applied is not a copy of bytes the replica holds.
	ErrMismatch = errors.New("packet does not match the one stored")
	// ErrChecksum: a packet's data does not match its CRC32C.
	ErrChecksum = errors.New("packet checksum mismatch")
	// ErrCorrupt: bytes on disk do not match their stored checksum.
	ErrCorrupt = errors.New("replica corrupt on disk")
	// ErrNotFound: the store holds no replica of the block (for a packet:
	// none was created, see Create).
	ErrNotFound = errors.New("block not found")
	// ErrInvalid: a malformed request (negative offset, growing truncate).
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("block store closed")
	// ErrFull: Check found the disk out of space (it wraps the ENOSPC).
	// The store takes writes again once space is freed.
	ErrFull = errors.New("disk full")
)

// refusal is what a packet refused with ErrGap, ErrOffset or ErrMismatch
// gets when it does not come from the replica's writer (see
// Packet.Writer). It wraps the full reason, so errors.Is and the
// chunkserver's logs see it, but its text is one and the same for the
// three and names no sequence number: a stream that did not write the
// replica learns nothing from it about where the writer is.
type refusal struct {
	id     BlockID
	reason error
}

func (r *refusal) Error() string {
	return fmt.Sprintf("block %d: packet refused: it is neither the next packet of this replica's writer nor a copy of one the replica holds", r.id)
}

func (r *refusal) Unwrap() error { return r.reason }
