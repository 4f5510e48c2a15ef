package chunkserver

import (
	"context"
	"errors"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// errOtherBlock refuses a packet of another block than the stream's first.
var errOtherBlock = errors.New("a write stream carries the packets of one block")

// statusTable is the one place domain errors become protocol codes.
var statusTable = []struct {
	err  error
	code bfspb.StatusCode
}{
	{blockstore.ErrSealed, bfspb.StatusCode_SEALED},
	{blockstore.ErrGap, bfspb.StatusCode_INVALID_ARGUMENT},
	{blockstore.ErrOffset, bfspb.StatusCode_INVALID_ARGUMENT},
	{blockstore.ErrMismatch, bfspb.StatusCode_INVALID_ARGUMENT},
	{blockstore.ErrInvalid, bfspb.StatusCode_INVALID_ARGUMENT},
	{errOtherBlock, bfspb.StatusCode_INVALID_ARGUMENT},
	{blockstore.ErrChecksum, bfspb.StatusCode_CORRUPT},
	{blockstore.ErrCorrupt, bfspb.StatusCode_CORRUPT},
	{blockstore.ErrNotFound, bfspb.StatusCode_NOT_FOUND},
	{blockstore.ErrClosed, bfspb.StatusCode_UNAVAILABLE},
	// The caller gave up (a CreateBlock past its deadline).
	{context.DeadlineExceeded, bfspb.StatusCode_UNAVAILABLE},
	{context.Canceled, bfspb.StatusCode_UNAVAILABLE},
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
