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
	// Volumes are its data directories, one per disk, as last reported.
	Volumes []Volume
	// FailedVolumes counts those out of service; NonDFSUsed is what other
	// things than replicas take on the others.
	FailedVolumes, NonDFSUsed int64
	// SinceReport is the time since its last full block report ended; -1
	// when none has since it registered.
	SinceReport time.Duration
}

// VolumeState is where one of a chunkserver's volumes stands.
type VolumeState int

const (
	// VolumeHealthy: in service, taking new replicas.
	VolumeHealthy VolumeState = iota
	// VolumeFull: in service, taking no new replica until space is freed.
	VolumeFull
	// VolumeFailed: out of service; its replicas are gone.
	VolumeFailed
)

func (s VolumeState) String() string {
	switch s {
	case VolumeHealthy:
		return "healthy"
	case VolumeFull:
		return "full"
	case VolumeFailed:
		return "failed"
	}
	return fmt.Sprintf("VolumeState(%d)", int(s))
}

// Volume is one of a chunkserver's volumes.
type Volume struct {
	Index int
	Dir   string
	State VolumeState
	// Reason says why it failed or is full.
	Reason string
	// Capacity and Free are its file system's; Used the bytes of its
	// replicas, Blocks how many.
	Capacity, Free, Used, Blocks int64
	// SinceChange is how long it has been in its state.
	SinceChange time.Duration
}

// NonDFSUsed is what other things than replicas take on the volume.
func (v Volume) NonDFSUsed() int64 {
	if v.Capacity <= 0 || v.State == VolumeFailed {
		return 0
	}
	return max(v.Capacity-v.Free-v.Used, 0)
}

func volumeFromWire(v *bfspb.VolumeInfo) Volume {
	state := VolumeHealthy
	switch v.State {
	case bfspb.VolumeState_VOLUME_STATE_FULL:
		state = VolumeFull
	case bfspb.VolumeState_VOLUME_STATE_FAILED:
		state = VolumeFailed
	}
	age, _ := millis.Duration(v.StateAgeMs)
	return Volume{Index: int(v.Index), Dir: v.Dir, State: state, Reason: v.Reason, Capacity: v.CapacityBytes,
		Free: v.FreeBytes, Used: v.UsedBytes, Blocks: v.Blocks, SinceChange: age}
}

// BlockHealth is the state of the cluster's blocks, as the nameserver's
// repair last counted it, by the one definition of a good replica
// (sealed at the block's length, on a volume in service, not known
// corrupt).
type BlockHealth struct {
	// UnderReplicated blocks have fewer counting replicas than their
	// file's replication; Missing ones (of closed files) no good replica.
	UnderReplicated, Missing int64
	// CorruptReplicas are reported corrupt and not yet deleted.
	CorruptReplicas int64
	// RepairQueue blocks wait for a copy; RepairInFlight copies run.
	RepairQueue, RepairInFlight int64
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
	report := time.Duration(-1)
	if c.LastReportAgeMs >= 0 {
		report, _ = millis.Duration(c.LastReportAgeMs)
	}
	out := Chunkserver{Address: c.Address, Host: c.Host, State: state, Draining: c.Draining,
		Capacity: c.CapacityBytes, Used: c.UsedBytes, Free: c.FreeBytes, Blocks: c.Blocks,
		SinceHeartbeat: age, BlocksToMove: c.BlocksToMove, FailedVolumes: c.FailedVolumes,
		NonDFSUsed: c.NonDfsUsedBytes, SinceReport: report}
	for _, v := range c.Volumes {
		out.Volumes = append(out.Volumes, volumeFromWire(v))
	}
	return out
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

// BlockHealth returns the state of the cluster's blocks.
func (c *Client) BlockHealth(ctx context.Context) (BlockHealth, error) {
	if err := c.checkOpen(); err != nil {
		return BlockHealth{}, err
	}
	resp, err := c.ns.ListChunkservers(ctx, &bfspb.ListChunkserversRequest{PageSize: 1})
	if err != nil {
		return BlockHealth{}, fmt.Errorf("block health: %w", transportError(ctx, err))
	}
	if err := responseError(resp); err != nil {
		return BlockHealth{}, fmt.Errorf("block health: %w", err)
	}
	h := resp.GetHealth()
	return BlockHealth{UnderReplicated: h.GetUnderReplicatedBlocks(), Missing: h.GetMissingBlocks(),
		CorruptReplicas: h.GetCorruptReplicas(), RepairQueue: h.GetRepairQueue(), RepairInFlight: h.GetRepairCopiesInFlight()}, nil
}
