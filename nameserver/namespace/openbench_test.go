package namespace

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// seedOpenFiles stores n files open for write under /elsewhere (100 to a
// directory, each writer a session of its own per directory) with
// putEntry, in large batches, then reopens the store so that whatever it
// keeps in memory is built as after a restart. Applying n creates one
// command at a time would take minutes for what the benchmarks only
// need as a backdrop.
func seedOpenFiles(b *testing.B, dir string, n int) *Store {
	b.Helper()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	if err := format(s); err != nil {
		b.Fatal(err)
	}
	if err := mkdir(s, "/elsewhere", false); err != nil {
		b.Fatal(err)
	}
	top, err := s.Stat("/elsewhere")
	if err != nil {
		b.Fatal(err)
	}
	const perDir = 100
	ids := seedIDs(b, s, n+(n+perDir-1)/perDir)
	batch := s.db.NewBatch()
	var parent uint64
	for i := 0; i < n; i++ {
		if i%perDir == 0 {
			d := newEntry(top.EntryId, fmt.Sprintf("d%05d", i/perDir), ids[0], bfspb.FileType_FILE_TYPE_DIR, DefaultDirMode, 1)
			if err := putEntry(batch, d); err != nil {
				b.Fatal(err)
			}
			parent = d.EntryId
			ids = ids[1:]
		}
		f := newEntry(parent, fmt.Sprintf("f%d", i), ids[0], bfspb.FileType_FILE_TYPE_FILE, DefaultFileMode, 1)
		ids = ids[1:]
		f.WriterSession = fmt.Sprintf("w%d", i/perDir)
		if err := putEntry(batch, f); err != nil {
			b.Fatal(err)
		}
		if batch.Len() > 4<<20 {
			if err := batch.Commit(pebble.Sync); err != nil {
				b.Fatal(err)
			}
			batch = s.db.NewBatch()
		}
	}
	if err := batch.Commit(pebble.Sync); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if s, err = Open(Options{Dir: dir}); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkUnlockEmptyDir measures UnlockDir of a locked directory with
// no file open in it, with no other file open in the namespace and with
// 100,000 open elsewhere: what it costs must not depend on them.
func BenchmarkUnlockEmptyDir(b *testing.B) {
	for _, n := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("open=%d", n), func(b *testing.B) {
			s := seedOpenFiles(b, b.TempDir(), n)
			defer s.Close()
			openSessions(b, s, "A")
			if err := mkdir(s, "/empty", false); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if _, err := lockDir(s, "/empty", "A"); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				res, err := unlockDir(s, "/empty", "A", false)
				if err != nil || res.Cleaning == nil || len(res.Cleaning.Files) != 0 {
					b.Fatalf("unlock: %v, %+v", err, res)
				}
			}
		})
	}
}

// BenchmarkLockEmptyDir measures LockDir of a directory with no file
// open in it (the grant looks for other sessions' open files there), with
// none and with 100,000 open elsewhere.
func BenchmarkLockEmptyDir(b *testing.B) {
	for _, n := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("open=%d", n), func(b *testing.B) {
			s := seedOpenFiles(b, b.TempDir(), n)
			defer s.Close()
			openSessions(b, s, "A")
			if err := mkdir(s, "/empty", false); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := lockDir(s, "/empty", "A")
				if err != nil || res.Cleaning != nil {
					b.Fatalf("lock: %v, %+v", err, res)
				}
				b.StopTimer()
				if _, err := unlockDir(s, "/empty", "A", false); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkOpenFilesUnder measures finding the files open for write in a
// subtree, what LockDir and UnlockDir do besides their commit: in an
// empty directory and in one of the seeded directories (100 open files),
// with none and with 100,000 open elsewhere.
func BenchmarkOpenFilesUnder(b *testing.B) {
	for _, n := range []int{0, 100_000} {
		s := seedOpenFiles(b, b.TempDir(), n+100)
		if err := mkdir(s, "/empty", false); err != nil {
			b.Fatal(err)
		}
		for name, dir := range map[string]string{"empty": "/empty", "100open": "/elsewhere/d00000"} {
			info, err := s.Stat(dir)
			if err != nil {
				b.Fatal(err)
			}
			want := 0
			if dir != "/empty" {
				want = 100
			}
			b.Run(fmt.Sprintf("open=%d/dir=%s", n, name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if got := s.open.under(info.EntryId, nil); len(got) != want {
						b.Fatalf("%d open files under %s, want %d", len(got), dir, want)
					}
				}
			})
		}
		s.Close()
	}
}
