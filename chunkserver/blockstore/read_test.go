package blockstore

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadRanges(t *testing.T) {
	s := openStore(t, t.TempDir())
	data := randBytes(3*ChunkSize+1000, 3)
	writeAll(t, s, 1, data, 50_000, nil) // unsealed: reads see what is written
	for _, tc := range []struct {
		off, n int64
		eof    bool
	}{
		{0, 10, false},
		{0, ChunkSize, false},
		{ChunkSize, 2 * ChunkSize, false},
		{ChunkSize - 5, 10, false},
		{100, 3 * ChunkSize, false},
		{3 * ChunkSize, 1000, false},
		{3 * ChunkSize, 5000, true},
		{0, int64(len(data)) + 1, true},
		{int64(len(data)) - 1, 1, false},
	} {
		buf := make([]byte, tc.n)
		n, err := s.ReadAt(1, buf, tc.off)
		want := data[tc.off:min(tc.off+tc.n, int64(len(data)))]
		if tc.eof {
			require.ErrorIs(t, err, io.EOF, "%+v", tc)
		} else {
			require.NoError(t, err, "%+v", tc)
		}
		require.Equal(t, want, buf[:n], "%+v", tc)
	}
	_, err := s.ReadAt(1, make([]byte, 1), int64(len(data)))
	require.ErrorIs(t, err, io.EOF)
	_, err = s.ReadAt(1, make([]byte, 1), int64(len(data))+1)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = s.ReadAt(1, make([]byte, 1), -1)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = s.ReadAt(2, make([]byte, 1), 0)
	require.ErrorIs(t, err, ErrNotFound)
}

// TestCorruptionDetected damages one byte of a replica's data file and
// checks that reads touching its chunk fail while the others still work,
// for an unsealed replica (checksums in memory), a sealed one (checksums
// in the meta file) and one reopened from disk.
func TestCorruptionDetected(t *testing.T) {
	data := randBytes(3*ChunkSize+1000, 4)
	for _, tc := range []struct {
		name          string
		seal, reopen  bool
		damage        func(t *testing.T, base string)
		badOff, goodN int64
	}{
		{"unsealed data", false, false, func(t *testing.T, base string) { flipByte(t, base+dataExt, ChunkSize+17) }, ChunkSize, ChunkSize},
		{"sealed data", true, false, func(t *testing.T, base string) { flipByte(t, base+dataExt, 2*ChunkSize+17) }, 2 * ChunkSize, 2 * ChunkSize},
		{"last partial chunk", true, true, func(t *testing.T, base string) { flipByte(t, base+dataExt, 3*ChunkSize+999) }, 3 * ChunkSize, 3 * ChunkSize},
		{"stored checksum", true, true, func(t *testing.T, base string) { flipByte(t, base+metaExt, headerSize+4) }, ChunkSize, ChunkSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			last := syncLast
			if tc.seal {
				last = sealLast
			}
			writeAll(t, s, 1, data, ChunkSize, last)
			if tc.reopen {
				require.NoError(t, s.Close())
				s = openStore(t, dir)
			}
			tc.damage(t, s.base(1))

			got, err := s.Read(1, 0, tc.goodN)
			require.NoError(t, err)
			require.Equal(t, data[:tc.goodN], got)
			for _, r := range [][2]int64{{tc.badOff, 1}, {tc.badOff + 100, 10}, {0, int64(len(data))}, {tc.badOff - 1, 2}} {
				got, err := s.Read(1, r[0], r[1])
				require.ErrorIs(t, err, ErrCorrupt, "read %v", r)
				require.Empty(t, got)
			}
		})
	}
}

// TestMarkCorrupt: a replica marked corrupt reads as ErrCorrupt, even its
// intact bytes, until it is deleted; the mark does not survive a reopen.
func TestMarkCorrupt(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	data := randBytes(2*ChunkSize, 5)
	writeAll(t, s, 1, data, ChunkSize, sealLast)
	writeAll(t, s, 2, data, ChunkSize, sealLast)
	require.ErrorIs(t, s.MarkCorrupt(3), ErrNotFound)
	require.NoError(t, s.MarkCorrupt(1))
	require.True(t, s.Corrupt(1))
	require.False(t, s.Corrupt(2))
	_, err := s.Read(1, 0, 10)
	require.ErrorIs(t, err, ErrCorrupt)
	got, err := s.Read(2, 0, 10)
	require.NoError(t, err)
	require.Equal(t, data[:10], got)

	require.NoError(t, s.Close())
	s = openStore(t, dir)
	require.False(t, s.Corrupt(1), "the mark is kept in memory only")
	require.NoError(t, s.MarkCorrupt(1))
	require.NoError(t, s.Delete(1))
	require.False(t, s.Corrupt(1))
}
