package blockstore

// CRC32C arithmetic, so that a packet's data is checksummed once: the
// checksums of its pieces (split at chunk boundaries) are what the meta
// keeps, and their combination is checked against the packet's checksum.
// This is zlib's crc32_combine, for the Castagnoli polynomial.

// castagnoliPoly is the Castagnoli polynomial in reflected bit order.
const castagnoliPoly = 0x82f63b78

// multModP returns a·b modulo the polynomial (reflected bit order: the
// most significant bit is x^0).
func multModP(a, b uint32) uint32 {
	if a == 0 {
		return 0
	}
	var p uint32
	for m := uint32(1) << 31; ; m >>= 1 {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliPoly
		} else {
			b >>= 1
		}
	}
}

// x2nTable holds x^(2^n) modulo the polynomial.
var x2nTable = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	for n := range t {
		t[n] = p
		p = multModP(p, p)
	}
	return t
}()

// x2nModP returns x^(n·2^k) modulo the polynomial.
func x2nModP(n uint64, k uint) uint32 {
	p := uint32(1) << 31 // x^0
	for ; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = multModP(x2nTable[k&31], p)
		}
	}
	return p
}

// combineCRC returns the CRC32C of a followed by b, given the CRC32C of
// each and the length of b.
func combineCRC(crcA, crcB uint32, lenB int) uint32 {
	return multModP(x2nModP(uint64(lenB), 3), crcA) ^ crcB
}

// pieceCRCs returns the checksums of data, written at off, cut at chunk
// boundaries: the first piece ends at the first boundary past off, the
// others are whole chunks but the last. Their combination is returned
// too: the checksum of all of data.
func pieceCRCs(off int64, data []byte) (pieces []uint32, whole uint32) {
	for first := true; len(data) > 0; first = false {
		n := min(len(data), int(ChunkSize-off%ChunkSize))
		c := Checksum(data[:n])
		if first {
			whole = c
		} else {
			whole = combineCRC(whole, c, n)
		}
		pieces = append(pieces, c)
		data, off = data[n:], off+int64(n)
	}
	return pieces, whole
}
