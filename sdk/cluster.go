package sdk

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/bfs-go/bfs/internal/millis"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// ChunkserverState is where a chunkserver stands, as the nameserver sees
// it.
type ChunkserverState int

const (
	// ChunkserverLive: registered and heartbeating.
	ChunkserverLive ChunkserverState = iota
	// ChunkserverDraining: live, being decommissioned, and some block it
	// holds still lacks its file's replication elsewhere.
	ChunkserverDraining
	// ChunkserverDecommissioned: live, being decommissioned, and every
	// block it holds has its file's replication elsewhere: safe to remove.
	ChunkserverDecommissioned
	// ChunkserverDead: registered since the nameserver started, then
	// silent past the dead timeout.
	ChunkserverDead
)

func (s ChunkserverState) String() string {
	switch s {
	case ChunkserverLive:
		return "live"
	case ChunkserverDraining:
		return "draining"
	case ChunkserverDecommissioned:
		return "decommissioned"
	case ChunkserverDead:
		return "dead"
	}
	return fmt.Sprintf("ChunkserverState(%d)", int(s))
}

// Chunkserver is one line of the nameserver's report.
type Chunkserver struct {
	Address, Host string
	State         ChunkserverState
	// Draining is set while a decommission is asked for, also for a dead
	// chunkserver.
	Draining bool
	// Disk as last reported, in bytes; Capacity 0 means the chunkserver
	// cannot tell.
	Capacity, Used, Free int64
	// Blocks is how many replicas it holds, as reported.
	Blocks int64
	// SinceHeartbeat is the time since its last heartbeat.
	SinceHeartbeat time.Duration
	// BlocksToMove is, for a draining chunkserver, how many of its blocks
	// still lack their file's replication elsewhere.
	BlocksToMove int64
}

func chunkserverFromWire(c *bfspb.ChunkserverInfo) Chunkserver {
	state := ChunkserverLive
	switch c.State {
	case bfspb.ChunkserverState_CHUNKSERVER_STATE_DRAINING:
		state = ChunkserverDraining
	case bfspb.ChunkserverState_CHUNKSERVER_STATE_DECOMMISSIONED:
		state = ChunkserverDecommissioned
	case bfspb.ChunkserverState_CHUNKSERVER_STATE_DEAD:
		state = ChunkserverDead
	}
	age, _ := millis.Duration(c.LastHeartbeatAgeMs)
	return Chunkserver{Address: c.Address, Host: c.Host, State: state, Draining: c.Draining,
		Capacity: c.CapacityBytes, Used: c.UsedBytes, Free: c.FreeBytes, Blocks: c.Blocks,
		SinceHeartbeat: age, BlocksToMove: c.BlocksToMove}
}

// Decommission starts draining the chunkservers at addrs: they get no new
// block and their replicas stop counting, so the nameserver's repair
// copies them elsewhere; they stay readable. Once a chunkserver's State
// is ChunkserverDecommissioned it can be stopped. Asking again is
// harmless. An address the nameserver does not know is ErrNotFound, and
// then nothing changes. It returns the chunkservers as they are now.
func (c *Client) Decommission(ctx context.Context, addrs ...string) ([]Chunkserver, error) {
	return c.decommission(ctx, "decommission", addrs, false)
}

// CancelDecommission ends the draining of the chunkservers at addrs: they
// take new blocks and count toward replication again.
func (c *Client) CancelDecommission(ctx context.Context, addrs ...string) ([]Chunkserver, error) {
	return c.decommission(ctx, "cancel decommission", addrs, true)
}

func (c *Client) decommission(ctx context.Context, op string, addrs []string, cancel bool) ([]Chunkserver, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s: %w: no chunkserver address given", op, ErrInvalidArgument)
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	resp, err := c.ns.Decommission(ctx, &bfspb.DecommissionRequest{Addresses: addrs, Cancel: cancel})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, transportError(ctx, err))
	}
	if err := responseError(resp); err != nil {
		return nil, err
	}
	out := make([]Chunkserver, 0, len(resp.Chunkservers))
	for _, cs := range resp.Chunkservers {
		out = append(out, chunkserverFromWire(cs))
	}
	return out, nil
}

// AllChunkservers lists every chunkserver the nameserver knows, live,
// draining, decommissioned or dead, by address, a page per request as
// the loop asks for more. A failure is yielded once and ends the
// sequence.
func (c *Client) AllChunkservers(ctx context.Context) iter.Seq2[Chunkserver, error] {
	return pages(func(token string) ([]Chunkserver, string, error) {
		if err := c.checkOpen(); err != nil {
			return nil, "", err
		}
		resp, err := c.ns.ListChunkservers(ctx, &bfspb.ListChunkserversRequest{PageToken: token})
		if err != nil {
			return nil, "", fmt.Errorf("list chunkservers: %w", transportError(ctx, err))
		}
		if err := responseError(resp); err != nil {
			return nil, "", fmt.Errorf("list chunkservers: %w", err)
		}
		out := make([]Chunkserver, 0, len(resp.Chunkservers))
		for _, cs := range resp.Chunkservers {
			out = append(out, chunkserverFromWire(cs))
		}
		return out, resp.NextPageToken, nil
	})
}

// Chunkservers collects AllChunkservers.
func (c *Client) Chunkservers(ctx context.Context) ([]Chunkserver, error) {
	return collect(c.AllChunkservers(ctx))
}
