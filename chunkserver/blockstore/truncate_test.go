package blockstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTruncate(t *testing.T) {
	data := randBytes(3*ChunkSize+1000, 5)
	for _, tc := range []struct {
		name string
		seal bool
		to   int64
		err  error
	}{
		{"inside a chunk", true, ChunkSize + 100, nil},
		{"on a chunk boundary", true, 2 * ChunkSize, nil},
		{"inside the last chunk", true, 3*ChunkSize + 10, nil},
		{"to zero", true, 0, nil},
		{"same size", true, int64(len(data)), nil},
		{"unsealed", false, ChunkSize + 100, nil},
		{"growing refused", true, int64(len(data)) + 1, ErrInvalid},
		{"negative refused", true, -1, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			last := syncLast
			if tc.seal {
				last = sealLast
			}
			writeAll(t, s, 1, data, 40_000, last)
			err := s.Truncate(1, tc.to)
			want := data
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			} else {
				require.NoError(t, err)
				want = data[:tc.to]
			}
			check := func(s *Store) {
				info, err := s.Info(1)
				require.NoError(t, err)
				require.Equal(t, BlockInfo{ID: 1, Size: int64(len(want)), Sealed: tc.seal}, info)
				got, err := s.Read(1, 0, int64(len(data)))
				require.NoError(t, err)
				require.Equal(t, want, got)
				_, bytes := s.Usage()
				require.EqualValues(t, len(want), bytes)
			}
			check(s)
			require.NoError(t, s.Close())
			s = openStore(t, dir)
			check(s)
		})
	}
	t.Run("unknown block", func(t *testing.T) {
		s := openStore(t, t.TempDir())
		require.ErrorIs(t, s.Truncate(9, 0), ErrNotFound)
	})
	t.Run("damaged chunk is not re-checksummed", func(t *testing.T) {
		s := openStore(t, t.TempDir())
		writeAll(t, s, 1, data, ChunkSize, sealLast)
		flipByte(t, s.base(1)+dataExt, ChunkSize+5)
		require.ErrorIs(t, s.Truncate(1, ChunkSize+100), ErrCorrupt)
		info, err := s.Info(1)
		require.NoError(t, err)
		require.EqualValues(t, len(data), info.Size)
	})
}

func TestDelete(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	writeAll(t, s, 1, randBytes(1000, 6), 100, sealLast)
	writeAll(t, s, 2, randBytes(500, 7), 100, nil)
	require.NoError(t, s.Delete(1))
	require.ErrorIs(t, s.Delete(1), ErrNotFound)
	require.NoError(t, s.Delete(2))
	require.Empty(t, s.List())
	blocks, bytes := s.Usage()
	require.Zero(t, blocks)
	require.Zero(t, bytes)
	// A deleted block can be written anew from seq 1.
	writeAll(t, s, 1, []byte("again"), 100, syncLast)
	require.NoError(t, s.Close())
	s = openStore(t, dir)
	require.Equal(t, []BlockInfo{{ID: 1, Size: 5}}, s.List())
}
