package blockstore

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// pkt is a well-formed packet of block id.
func pkt(id BlockID, seq, off int64, data []byte) Packet {
	return Packet{BlockID: id, Seq: seq, Offset: off, Data: data, CRC32C: Checksum(data)}
}

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeAll writes data to block id in packets of size n, applying opts to
// the last one, and returns the seq of the last packet.
func writeAll(t testing.TB, s *Store, id BlockID, data []byte, n int, last func(*Packet)) int64 {
	t.Helper()
	var seq int64
	for off := 0; off < len(data); off += n {
		seq++
		p := pkt(id, seq, int64(off), data[off:min(off+n, len(data))])
		if off+n >= len(data) && last != nil {
			last(&p)
		}
		size, err := s.Write(p)
		require.NoError(t, err)
		require.EqualValues(t, min(off+n, len(data)), size)
	}
	return seq
}

func syncLast(p *Packet) { p.Sync = true }
func sealLast(p *Packet) { p.Last = true }

// flipByte damages one byte of a file in place.
func flipByte(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0x5a
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}
