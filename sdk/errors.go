package sdk

import (
	"context"
	"fmt"
	"io/fs"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// Sentinel errors, one per protocol StatusCode. Test with errors.Is; the
// errors the SDK returns wrap them with the operation and the path.
// ErrNotFound, ErrExists and ErrPermissionDenied also match fs.ErrNotExist,
// fs.ErrExist and fs.ErrPermission.
var (
	ErrNotFound         error = &sentinel{"no such file or directory", fs.ErrNotExist}
	ErrExists           error = &sentinel{"file exists", fs.ErrExist}
	ErrInvalidArgument  error = &sentinel{"invalid argument", fs.ErrInvalid}
	ErrNotDirectory     error = &sentinel{"not a directory", nil}
	ErrIsDirectory      error = &sentinel{"is a directory", nil}
	ErrNotEmpty         error = &sentinel{"directory not empty", nil}
	ErrPermissionDenied error = &sentinel{"permission denied", fs.ErrPermission}
	ErrLocked           error = &sentinel{"directory locked", nil}
	ErrUnlocked         error = &sentinel{"directory not locked", nil}
	ErrCleaning         error = &sentinel{"directory being cleaned", nil}
	ErrStaleEpoch       error = &sentinel{"stale lock epoch", nil}
	ErrSessionExpired   error = &sentinel{"session expired", nil}
	ErrSealed           error = &sentinel{"block sealed", nil}
	ErrNotLeader        error = &sentinel{"nameserver is not the leader", nil}
	ErrUnavailable      error = &sentinel{"service unavailable", nil}
	ErrNotOpen          error = &sentinel{"file not open for write", nil}
	ErrCorrupt          error = &sentinel{"data corrupt", nil}
	ErrInternal         error = &sentinel{"nameserver internal error", nil}
	ErrUnimplemented    error = &sentinel{"not implemented", nil}
	ErrWrongCluster     error = &sentinel{"wrong cluster", nil}
	// ErrResourceExhausted is a chunkserver out of disk space (ENOSPC),
	// or a limit the servers hold every client to (BUILD.md "Limits"):
	// the sessions or waiting lock calls of this client's identity, a
	// message over the size. The error's text says which.
	ErrResourceExhausted error = &sentinel{"resource exhausted: no space left, or a limit reached", nil}

	// ErrClosed is returned by calls on a Client after Close. It is the
	// SDK's own: no StatusCode maps to it.
	ErrClosed error = &sentinel{"client closed", fs.ErrClosed}
)

// statusErrors is the one table from protocol status to sentinel. OK is not
// in it: it is the absence of an error.
var statusErrors = map[bfspb.StatusCode]error{
	bfspb.StatusCode_NOT_FOUND:          ErrNotFound,
	bfspb.StatusCode_EXISTS:             ErrExists,
	bfspb.StatusCode_INVALID_ARGUMENT:   ErrInvalidArgument,
	bfspb.StatusCode_NOT_DIRECTORY:      ErrNotDirectory,
	bfspb.StatusCode_IS_DIRECTORY:       ErrIsDirectory,
	bfspb.StatusCode_DIR_NOT_EMPTY:      ErrNotEmpty,
	bfspb.StatusCode_PERMISSION_DENIED:  ErrPermissionDenied,
	bfspb.StatusCode_LOCKED:             ErrLocked,
	bfspb.StatusCode_UNLOCKED:           ErrUnlocked,
	bfspb.StatusCode_CLEANING:           ErrCleaning,
	bfspb.StatusCode_STALE_EPOCH:        ErrStaleEpoch,
	bfspb.StatusCode_SESSION_EXPIRED:    ErrSessionExpired,
	bfspb.StatusCode_SEALED:             ErrSealed,
	bfspb.StatusCode_NOT_LEADER:         ErrNotLeader,
	bfspb.StatusCode_UNAVAILABLE:        ErrUnavailable,
	bfspb.StatusCode_NOT_OPEN:           ErrNotOpen,
	bfspb.StatusCode_CORRUPT:            ErrCorrupt,
	bfspb.StatusCode_INTERNAL:           ErrInternal,
	bfspb.StatusCode_UNIMPLEMENTED:      ErrUnimplemented,
	bfspb.StatusCode_WRONG_CLUSTER:      ErrWrongCluster,
	bfspb.StatusCode_RESOURCE_EXHAUSTED: ErrResourceExhausted,
}

// sentinel is the type of the Err* values. like, when set, is the io/fs
// error the sentinel also matches, so generic code written against fs
// errors works with the SDK.
type sentinel struct {
	msg  string
	like error
}

func (e *sentinel) Error() string { return e.msg }

func (e *sentinel) Is(target error) bool { return e.like != nil && target == e.like }

// LockedError is returned when a directory lock refused a request (status
// LOCKED or CLEANING). It matches ErrLocked or ErrCleaning under errors.Is,
// according to Status.
type LockedError struct {
	// Path is the locked directory, which may be an ancestor or a
	// descendant of the path the request named.
	Path string
	// Holder is the holder id (ip:port:timestamp) of the lock owner.
	Holder string
	Epoch  uint64
	// Status is LOCKED or CLEANING.
	Status bfspb.StatusCode
}

func (e *LockedError) Error() string {
	s := "directory"
	if e.Path != "" {
		s = e.Path
	}
	if e.Status == bfspb.StatusCode_CLEANING {
		s += " being cleaned"
	} else {
		s += " locked"
	}
	if e.Holder != "" {
		s += " by " + e.Holder
	}
	if e.Epoch != 0 {
		s += fmt.Sprintf(" (epoch %d)", e.Epoch)
	}
	return s
}

// Is reports whether target is the sentinel for e.Status.
func (e *LockedError) Is(target error) bool {
	want, ok := statusErrors[e.Status]
	return ok && target == want
}

// StaleEpochError is a mutation refused because it carried the fence of a
// lock this client lost (SPEC §6): Path was locked by this client at
// Epoch, and that lock was taken away (forced, expired, its session
// lost). The client's mutations at and under Path stay refused until it
// locks Path again. Status, Holder and CurrentEpoch describe the
// directory's lock now. It matches ErrStaleEpoch under errors.Is.
type StaleEpochError struct {
	Path  string
	Epoch uint64
	// Status is the directory's lock state now: Unlocked, Locked (by
	// Holder) or Cleaning.
	Status       LockStatus
	Holder       string
	CurrentEpoch uint64
}

func (e *StaleEpochError) Error() string {
	now := "unlocked"
	switch e.Status {
	case Locked:
		now = fmt.Sprintf("locked by %s (epoch %d)", e.Holder, e.CurrentEpoch)
	case Cleaning:
		now = fmt.Sprintf("being cleaned (epoch %d)", e.CurrentEpoch)
	}
	return fmt.Sprintf("lock of %s at epoch %d was lost; the directory is %s now", e.Path, e.Epoch, now)
}

// Is matches ErrStaleEpoch.
func (e *StaleEpochError) Is(target error) bool { return target == ErrStaleEpoch }

// response is what every nameserver answer has.
type response interface {
	GetStatus() bfspb.StatusCode
	GetMessage() string
}

// responseError is statusError for a whole answer, with its lock conflict
// when it has one.
func responseError(resp response) error {
	var conflict *bfspb.LockConflict
	if r, ok := resp.(interface{ GetConflict() *bfspb.LockConflict }); ok {
		conflict = r.GetConflict()
	}
	return statusError(resp.GetStatus(), resp.GetMessage(), conflict)
}

// statusError maps a response status to an error: nil for OK, the sentinel
// from the table, a *LockedError for lock refusals, and for a code this SDK
// does not know an error naming the code (never nil). The nameserver's
// message, when it has one, is the error's text: it is shown, never
// parsed; errors.Is works on the sentinel.
func statusError(code bfspb.StatusCode, msg string, conflict *bfspb.LockConflict) error {
	if code == bfspb.StatusCode_OK {
		return nil
	}
	if code == bfspb.StatusCode_LOCKED || code == bfspb.StatusCode_CLEANING {
		return &LockedError{
			Path:   conflict.GetPath(),
			Holder: conflict.GetHolder(),
			Epoch:  conflict.GetEpoch(),
			Status: code,
		}
	}
	if code == bfspb.StatusCode_STALE_EPOCH && conflict != nil {
		return &StaleEpochError{
			Path:         conflict.GetPath(),
			Epoch:        conflict.GetFencedEpoch(),
			Status:       lockStatusFromWire(conflict.GetLockStatus()),
			Holder:       conflict.GetHolder(),
			CurrentEpoch: conflict.GetEpoch(),
		}
	}
	sentinel, ok := statusErrors[code]
	if !ok {
		if msg != "" {
			return fmt.Errorf("nameserver answered unknown status code %d: %s", int32(code), msg)
		}
		return fmt.Errorf("nameserver answered unknown status code %d", int32(code))
	}
	if msg == "" || msg == sentinel.Error() {
		return sentinel
	}
	return &detailError{sentinel: sentinel, msg: msg}
}

// detailError is a sentinel with the nameserver's explanation.
type detailError struct {
	sentinel error
	msg      string
}

func (e *detailError) Error() string { return e.msg }
func (e *detailError) Unwrap() error { return e.sentinel }

// transportError turns the error of a failed RPC (the call reached no
// decision) into the error the SDK returns. A call ended by a deadline or a
// cancellation matches context.DeadlineExceeded or context.Canceled, also
// when gRPC saw it before the caller's context did (the nameserver ends a
// call at the deadline it was sent, which can come first); an unreachable
// nameserver matches ErrUnavailable, a limit ErrResourceExhausted. The
// error's own code decides, not the state of ctx afterwards: a stream
// that broke and was then cancelled reports the break. Every mapped error still yields its gRPC status.
func transportError(ctx context.Context, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err // not from gRPC's transport (io.EOF ends a stream)
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded:
		like := ctx.Err() // the caller's reason, when its context has ended
		if like == nil && st.Code() == codes.Canceled {
			like = context.Canceled
		} else if like == nil {
			like = context.DeadlineExceeded
		}
		return &rpcError{like: like, rpc: err, msg: st.Message()}
	case codes.Unavailable:
		return &rpcError{like: ErrUnavailable, rpc: err, msg: ErrUnavailable.Error() + ": " + st.Message()}
	case codes.ResourceExhausted: // a limit (a message too big, a stream too many)
		return &rpcError{like: ErrResourceExhausted, rpc: err, msg: st.Message()}
	}
	return err
}

// rpcError is a failed RPC that also matches like (ErrUnavailable, or the
// context error that ended it) and still yields its gRPC status.
type rpcError struct {
	like error
	rpc  error
	msg  string
}

func (e *rpcError) Error() string   { return e.msg }
func (e *rpcError) Unwrap() []error { return []error{e.like, e.rpc} }

// pathError wraps err with the operation and the path it concerned.
func pathError(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}
