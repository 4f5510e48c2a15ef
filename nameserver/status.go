package nameserver

import (
	"context"
	"errors"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/nameserver/session"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// errSessionInvalid is returned for a request naming a session that is
// unknown or has expired.
var errSessionInvalid = errors.New("session expired or unknown")

// statusTable is the one place domain errors become protocol codes. The SDK
// maps the codes back to its own sentinels.
var statusTable = []struct {
	err  error
	code bfspb.StatusCode
}{
	{namespace.ErrNotFound, bfspb.StatusCode_NOT_FOUND},
	{namespace.ErrExists, bfspb.StatusCode_EXISTS},
	{namespace.ErrNotDirectory, bfspb.StatusCode_NOT_DIRECTORY},
	{namespace.ErrIsDirectory, bfspb.StatusCode_IS_DIRECTORY},
	{namespace.ErrNotEmpty, bfspb.StatusCode_DIR_NOT_EMPTY},
	{namespace.ErrInvalid, bfspb.StatusCode_INVALID_ARGUMENT},
	{namespace.ErrClosed, bfspb.StatusCode_UNAVAILABLE},
	{namespace.ErrNotOpen, bfspb.StatusCode_NOT_OPEN},
	{errNoServers, bfspb.StatusCode_UNAVAILABLE},
	{errNoReplica, bfspb.StatusCode_UNAVAILABLE},
	{session.ErrInvalidTTL, bfspb.StatusCode_INVALID_ARGUMENT},
	{session.ErrInvalidHolder, bfspb.StatusCode_INVALID_ARGUMENT},
	{session.ErrNotFound, bfspb.StatusCode_SESSION_EXPIRED},
	{session.ErrExpired, bfspb.StatusCode_SESSION_EXPIRED},
	{session.ErrClosed, bfspb.StatusCode_UNAVAILABLE},
	{errSessionInvalid, bfspb.StatusCode_SESSION_EXPIRED},
	{dirlock.ErrLocked, bfspb.StatusCode_LOCKED},
	{dirlock.ErrCleaning, bfspb.StatusCode_CLEANING},
	{dirlock.ErrUnlocked, bfspb.StatusCode_UNLOCKED},
	{dirlock.ErrStaleEpoch, bfspb.StatusCode_STALE_EPOCH},
	{dirlock.ErrFenceUnrelated, bfspb.StatusCode_INVALID_ARGUMENT},
	{context.Canceled, bfspb.StatusCode_UNAVAILABLE},
	{context.DeadlineExceeded, bfspb.StatusCode_UNAVAILABLE},
}

// statusOf returns the code for err and the message to send with it.
// Errors outside the table are internal: logged here, reported as INTERNAL.
func statusOf(err error) (bfspb.StatusCode, string) {
	if err == nil {
		return bfspb.StatusCode_OK, ""
	}
	for _, e := range statusTable {
		if errors.Is(err, e.err) {
			return e.code, err.Error()
		}
	}
	glog.Errorf("internal error: %v", err)
	return bfspb.StatusCode_INTERNAL, err.Error()
}
