package main

/*
#include "internal.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"unsafe"

	"github.com/bfs-go/bfs/sdk"
)

// errBadHandle is a handle that names no open object of the kind the
// call wants.
var errBadHandle = errors.New("handle not open")

// codes is the one table from errors to the C status codes of bfs.h. The
// first entry the error matches (errors.Is) gives its code, so an error
// matching two (a lock wait that ended at its deadline matches both
// context.DeadlineExceeded and the LockedError naming the holder) takes
// the earlier. Every sentinel of the SDK has its code; an error matching
// none is BFS_ERR_UNKNOWN.
var codes = []struct {
	err  error
	code C.int
}{
	{errBadHandle, C.BFS_ERR_BAD_HANDLE},
	// Before the session's errors: a lock lost with its session is a lost
	// lock first.
	{sdk.ErrLockLost, C.BFS_ERR_LOCK_LOST},
	{context.DeadlineExceeded, C.BFS_ERR_TIMEOUT},
	// Only bfs_fs_close cancels the contexts of calls.
	{context.Canceled, C.BFS_ERR_CLOSED},
	{sdk.ErrClosed, C.BFS_ERR_CLOSED},
	{sdk.ErrStaleEpoch, C.BFS_ERR_STALE_EPOCH},
	{sdk.ErrLocked, C.BFS_ERR_LOCKED},
	{sdk.ErrCleaning, C.BFS_ERR_CLEANING},
	{sdk.ErrUnlocked, C.BFS_ERR_UNLOCKED},
	{sdk.ErrSealed, C.BFS_ERR_SEALED},
	{sdk.ErrSessionExpired, C.BFS_ERR_SESSION_EXPIRED},
	{sdk.ErrNotFound, C.BFS_ERR_NOT_FOUND},
	{sdk.ErrExists, C.BFS_ERR_EXISTS},
	{sdk.ErrInvalidArgument, C.BFS_ERR_INVALID_ARGUMENT},
	{sdk.ErrNotDirectory, C.BFS_ERR_NOT_DIRECTORY},
	{sdk.ErrIsDirectory, C.BFS_ERR_IS_DIRECTORY},
	{sdk.ErrNotEmpty, C.BFS_ERR_NOT_EMPTY},
	{sdk.ErrPermissionDenied, C.BFS_ERR_PERMISSION_DENIED},
	{sdk.ErrNotOpen, C.BFS_ERR_NOT_OPEN},
	{sdk.ErrNotLeader, C.BFS_ERR_NOT_LEADER},
	// Before ErrUnavailable: a write whose every replica ran out of space
	// is both.
	{sdk.ErrResourceExhausted, C.BFS_ERR_RESOURCE_EXHAUSTED},
	{sdk.ErrUnavailable, C.BFS_ERR_UNAVAILABLE},
	{sdk.ErrCorrupt, C.BFS_ERR_CORRUPT},
	{sdk.ErrUnimplemented, C.BFS_ERR_UNIMPLEMENTED},
	{sdk.ErrInternal, C.BFS_ERR_INTERNAL},
}

// codeOf returns the status code of err (BFS_OK for nil).
func codeOf(err error) C.int {
	if err == nil {
		return C.BFS_OK
	}
	for _, e := range codes {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return C.BFS_ERR_UNKNOWN
}

// status returns err's code, and for an error records its text as the
// calling thread's last error message first. Every exported call ends in
// it: the exported function runs on the C thread that called it, so the
// message lands in that thread's slot.
func status(err error) C.int {
	if err != nil {
		setMessage(err.Error())
	}
	return codeOf(err)
}

func setMessage(msg string) {
	// A copy in C memory, so that no Go pointer is passed to C at all;
	// errors are rare enough for the copy not to matter.
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	C.bfs__set_error(cs, C.size_t(len(msg)))
}

// guard is deferred first by every exported function: a panic stops there
// and becomes BFS_ERR_INTERNAL, with the stack in the message, instead of
// unwinding into C (which would abort the process).
func guard(code *C.int) {
	if r := recover(); r != nil {
		*code = status(fmt.Errorf("%w: libbfs panicked: %v\n%s", sdk.ErrInternal, r, debug.Stack()))
	}
}

// invalid is an error for bad input to call.
func invalid(call, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", call, sdk.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// goString copies the C string p, an argument named what of call.
func goString(call, what string, p *C.bfs__cchar) (string, error) {
	if p == nil {
		return "", invalid(call, "%s is NULL", what)
	}
	return C.GoString((*C.char)(unsafe.Pointer(p))), nil
}

// cString returns a copy of s in C memory, for the caller to free.
func cString(s string) *C.char { return C.CString(s) }

// codeName is the name and meaning of code, from bfs_strerror.
func codeName(code C.int) string { return C.GoString(C.bfs_strerror(code)) }
