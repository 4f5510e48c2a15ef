package blockmap

import "time"

// VolumeState is where one of a chunkserver's volumes stands, as the
// chunkserver reports it.
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
	return "unknown"
}

// Volume is one of a chunkserver's volumes (a data directory, one per
// disk), as it last reported it.
type Volume struct {
	// Index is its place in the chunkserver's list; replicas name it.
	Index  int
	Dir    string
	State  VolumeState
	Reason string
	// Capacity and Free are its file system's (0 capacity: it cannot
	// tell); Used the bytes of the replicas on it, Blocks how many.
	Capacity, Free, Used, Blocks int64
	// StateAge is how long it had been in its state when reported.
	StateAge time.Duration
}

// NonDFSUsed is what other things than replicas take on the volume.
func (v Volume) NonDFSUsed() int64 {
	if v.Capacity <= 0 {
		return 0
	}
	return max(v.Capacity-v.Free-v.Used, 0)
}

// MaxVolumeBytes is the most capacity (and so free space and use) the map
// believes of one volume: 1 PiB, beyond any disk. With at most MaxVolumes
// volumes a chunkserver's sums stay below 2^57 bytes, and a cluster's
// below int64's limit for its first 64 such chunkservers; totals over
// more add with saturation (SatAdd).
const MaxVolumeBytes int64 = 1 << 50

// Sanitized returns u as the map believes it: every figure of every
// volume within [0, MaxVolumeBytes], a volume's free space and use within
// its capacity (when it can tell its capacity), and the sums over the
// volumes in service recomputed from them. A chunkserver's word is all
// the map has of its disks; a figure no disk can have (2^62 free bytes)
// is not believed, so it draws no more new replicas than a full disk of
// the largest size would, and sums do not overflow.
func (u Usage) Sanitized() Usage {
	clamp := func(v, hi int64) int64 { return min(max(v, 0), hi) }
	out := u
	out.Capacity = clamp(u.Capacity, MaxVolumeBytes)
	out.Free = clamp(u.Free, MaxVolumeBytes)
	out.Used = clamp(u.Used, MaxVolumeBytes)
	if out.Capacity > 0 {
		out.Free, out.Used = min(out.Free, out.Capacity), min(out.Used, out.Capacity)
	}
	if len(u.Volumes) == 0 {
		return out
	}
	out.Volumes = make([]Volume, len(u.Volumes))
	out.Capacity, out.Free, out.Used = 0, 0, 0
	for i, v := range u.Volumes {
		v.Capacity = clamp(v.Capacity, MaxVolumeBytes)
		v.Free, v.Used = clamp(v.Free, MaxVolumeBytes), clamp(v.Used, MaxVolumeBytes)
		if v.Capacity > 0 {
			v.Free, v.Used = min(v.Free, v.Capacity), min(v.Used, v.Capacity)
		}
		v.Blocks = max(v.Blocks, 0)
		out.Volumes[i] = v
		if v.State != VolumeFailed {
			out.Capacity, out.Free, out.Used = SatAdd(out.Capacity, v.Capacity), SatAdd(out.Free, v.Free), SatAdd(out.Used, v.Used)
		}
	}
	return out
}

// SatAdd adds two non-negative byte counts, saturating at the largest
// int64 instead of wrapping around to a negative number.
func SatAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// volumes returns u's volumes: the ones it lists, or, for a chunkserver
// that lists none, one healthy volume of its totals.
func (u Usage) volumes() []Volume {
	if len(u.Volumes) > 0 {
		return u.Volumes
	}
	return []Volume{{Capacity: u.Capacity, Free: u.Free, Used: u.Used}}
}

// volumeSet is a set of volume indexes below MaxVolumes.
type volumeSet [MaxVolumes / 64]uint64

func (s volumeSet) has(i uint32) bool { return s[i/64]&(1<<(i%64)) != 0 }

func (s *volumeSet) add(i uint32) { s[i/64] |= 1 << (i % 64) }

func (s volumeSet) union(o volumeSet) volumeSet {
	for i := range s {
		s[i] |= o[i]
	}
	return s
}

// failedVolumes returns the volumes u reports failed.
func failedVolumes(u Usage) volumeSet {
	var s volumeSet
	for _, v := range u.Volumes {
		if v.State == VolumeFailed && v.Index >= 0 && v.Index < MaxVolumes {
			s.add(uint32(v.Index))
		}
	}
	return s
}
