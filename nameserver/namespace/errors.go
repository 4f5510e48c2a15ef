package namespace

import (
	"errors"

	"github.com/bfs-go/bfs/dirlock"
)

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
	// ErrSessionExpired refuses a command for a session the store does
	// not hold: it ended (closed or expired), or never was.
	ErrSessionExpired = errors.New("session expired or unknown")
	// ErrApplied refuses a command at a log index already applied.
	ErrApplied = errors.New("log index already applied")
	// ErrNotFormatted refuses every command but a format on a store that
	// has no root yet.
	ErrNotFormatted = errors.New("namespace not formatted yet")
)

// IsStorageError reports whether err, from Apply, is a failure of the
// store rather than the command's own outcome: not one of the domain
// errors above or of package dirlock's. A command's outcome is decided by
// the stored state alone, so every replica reaches the same one; a
// storage failure is this replica's own, and a replica that cannot apply
// a command must stop rather than go on without it.
func IsStorageError(err error) bool {
	if err == nil {
		return false
	}
	for _, domain := range []error{
		ErrNotFound, ErrExists, ErrNotDirectory, ErrIsDirectory, ErrNotEmpty, ErrInvalid,
		ErrBlockChanged, ErrNotOpen, ErrSessionExpired, ErrApplied, ErrNotFormatted,
		dirlock.ErrLocked, dirlock.ErrCleaning, dirlock.ErrUnlocked, dirlock.ErrStaleEpoch, dirlock.ErrFenceUnrelated,
	} {
		if errors.Is(err, domain) {
			return false
		}
	}
	return true
}
