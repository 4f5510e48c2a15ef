package blockstore

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data (and the metadata needed to read it back, such
// as its length) durable, without flushing timestamps.
func fdatasync(f *os.File) error {
	return control(f, syscall.Fdatasync)
}

// startWriteback asks the kernel to start writing [off, off+n) of f to
// disk, without waiting, so that the fdatasync of a later sync or seal
// finds little left to write. It makes nothing durable.
func startWriteback(f *os.File, off, n int64) error {
	return control(f, func(fd int) error { return unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE) })
}
