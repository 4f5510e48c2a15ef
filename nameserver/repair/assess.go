package repair

import (
	"github.com/bfs-go/bfs/nameserver/blockmap"
)

// verdict is what the replicas of a closed file's block call for.
type verdict struct {
	// counting is the replicas that count toward the replication: neither
	// corrupt nor on a draining chunkserver.
	counting int
	// good is the counting replicas sealed at the block's length: the
	// full copies that exist for sure.
	good int
	// missing: no replica at all, not even a corrupt one.
	missing bool
	// dropCorrupt are the corrupt replicas that can go: the block has its
	// full count of good replicas elsewhere.
	dropCorrupt []string
	// trim are the good replicas beyond the replication, to delete.
	trim []string
}

// assess judges the replicas of b, as the block map reports them (sorted
// by address). It does no I/O.
func assess(b Block, states []blockmap.ReplicaState) verdict {
	v := verdict{missing: len(states) == 0}
	var good []string
	for _, r := range states {
		if !r.Counts() {
			continue
		}
		v.counting++
		if goodReplica(b, r) {
			good = append(good, r.Addr)
		}
	}
	v.good = len(good)
	if v.good < b.Replication {
		return v
	}
	for _, r := range states {
		if r.Corrupt {
			v.dropCorrupt = append(v.dropCorrupt, r.Addr)
		}
	}
	// A draining replica never counts, so it is never trimmed: the
	// decommission owns it.
	if extra := v.good - b.Replication; extra > 0 {
		v.trim = good[len(good)-extra:]
	}
	return v
}

// goodReplica says whether r is a full sealed copy of b.
func goodReplica(b Block, r blockmap.ReplicaState) bool {
	return r.Sealed && r.Size == b.Size
}

// sourceRank orders the replicas a copy may come from: a counting one,
// then one on a draining chunkserver, and a corrupt one last (the target
// verifies every chunk's checksum, so a corrupt one only ever copies if
// the report was mistaken: it is the last hope of a block with no other).
// A replica that is not a full sealed copy is no source (-1).
func sourceRank(b Block, r blockmap.ReplicaState) int {
	switch {
	case !goodReplica(b, r):
		return -1
	case r.Corrupt:
		return 2
	case r.Draining:
		return 1
	}
	return 0
}
