package nameserver

import (
	"context"
	"errors"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/internal/statuscode"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/nameserver/replica"
	"github.com/bfs-go/bfs/nameserver/session"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// errSessionInvalid is returned for a request naming a session that is
// unknown or has expired.
var errSessionInvalid = errors.New("session expired or unknown")

// errUnavailable: the group cannot say (no majority, leadership lost).
var errUnavailable = replica.ErrUnavailable

// statusTable is the one place domain errors become protocol codes. The SDK
// maps the codes back to its own sentinels.
var statusTable = statuscode.Table{
	{Err: namespace.ErrNotFound, Code: bfspb.StatusCode_NOT_FOUND},
	{Err: namespace.ErrExists, Code: bfspb.StatusCode_EXISTS},
	{Err: namespace.ErrNotDirectory, Code: bfspb.StatusCode_NOT_DIRECTORY},
	{Err: namespace.ErrIsDirectory, Code: bfspb.StatusCode_IS_DIRECTORY},
	{Err: namespace.ErrNotEmpty, Code: bfspb.StatusCode_DIR_NOT_EMPTY},
	{Err: namespace.ErrInvalid, Code: bfspb.StatusCode_INVALID_ARGUMENT},
	{Err: namespace.ErrClosed, Code: bfspb.StatusCode_UNAVAILABLE},
	{Err: namespace.ErrNotOpen, Code: bfspb.StatusCode_NOT_OPEN},
	{Err: errNoServers, Code: bfspb.StatusCode_UNAVAILABLE},
	{Err: errNoReplica, Code: bfspb.StatusCode_UNAVAILABLE},
	{Err: errNoSpace, Code: bfspb.StatusCode_RESOURCE_EXHAUSTED},
	{Err: errNotChunkserver, Code: bfspb.StatusCode_PERMISSION_DENIED},
	{Err: errBadAddress, Code: bfspb.StatusCode_INVALID_ARGUMENT},
	{Err: session.ErrLimit, Code: bfspb.StatusCode_RESOURCE_EXHAUSTED},
	{Err: errLockWaits, Code: bfspb.StatusCode_RESOURCE_EXHAUSTED},
	{Err: session.ErrInvalidTTL, Code: bfspb.StatusCode_INVALID_ARGUMENT},
	{Err: session.ErrInvalidHolder, Code: bfspb.StatusCode_INVALID_ARGUMENT},
	{Err: session.ErrNotFound, Code: bfspb.StatusCode_SESSION_EXPIRED},
	{Err: session.ErrExpired, Code: bfspb.StatusCode_SESSION_EXPIRED},
	{Err: session.ErrClosed, Code: bfspb.StatusCode_UNAVAILABLE},
	{Err: errSessionInvalid, Code: bfspb.StatusCode_SESSION_EXPIRED},
	{Err: namespace.ErrSessionExpired, Code: bfspb.StatusCode_SESSION_EXPIRED},
	{Err: replica.ErrNotLeader, Code: bfspb.StatusCode_NOT_LEADER},
	{Err: errNotLeading, Code: bfspb.StatusCode_NOT_LEADER},
	{Err: replica.ErrUnavailable, Code: bfspb.StatusCode_UNAVAILABLE},
	{Err: errDenied, Code: bfspb.StatusCode_PERMISSION_DENIED},
	{Err: dirlock.ErrLocked, Code: bfspb.StatusCode_LOCKED},
	{Err: dirlock.ErrCleaning, Code: bfspb.StatusCode_CLEANING},
	{Err: dirlock.ErrUnlocked, Code: bfspb.StatusCode_UNLOCKED},
	{Err: dirlock.ErrStaleEpoch, Code: bfspb.StatusCode_STALE_EPOCH},
	{Err: dirlock.ErrFenceUnrelated, Code: bfspb.StatusCode_INVALID_ARGUMENT},
	{Err: context.Canceled, Code: bfspb.StatusCode_UNAVAILABLE},
	{Err: context.DeadlineExceeded, Code: bfspb.StatusCode_UNAVAILABLE},
}

// statusOf returns the code for err and the message to send with it.
// Errors outside the table are internal: logged, reported as INTERNAL.
func statusOf(err error) (bfspb.StatusCode, string) { return statusTable.Of(err) }
