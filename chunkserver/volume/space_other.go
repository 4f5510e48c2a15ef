//go:build !(linux || darwin || freebsd)

package volume

import (
	"errors"
	"syscall"
)

// diskSpace cannot tell here.
func diskSpace(string) (capacity, free int64) { return 0, 0 }

// noSpace reports whether err is a disk being full.
func noSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
