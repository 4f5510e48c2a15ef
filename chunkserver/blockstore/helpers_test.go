package blockstore

import (
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func openStore(t testing.TB, dir string) *Store {
	return openStoreWith(t, dir, options{logLimit: defaultLogLimit})
}

func openStoreWith(t testing.TB, dir string, o options) *Store {
	t.Helper()
	s, err := open(dir, o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// crashCopy copies the store in dir, open and in use, to a new directory,
// as a kill -9 would leave it: every write the store made is there,
// durable or not (a superset of what a crash keeps). The meta log goes
// first: the checkpointer may remove a log and rewrite meta files during
// the copy, and a log copied before its meta files replays over them.
func crashCopy(t testing.TB, dir string) string {
	t.Helper()
	dst := t.TempDir()
	crashCopyTo(t, dir, dst)
	return dst
}

// crashCopyTo is crashCopy into dst.
func crashCopyTo(t testing.TB, dir, dst string) {
	t.Helper()
	for _, sub := range []string{logDir, blocksDir} {
		err := filepath.WalkDir(filepath.Join(dir, sub), func(path string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile
			}
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, path)
			if d.IsDir() {
				return os.MkdirAll(filepath.Join(dst, rel), 0o755)
			}
			raw, err := os.ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dst, rel), raw, 0o644)
		})
		require.NoError(t, err)
	}
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

// create makes an empty replica of block id, as the nameserver's AddBlock
// has every chunkserver of a write set do before the first packet.
func create(t testing.TB, s *Store, ids ...BlockID) {
	t.Helper()
	for _, id := range ids {
		require.NoError(t, s.Create(context.Background(), id))
	}
}

// writeAll creates block id and writes data to it in packets of size n,
// applying opts to the last one, and returns the seq of the last packet.
func writeAll(t testing.TB, s *Store, id BlockID, data []byte, n int, last func(*Packet)) int64 {
	t.Helper()
	create(t, s, id)
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
