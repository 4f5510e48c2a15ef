package blockstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

const (
	benchPacket = 64 << 10
	benchBlock  = 64 << 20 // bytes per block; the last packet of each seals it
)

// BenchmarkWrite writes sequential 64 KiB packets, 64 MiB per block, each
// block sealed (synced) by its last packet and the run synced at the end.
// Compare with BenchmarkRawWrite, the same bytes through a plain file.
func BenchmarkWrite(b *testing.B) {
	s := openStore(b, b.TempDir())
	data := randBytes(benchPacket, 12)
	crc := Checksum(data)
	const perBlock = benchBlock / benchPacket
	b.SetBytes(benchPacket)
	b.ResetTimer()
	id, seq := BlockID(1), int64(0)
	for i := 0; i < b.N; i++ {
		seq++
		if seq == 1 {
			if err := s.Create(context.Background(), id); err != nil {
				b.Fatal(err)
			}
		}
		p := Packet{BlockID: id, Seq: seq, Offset: (seq - 1) * benchPacket, Data: data, CRC32C: crc, Last: seq == perBlock}
		if _, err := s.Write(p); err != nil {
			b.Fatal(err)
		}
		if p.Last {
			id, seq = id+1, 0
		}
	}
	if seq > 0 {
		if _, _, err := s.Seal(id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawWrite is the baseline: the same sequential 64 KiB writes to
// plain files, one per 64 MiB, each fdatasync'd when full and at the end.
func BenchmarkRawWrite(b *testing.B) {
	dir := b.TempDir()
	data := randBytes(benchPacket, 12)
	b.SetBytes(benchPacket)
	b.ResetTimer()
	var (
		f     *os.File
		off   int64
		files int
	)
	sync := func() {
		if err := fdatasync(f); err != nil {
			b.Fatal(err)
		}
		f.Close()
		f = nil
	}
	for i := 0; i < b.N; i++ {
		if f == nil {
			var err error
			files++
			if f, err = os.Create(filepath.Join(dir, fmt.Sprintf("raw%d", files))); err != nil {
				b.Fatal(err)
			}
			off = 0
		}
		if _, err := f.WriteAt(data, off); err != nil {
			b.Fatal(err)
		}
		if off += benchPacket; off == benchBlock {
			sync()
		}
	}
	if f != nil {
		sync()
	}
}

// BenchmarkSealConcurrent seals blocks the way a fence does: every block
// has 4 KiB synced and a 256 KiB packet written but not synced, and the
// seals come from 85 goroutines at once (a nameserver's 256 Seal RPCs in
// flight spread over three chunkservers). Reported per seal.
func BenchmarkSealConcurrent(b *testing.B) {
	s := openStore(b, b.TempDir())
	synced, unsynced := randBytes(4<<10, 1), randBytes(256<<10, 2)
	ids := make(chan BlockID, b.N)
	for i := range b.N {
		id := BlockID(i + 1)
		if err := s.Create(context.Background(), id); err != nil {
			b.Fatal(err)
		}
		p := pkt(id, 1, 0, synced)
		p.Sync = true
		if _, err := s.Write(p); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Write(pkt(id, 2, int64(len(synced)), unsynced)); err != nil {
			b.Fatal(err)
		}
		ids <- id
	}
	close(ids)
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 85 {
		wg.Go(func() {
			for id := range ids {
				if _, _, err := s.Seal(id); err != nil {
					b.Error(err)
				}
			}
		})
	}
	wg.Wait()
}
