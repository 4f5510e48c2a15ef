//go:build !(linux || darwin || freebsd)

package blockstore

import (
	"errors"
	"os"
	"syscall"
)

// lockDir is a no-op where the store has no advisory file lock.
func lockDir(dir string) (*os.File, error) { return nil, nil }

func fdatasync(f *os.File) error { return f.Sync() }

// syncDir is a no-op where directories cannot be synced.
func syncDir(dir string) error { return nil }

// startWriteback does nothing where the system cannot start writeback of
// a range: the data is written by the next fdatasync.
func startWriteback(f *os.File, off, n int64) error { return nil }

// noSpace reports whether err is the disk being full.
func noSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// readDirect reads up to n bytes from the start of the file at path
// (through the page cache: this system has no O_DIRECT here).
func readDirect(path string, n int) ([]byte, error) { return readStart(path, n) }
