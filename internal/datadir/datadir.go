// Package datadir keeps a daemon's data directory to one process at a
// time. Lock takes an exclusive advisory lock (flock) on the directory's
// LOCK file; the kernel drops it when the process dies, so a crash
// leaves nothing to clean up. Locks taken through separate opens conflict
// even within one process, so two servers in one test process cannot
// share a directory either.
package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// LockFile is the name of the lock file Lock creates in a directory.
const LockFile = "LOCK"

// ErrInUse is wrapped by the error of Lock when the directory is held.
var ErrInUse = errors.New("data directory in use")

// Lock creates dir if it is missing and locks it. Closing the returned
// file releases the lock. If another process holds the directory the
// error names it, says so, and wraps ErrInUse.
func Lock(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return lock(dir, filepath.Join(dir, LockFile))
}

// inUseError is Lock's refusal of a held directory.
type inUseError struct{ dir, lockFile string }

func (e *inUseError) Error() string {
	return fmt.Sprintf("data directory %s is in use: another process holds it (it has the lock on %s)", e.dir, e.lockFile)
}

func (e *inUseError) Is(target error) bool { return target == ErrInUse }
