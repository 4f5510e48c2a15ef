//go:build linux || darwin || freebsd

package datadir

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

func lock(dir, name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := flock(f); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &inUseError{dir: dir, lockFile: name}
		}
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	return f, nil
}

// flock takes the lock without waiting; SyscallConn keeps the
// descriptor valid while the call runs.
func flock(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if ferr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB); ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}
