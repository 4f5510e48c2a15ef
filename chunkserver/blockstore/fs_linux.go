package blockstore

import (
	"os"
	"syscall"
)

// fdatasync makes f's data (and the metadata needed to read it back, such
// as its length) durable, without flushing timestamps.
func fdatasync(f *os.File) error {
	return control(f, syscall.Fdatasync)
}
