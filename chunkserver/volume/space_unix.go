//go:build linux || darwin || freebsd

package volume

import (
	"errors"
	"syscall"
)

// diskSpace returns the size of the file system holding dir and the bytes
// on it free to an unprivileged user; 0, 0 if it cannot tell.
func diskSpace(dir string) (capacity, free int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize)
}

// noSpace reports whether err is a disk (or quota) being full.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
