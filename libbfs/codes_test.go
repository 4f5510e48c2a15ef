//go:build cgo

package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

func TestCodeOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, "BFS_OK"},
		{sdk.ErrNotFound, "BFS_ERR_NOT_FOUND"},
		{&fs.PathError{Op: "stat", Path: "/x", Err: sdk.ErrNotFound}, "BFS_ERR_NOT_FOUND"},
		{sdk.ErrExists, "BFS_ERR_EXISTS"},
		{sdk.ErrInvalidArgument, "BFS_ERR_INVALID_ARGUMENT"},
		{sdk.ErrNotDirectory, "BFS_ERR_NOT_DIRECTORY"},
		{sdk.ErrIsDirectory, "BFS_ERR_IS_DIRECTORY"},
		{sdk.ErrNotEmpty, "BFS_ERR_NOT_EMPTY"},
		{sdk.ErrPermissionDenied, "BFS_ERR_PERMISSION_DENIED"},
		{&sdk.LockedError{Path: "/t", Holder: "ts-a", Epoch: 3, Status: bfspb.StatusCode_LOCKED}, "BFS_ERR_LOCKED"},
		{&sdk.LockedError{Path: "/t", Status: bfspb.StatusCode_CLEANING}, "BFS_ERR_CLEANING"},
		{sdk.ErrUnlocked, "BFS_ERR_UNLOCKED"},
		{&fs.PathError{Op: "mkdir", Path: "/t/x", Err: &sdk.StaleEpochError{Path: "/t", Epoch: 3}}, "BFS_ERR_STALE_EPOCH"},
		{sdk.ErrSessionExpired, "BFS_ERR_SESSION_EXPIRED"},
		{sdk.ErrSealed, "BFS_ERR_SEALED"},
		{sdk.ErrNotOpen, "BFS_ERR_NOT_OPEN"},
		{sdk.ErrNotLeader, "BFS_ERR_NOT_LEADER"},
		{sdk.ErrUnavailable, "BFS_ERR_UNAVAILABLE"},
		{sdk.ErrCorrupt, "BFS_ERR_CORRUPT"},
		{sdk.ErrResourceExhausted, "BFS_ERR_RESOURCE_EXHAUSTED"},
		// A write whose every replica was out of space.
		{fmt.Errorf("%w: every replica failed, last: %w", sdk.ErrUnavailable, sdk.ErrResourceExhausted), "BFS_ERR_RESOURCE_EXHAUSTED"},
		{sdk.ErrUnimplemented, "BFS_ERR_UNIMPLEMENTED"},
		{sdk.ErrInternal, "BFS_ERR_INTERNAL"},
		{sdk.ErrClosed, "BFS_ERR_CLOSED"},
		{errClosed, "BFS_ERR_CLOSED"},
		{fmt.Errorf("lock: %w", context.Canceled), "BFS_ERR_CLOSED"},
		{fmt.Errorf("%w: file handle 7", errBadHandle), "BFS_ERR_BAD_HANDLE"},
		// A lock wait that ended at its deadline: the deadline decides.
		{errors.Join(&sdk.LockedError{Status: bfspb.StatusCode_LOCKED}, context.DeadlineExceeded), "BFS_ERR_TIMEOUT"},
		// A lock lost with its session is a lost lock.
		{fmt.Errorf("%w: session lost: %w", sdk.ErrLockLost, sdk.ErrSessionExpired), "BFS_ERR_LOCK_LOST"},
		{fmt.Errorf("%w: session lost: %w", sdk.ErrLockLost, sdk.ErrClosed), "BFS_ERR_LOCK_LOST"},
		{errors.New("a transport failure"), "BFS_ERR_UNKNOWN"},
	} {
		if got := codeName(codeOf(c.err)); !strings.HasPrefix(got, c.want+":") {
			t.Errorf("codeOf(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

// Every entry of the table is reachable: no earlier entry takes its
// error, and its code has a name in bfs_strerror.
func TestCodesTable(t *testing.T) {
	for _, e := range codes {
		if got := codeOf(e.err); got != e.code {
			t.Errorf("%v maps to %s, not to its entry's %s", e.err, codeName(got), codeName(e.code))
		}
		if strings.HasPrefix(codeName(e.code), "BFS_ERR_?") {
			t.Errorf("code %d of %v has no name", e.code, e.err)
		}
	}
}

func TestGuardTurnsAPanicIntoACode(t *testing.T) {
	code := codeOf(nil)
	func() {
		defer guard(&code)
		panic("boom")
	}()
	if got := codeName(code); !strings.HasPrefix(got, "BFS_ERR_INTERNAL:") {
		t.Errorf("after a panic the code is %s, want BFS_ERR_INTERNAL", got)
	}
}
