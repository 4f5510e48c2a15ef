//go:build linux || darwin || freebsd

package blockstore

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/bfs-go/bfs/internal/datadir"
)

// lockDir takes an exclusive advisory lock on dir/LOCK so two stores (two
// chunkserver processes) never share a directory. The kernel drops the lock
// when the process dies, so a crash leaves nothing to clean up.
func lockDir(dir string) (*os.File, error) {
	f, err := datadir.Lock(dir)
	if err != nil {
		return nil, fmt.Errorf("blockstore: %w", err)
	}
	return f, nil
}

// control runs fn on f's descriptor; SyscallConn keeps the descriptor
// valid while fn runs even if f is closed concurrently.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if ferr = fn(int(fd)); ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// syncDir makes the entries of dir (created, renamed, removed files)
// durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// noSpace reports whether err is the disk (or the user's quota) being
// full: the condition that passes once space is freed.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
