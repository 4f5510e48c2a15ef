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

// encodeMeta returns the meta file holding m and crcs (one per chunk of
// m.size).
func encodeMeta(m meta, crcs []uint32) []byte {
	n := chunkCount(m.size)
	buf := make([]byte, headerSize+4*n)
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
	for i, c := range crcs[:n] {
		le.PutUint32(buf[headerSize+4*i:], c)
	}
	return buf
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

// appendCRCs extends crcs, the checksums of a replica of size bytes, by
// data appended at size. Data starting on a chunk boundary and filling one
// chunk exactly has the packet's checksum (crc), which is reused.
func appendCRCs(crcs []uint32, size int64, data []byte, crc uint32) []uint32 {
	if size%ChunkSize == 0 && len(data) == ChunkSize {
		return append(crcs, crc)
	}
	if fill := size % ChunkSize; fill != 0 && len(data) > 0 {
		n := min(int64(len(data)), ChunkSize-fill)
		last := len(crcs) - 1
		crcs[last] = crc32.Update(crcs[last], castagnoli, data[:n])
		data = data[n:]
	}
	for len(data) > 0 {
		n := min(len(data), ChunkSize)
		crcs = append(crcs, Checksum(data[:n]))
		data = data[n:]
	}
	return crcs
}
