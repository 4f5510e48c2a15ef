package chunkserver

import (
	"context"
	"errors"
	"syscall"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/chunkserver/volume"
	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/internal/statuscode"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// errOtherBlock refuses a packet of another block than the stream's first.
var errOtherBlock = errors.New("a write stream carries the packets of one block")

// statusTable is the one place domain errors become protocol codes
// (statusTable.Of(err)); errors outside it are INTERNAL, and logged.
var statusTable = statuscode.Table{
	{Err: blockstore.ErrSealed, Code: bfspb.StatusCode_SEALED},
	{Err: blockstore.ErrGap, Code: bfspb.StatusCode_INVALID_ARGUMENT},
	{Err: blockstore.ErrOffset, Code: bfspb.StatusCode_INVALID_ARGUMENT},
	{Err: blockstore.ErrMismatch, Code: bfspb.StatusCode_INVALID_ARGUMENT},
	{Err: blockstore.ErrInvalid, Code: bfspb.StatusCode_INVALID_ARGUMENT},
	{Err: errOtherBlock, Code: bfspb.StatusCode_INVALID_ARGUMENT},
	{Err: blockstore.ErrChecksum, Code: bfspb.StatusCode_CORRUPT},
	{Err: blockstore.ErrCorrupt, Code: bfspb.StatusCode_CORRUPT},
	{Err: blockstore.ErrNotFound, Code: bfspb.StatusCode_NOT_FOUND},
	{Err: errWrongCluster, Code: bfspb.StatusCode_WRONG_CLUSTER},
	// Who may ask (trust.go).
	{Err: errNotNameServer, Code: bfspb.StatusCode_PERMISSION_DENIED},
	{Err: errSourceNotNamed, Code: bfspb.StatusCode_PERMISSION_DENIED},
	{Err: blocktoken.ErrNoToken, Code: bfspb.StatusCode_PERMISSION_DENIED},
	{Err: blocktoken.ErrForged, Code: bfspb.StatusCode_PERMISSION_DENIED},
	{Err: blocktoken.ErrExpired, Code: bfspb.StatusCode_PERMISSION_DENIED},
	{Err: blocktoken.ErrNotAllowed, Code: bfspb.StatusCode_PERMISSION_DENIED},
	{Err: blocktoken.ErrNoKeys, Code: bfspb.StatusCode_UNAVAILABLE},
	{Err: errStaleTerm, Code: bfspb.StatusCode_NOT_LEADER},
	{Err: errExists, Code: bfspb.StatusCode_EXISTS},
	{Err: errCopyBusy, Code: bfspb.StatusCode_RESOURCE_EXHAUSTED},
	{Err: errSourceGone, Code: bfspb.StatusCode_NOT_FOUND},
	{Err: errSourceDown, Code: bfspb.StatusCode_UNAVAILABLE},
	// A full disk, wrapped in whatever *PathError the store returns.
	{Err: syscall.ENOSPC, Code: bfspb.StatusCode_RESOURCE_EXHAUSTED},
	{Err: blockstore.ErrFull, Code: bfspb.StatusCode_RESOURCE_EXHAUSTED},
	// The replica went with its volume.
	{Err: volume.ErrVolumeFailed, Code: bfspb.StatusCode_NOT_FOUND},
	{Err: blockstore.ErrClosed, Code: bfspb.StatusCode_UNAVAILABLE},
	// The caller gave up (a CreateBlock past its deadline).
	{Err: context.DeadlineExceeded, Code: bfspb.StatusCode_UNAVAILABLE},
	{Err: context.Canceled, Code: bfspb.StatusCode_UNAVAILABLE},
}
