package sdk

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/nsgroup"
	"github.com/bfs-go/bfs/internal/retry"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// openWatch opens a WatchDirLocks stream on the leader and waits for the
// nameserver to confirm it (its response headers): from then on no
// transition is missed. A member that does not lead ends the stream at
// once naming the leader, and the stream is opened there; while no
// member names one (an election) it tries the members in turn, for
// nsgroup.DefaultPatience at most.
func (c *Client) openWatch(ctx context.Context, req *bfspb.WatchDirLocksRequest) (bfspb.NameServer_WatchDirLocksClient, error) {
	backoff := retry.New(50*time.Millisecond, time.Second)
	deadline := time.Now().Add(nsgroup.DefaultPatience)
	for {
		addr := c.conn.Leader()
		stream, err := c.ns.WatchDirLocks(ctx, req)
		if err == nil {
			var started bool
			if started, err = watchStarted(stream); started {
				return stream, nil
			}
		}
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil || time.Now().After(deadline) {
			return nil, err
		}
		if stream != nil && c.conn.FollowTrailer(stream.Trailer()) {
			continue
		}
		c.conn.Skip(addr)
		if !retry.Sleep(ctx, clock.Real{}, backoff) {
			return nil, err
		}
	}
}

// watchStarted waits for a stream's headers; a stream that ends without
// them says why in its error.
func watchStarted(stream bfspb.NameServer_WatchDirLocksClient) (bool, error) {
	md, err := stream.Header()
	if err != nil {
		return false, err
	}
	if md != nil {
		return true, nil
	}
	if _, err := stream.Recv(); err != nil {
		return false, err
	}
	return false, fmt.Errorf("%w: lock watch sent an event before it started", ErrInternal)
}
