//go:build linux || darwin || freebsd

package chunkserver

import "syscall"

// capacity returns the size of the file system holding dir.
func capacity(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Blocks) * int64(st.Bsize)
}
