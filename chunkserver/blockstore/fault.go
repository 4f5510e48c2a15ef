package blockstore

import "fmt"

// Op is a kind of disk I/O that TestingKnobs.Fault is shown.
type Op int

const (
	// OpWrite: a packet's bytes written into a data file.
	OpWrite Op = iota + 1
	// OpSync: a data file fdatasync'd (a sync, a last packet, a seal).
	OpSync
	// OpRead: a replica's bytes read from its data file.
	OpRead
	// OpLogWrite: a frame (a group commit) written to the meta log.
	OpLogWrite
	// OpLogSync: the meta log fdatasync'd after a frame.
	OpLogSync
	// OpCheck: Check's probe of the disk (a file written, synced and
	// read back).
	OpCheck
)

func (o Op) String() string {
	switch o {
	case OpWrite:
		return "write"
	case OpSync:
		return "sync"
	case OpRead:
		return "read"
	case OpLogWrite:
		return "meta log write"
	case OpLogSync:
		return "meta log sync"
	case OpCheck:
		return "check"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// TestingKnobs are seams for tests; the zero value is production.
type TestingKnobs struct {
	// Fault, if set, is called before every disk I/O of a kind Op names,
	// with the path of the file. An error fails the I/O as the disk would
	// (return syscall.EIO, syscall.ENOSPC, ...); it may block, as a hung
	// disk does.
	Fault func(op Op, path string) error
}

// OpenWith is Open with testing knobs.
func OpenWith(dir string, knobs TestingKnobs) (*Store, error) {
	return open(dir, options{logLimit: defaultLogLimit, fault: knobs.Fault})
}

// inject asks the Fault knob, if any, about an I/O of kind op on path.
func inject(fault func(Op, string) error, op Op, path string) error {
	if fault == nil {
		return nil
	}
	return fault(op, path)
}
