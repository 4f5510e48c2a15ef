package blockstore

import "errors"

// Sentinel errors. The chunkserver maps each to one protocol status code;
// errors are wrapped with %w and carry the block id in their message.
var (
	// ErrSealed: the replica is sealed; no byte is accepted any more (I4).
	ErrSealed = errors.New("block sealed")
	// ErrGap: the packet's sequence number is past the next expected one.
	ErrGap = errors.New("packet sequence gap")
	// ErrOffset: the packet does not start at the replica's current size.
	ErrOffset = errors.New("packet offset does not match replica size")
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
)
