//go:build darwin || freebsd

package blockstore

import "os"

// fdatasync falls back to fsync where the system has no fdatasync. (On
// darwin, File.Sync issues F_FULLFSYNC.)
func fdatasync(f *os.File) error { return f.Sync() }

// startWriteback does nothing where the system cannot start writeback of
// a range: the data is written by the next fdatasync.
func startWriteback(f *os.File, off, n int64) error { return nil }

// readDirect reads up to n bytes from the start of the file at path
// (through the page cache: this system has no O_DIRECT here).
func readDirect(path string, n int) ([]byte, error) { return readStart(path, n) }
