package namespace

import "errors"

// Sentinel errors; the nameserver maps each to one protocol status code.
var (
	ErrNotFound     = errors.New("no such file or directory")
	ErrExists       = errors.New("file exists")
	ErrNotDirectory = errors.New("not a directory")
	ErrIsDirectory  = errors.New("is a directory")
	ErrNotEmpty     = errors.New("directory not empty")
	ErrInvalid      = errors.New("invalid argument")
	ErrClosed       = errors.New("namespace closed")
	// ErrBlockChanged refuses a close decided for a block that is no
	// longer the file's last one.
	ErrBlockChanged = errors.New("the file's last block changed")
	// ErrNotOpen: the file is not open for write by the caller's session.
	ErrNotOpen = errors.New("file not open for write by this session")
)
