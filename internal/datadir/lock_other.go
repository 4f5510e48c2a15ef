//go:build !(linux || darwin || freebsd)

package datadir

import "os"

// lock opens the lock file but takes no lock where flock is not
// available: there nothing keeps two daemons off one directory.
func lock(dir, name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
}
