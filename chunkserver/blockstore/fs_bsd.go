//go:build darwin || freebsd

package blockstore

import "os"

// fdatasync falls back to fsync where the system has no fdatasync. (On
// darwin, File.Sync issues F_FULLFSYNC.)
func fdatasync(f *os.File) error { return f.Sync() }
