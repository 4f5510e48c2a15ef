package nameserver

import (
	"fmt"
	"strings"
	"time"

	"github.com/bfs-go/bfs/internal/millis"
	"github.com/bfs-go/bfs/nameserver/blockmap"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// volumeStates maps the wire's volume states to the block map's.
var volumeStates = map[bfspb.VolumeState]blockmap.VolumeState{
	bfspb.VolumeState_VOLUME_STATE_HEALTHY: blockmap.VolumeHealthy,
	bfspb.VolumeState_VOLUME_STATE_FULL:    blockmap.VolumeFull,
	bfspb.VolumeState_VOLUME_STATE_FAILED:  blockmap.VolumeFailed,
}

// volumesOf decodes the volumes a chunkserver reports: each index once,
// below blockmap.MaxVolumes, each in a known state.
func volumesOf(in []*bfspb.VolumeInfo) ([]blockmap.Volume, error) {
	if len(in) > blockmap.MaxVolumes {
		return nil, fmt.Errorf("%d volumes, more than the %d a chunkserver may have", len(in), blockmap.MaxVolumes)
	}
	out := make([]blockmap.Volume, 0, len(in))
	seen := make(map[uint32]bool, len(in))
	for _, v := range in {
		st, ok := volumeStates[v.State]
		switch {
		case v.Index >= blockmap.MaxVolumes || seen[v.Index]:
			return nil, fmt.Errorf("volume %s: index %d out of range or named twice", v.Dir, v.Index)
		case !ok:
			return nil, fmt.Errorf("volume %s: state %v", v.Dir, v.State)
		case v.CapacityBytes < 0 || v.FreeBytes < 0 || v.UsedBytes < 0 || v.Blocks < 0:
			return nil, fmt.Errorf("volume %s: negative capacity, free or used bytes, or blocks", v.Dir)
		}
		seen[v.Index] = true
		age, _ := millis.Duration(max(v.StateAgeMs, 0))
		out = append(out, blockmap.Volume{Index: int(v.Index), Dir: v.Dir, State: st, Reason: v.Reason,
			Capacity: v.CapacityBytes, Free: v.FreeBytes, Used: v.UsedBytes, Blocks: v.Blocks, StateAge: age})
	}
	return out, nil
}

// volumeInfos encodes volumes for the report, as reported since (their
// ages grow from then).
func volumeInfos(vols []blockmap.Volume, since time.Duration) []*bfspb.VolumeInfo {
	out := make([]*bfspb.VolumeInfo, len(vols))
	for i, v := range vols {
		var st bfspb.VolumeState
		for w, b := range volumeStates {
			if b == v.State {
				st = w
			}
		}
		out[i] = &bfspb.VolumeInfo{Index: uint32(v.Index), Dir: v.Dir, State: st, Reason: v.Reason,
			CapacityBytes: v.Capacity, FreeBytes: v.Free, UsedBytes: v.Used, Blocks: v.Blocks,
			StateAgeMs: (v.StateAge + since).Milliseconds()}
	}
	return out
}

// newlyFailed returns the volumes of now that are failed and were not in
// before.
func newlyFailed(before, now []blockmap.Volume) []blockmap.Volume {
	var out []blockmap.Volume
	for _, v := range now {
		if v.State != blockmap.VolumeFailed {
			continue
		}
		was := false
		for _, b := range before {
			was = was || b.Index == v.Index && b.State == blockmap.VolumeFailed
		}
		if !was {
			out = append(out, v)
		}
	}
	return out
}

// blocksOn is how many replicas volume i held, as vols last said.
func blocksOn(vols []blockmap.Volume, i int) int64 {
	for _, v := range vols {
		if v.Index == i {
			return v.Blocks
		}
	}
	return 0
}

// volumeSummary counts volumes by state, for the log.
func volumeSummary(vols []blockmap.Volume) string {
	if len(vols) == 0 {
		return "1 healthy"
	}
	counts := map[blockmap.VolumeState]int{}
	for _, v := range vols {
		counts[v.State]++
	}
	var parts []string
	for _, st := range []blockmap.VolumeState{blockmap.VolumeHealthy, blockmap.VolumeFull, blockmap.VolumeFailed} {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	return strings.Join(parts, ", ")
}
