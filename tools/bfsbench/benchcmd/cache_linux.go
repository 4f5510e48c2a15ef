//go:build linux

package benchcmd

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// canDropCache reports whether dropCache works on this system.
const canDropCache = true

// dropCache asks the kernel to drop the file's pages from the page cache
// (posix_fadvise DONTNEED). Only clean pages go: sync the file first.
func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// resident returns how many bytes of the file are in the page cache
// (mincore), to check that dropCache did its job.
func resident(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (st.Size()+page-1)/page)
	// x/sys/unix has no Mincore wrapper.
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return 0, errno
	}
	var n int64
	for _, v := range vec {
		if v&1 != 0 {
			n += page
		}
	}
	return min(n, st.Size()), nil
}

// datasync makes the file's data durable (fdatasync).
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
