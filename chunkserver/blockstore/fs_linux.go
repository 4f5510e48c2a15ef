package blockstore

import (
	"errors"
	"io"
	"os"
	"syscall"

	"unsafe"

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

// directAlign is the alignment O_DIRECT asks of buffers and lengths.
const directAlign = 4096

// readDirect reads up to n bytes from the start of the file at path from
// the disk itself (O_DIRECT), not the page cache, so a disk that fails
// reads shows it even for bytes the cache holds. On a file system that
// refuses O_DIRECT (tmpfs: there is no disk) it reads through the cache.
func readDirect(path string, n int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if errors.Is(err, syscall.EINVAL) {
		return readStart(path, n)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := (n + directAlign - 1) &^ (directAlign - 1)
	raw := make([]byte, size+directAlign)
	off := directAlign - int(uintptr(unsafe.Pointer(&raw[0]))&(directAlign-1))
	buf := raw[off : off+size]
	k, err := io.ReadFull(f, buf)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil
	}
	return buf[:min(k, n)], err
}
