package blockstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// ChunkSize is the span of data covered by one stored CRC32C.
const ChunkSize = 64 << 10

// castagnoli is the CRC32C table (hardware accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C (Castagnoli) of p, the checksum a Packet
// carries.
func Checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// The meta file: a fixed header followed by one little-endian CRC32C per
// chunk of the replica's durable bytes. See doc.go for the layout.
const (
	headerSize = 64
	flagSealed = 1 << 0
)

var metaMagic = [8]byte{'B', 'F', 'S', 'M', 'E', 'T', 'A', 1}

// meta is what the meta file of a replica records.
type meta struct {
	id      BlockID
	version uint64
	size    int64 // durable bytes of the data file
	seq     int64 // sequence number of the last packet within size
	sealed  bool
}

func chunkCount(size int64) int { return int((size + ChunkSize - 1) / ChunkSize) }

// metaLen is the length of the meta file of a replica of size bytes.
func metaLen(size int64) int { return headerSize + 4*chunkCount(size) }

// appendMeta appends the meta file holding m and crcs (one per chunk of
// m.size) to dst.
func appendMeta(dst []byte, m meta, crcs []uint32) []byte {
	n := chunkCount(m.size)
	start := len(dst)
	dst = append(dst, make([]byte, headerSize)...)
	buf := dst[start:]
	copy(buf, metaMagic[:])
	le := binary.LittleEndian
	if m.sealed {
		le.PutUint32(buf[8:], flagSealed)
	}
	le.PutUint32(buf[12:], ChunkSize)
	le.PutUint64(buf[16:], uint64(m.id))
	le.PutUint64(buf[24:], m.version)
	le.PutUint64(buf[32:], uint64(m.size))
	le.PutUint64(buf[40:], uint64(m.seq))
	le.PutUint32(buf[48:], uint32(n))
	le.PutUint32(buf[60:], Checksum(buf[:60]))
	for _, c := range crcs[:n] {
		dst = le.AppendUint32(dst, c)
	}
	return dst
}

// decodeMeta checks and decodes a whole meta file (as the meta log
// carries it): the header and exactly one checksum per chunk.
func decodeMeta(buf []byte) (meta, []uint32, error) {
	m, err := decodeHeader(buf)
	if err != nil {
		return meta{}, nil, err
	}
	n := chunkCount(m.size)
	if len(buf) != metaLen(m.size) {
		return meta{}, nil, fmt.Errorf("%w: meta of block %d: %d bytes for %d chunks", ErrCorrupt, m.id, len(buf), n)
	}
	crcs, err := decodeCRCs(buf[headerSize:], n)
	return m, crcs, err
}

// decodeHeader checks and decodes a meta file's header.
func decodeHeader(buf []byte) (meta, error) {
	le := binary.LittleEndian
	switch {
	case len(buf) < headerSize:
		return meta{}, fmt.Errorf("%w: meta header of %d bytes", ErrCorrupt, len(buf))
	case [8]byte(buf[:8]) != metaMagic:
		return meta{}, fmt.Errorf("%w: bad meta magic %q", ErrCorrupt, buf[:8])
	case le.Uint32(buf[60:]) != Checksum(buf[:60]):
		return meta{}, fmt.Errorf("%w: meta header checksum", ErrCorrupt)
	case le.Uint32(buf[12:]) != ChunkSize:
		return meta{}, fmt.Errorf("%w: meta chunk size %d", ErrCorrupt, le.Uint32(buf[12:]))
	}
	m := meta{
		id:      BlockID(le.Uint64(buf[16:])),
		version: le.Uint64(buf[24:]),
		size:    int64(le.Uint64(buf[32:])),
		seq:     int64(le.Uint64(buf[40:])),
		sealed:  le.Uint32(buf[8:])&flagSealed != 0,
	}
	if m.size < 0 || int(le.Uint32(buf[48:])) != chunkCount(m.size) {
		return meta{}, fmt.Errorf("%w: meta size %d with %d chunks", ErrCorrupt, m.size, le.Uint32(buf[48:]))
	}
	return m, nil
}

// decodeCRCs decodes n chunk checksums from raw.
func decodeCRCs(raw []byte, n int) ([]uint32, error) {
	if len(raw) < 4*n {
		return nil, fmt.Errorf("%w: %d chunk checksums expected, %d bytes stored", ErrCorrupt, n, len(raw))
	}
	crcs := make([]uint32, n)
	for i := range crcs {
		crcs[i] = binary.LittleEndian.Uint32(raw[4*i:])
	}
	return crcs, nil
}

// appendPieces extends crcs, the checksums of a replica of size bytes,
// by data appended at size, whose pieceCRCs (at offset size) are pieces.
func appendPieces(crcs []uint32, size int64, data []byte, pieces []uint32) []uint32 {
	if fill := size % ChunkSize; fill != 0 && len(pieces) > 0 {
		n := min(int64(len(data)), ChunkSize-fill)
		last := len(crcs) - 1
		crcs[last] = combineCRC(crcs[last], pieces[0], int(n))
		pieces = pieces[1:]
	}
	return append(crcs, pieces...)
}
