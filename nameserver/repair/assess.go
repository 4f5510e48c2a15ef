package repair

import (
	"github.com/bfs-go/bfs/nameserver/blockmap"
)

// verdict is what the replicas of a closed file's block call for.
type verdict struct {
	// counting is the replicas that count toward the replication
	// (blockmap.ReplicaState.Counts: good and not draining).
	counting int
	// good is the good replicas, draining ones included: the copies a
	// reader can read.
	good int
	// source: some replica may be copied from (see sourceRank).
	source bool
	// drop are the replicas that can go: corrupt, or no full copy
	// (unsealed, or sealed at another length), once the block has its full
	// count of counting replicas.
	drop []string
	// trim are the counting replicas beyond the replication, to delete.
	trim []string
}

// missing says that nobody can read the block: no good replica.
func (v verdict) missing() bool { return v.good == 0 }

// assess judges the replicas of b, as the block map reports them (sorted
// by address), by the one definition of a good replica. It does no I/O.
func assess(b Block, states []blockmap.ReplicaState) verdict {
	var v verdict
	var counting []string
	for _, r := range states {
		if r.Good(b.Size) {
			v.good++
		}
		if r.Counts(b.Size) {
			counting = append(counting, r.Addr)
		}
		v.source = v.source || sourceRank(b, r) >= 0
	}
	v.counting = len(counting)
	if v.counting < b.Replication {
		return v
	}
	for _, r := range states {
		if !r.Good(b.Size) {
			v.drop = append(v.drop, r.Addr)
		}
	}
	// A draining replica never counts, so it is never trimmed: the
	// decommission owns it.
	if extra := v.counting - b.Replication; extra > 0 {
		v.trim = counting[len(counting)-extra:]
	}
	return v
}

// sourceRank orders the replicas a copy may come from: a counting one,
// then one on a draining chunkserver, and a corrupt one last (the target
// verifies every chunk's checksum, so a corrupt one only ever copies if
// the report was mistaken: it is the last hope of a block with no other).
// A replica that is not sealed at the block's length is no source (-1).
func sourceRank(b Block, r blockmap.ReplicaState) int {
	switch {
	case !r.Sealed || r.Size != b.Size:
		return -1
	case r.Corrupt:
		return 2
	case r.Draining:
		return 1
	}
	return 0
}
