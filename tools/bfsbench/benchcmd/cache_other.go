//go:build !linux

package benchcmd

import (
	"errors"
	"os"
)

// canDropCache reports whether dropCache works on this system: not here,
// so reads are from the page cache and the io table says so.
const canDropCache = false

var errNoDrop = errors.New("dropping the page cache is supported on Linux only")

func dropCache(string) error { return errNoDrop }

func resident(string) (int64, error) { return 0, errNoDrop }

// datasync makes the file durable (fsync: there is no portable fdatasync).
func datasync(f *os.File) error { return f.Sync() }
