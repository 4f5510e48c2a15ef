package blockstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCombineCRC(t *testing.T) {
	data := randBytes(3*ChunkSize+77, 21)
	for _, cut := range []int{0, 1, 5, 1000, ChunkSize, ChunkSize + 3, len(data) - 1, len(data)} {
		a, b := data[:cut], data[cut:]
		require.Equal(t, Checksum(data), combineCRC(Checksum(a), Checksum(b), len(b)), "cut at %d", cut)
	}
}

func TestPieceCRCs(t *testing.T) {
	data := randBytes(3*ChunkSize+77, 22)
	for _, tc := range []struct {
		off  int64
		n    int
		cuts []int // piece lengths
	}{
		{0, 0, nil},
		{0, 100, []int{100}},
		{0, ChunkSize, []int{ChunkSize}},
		{0, 2*ChunkSize + 5, []int{ChunkSize, ChunkSize, 5}},
		{ChunkSize - 10, 10, []int{10}},
		{ChunkSize - 10, 30, []int{10, 20}},
		{5*ChunkSize + 1, len(data), []int{ChunkSize - 1, ChunkSize, ChunkSize, 78}},
	} {
		pieces, whole := pieceCRCs(tc.off, data[:tc.n])
		require.Equal(t, Checksum(data[:tc.n]), whole, "%+v", tc)
		var want []uint32
		rest := data[:tc.n]
		for _, n := range tc.cuts {
			want = append(want, Checksum(rest[:n]))
			rest = rest[n:]
		}
		require.Equal(t, want, pieces, "%+v", tc)
	}
}

// BenchmarkCheckPacket is the chunkserver's per-packet checksum work on
// an SDK-sized packet: one pass over the data.
func BenchmarkCheckPacket(b *testing.B) {
	data := randBytes(256<<10, 23)
	p := Packet{BlockID: 1, Seq: 1, Offset: 5 * ChunkSize, Data: data, CRC32C: Checksum(data)}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := checkPacket(p); err != nil {
			b.Fatal(err)
		}
	}
}
