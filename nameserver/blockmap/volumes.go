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
