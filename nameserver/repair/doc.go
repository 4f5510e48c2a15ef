// Package repair keeps every block's replica count at its file's
// replication (SPEC §4b, "Re-replication" and "Corruption"): it copies
// under-replicated blocks from a good replica to a new chunkserver,
// deletes corrupt replicas once the block has its full count elsewhere,
// and trims excess replicas.
//
// The Scheduler sees the nameserver only through interfaces it declares:
// the Namespace (every block of every file with its length, version, the
// file's replication and whether it is open for write; a lookup of one
// block), the block map as Replicas (each replica's state, the choice of
// a target, forgetting a replica), and the Chunkservers (the copy, the
// delete). A Hold function (the nameserver's safe mode) holds every action.
//
// What counts: the block map's one definition (blockmap.ReplicaState
// .Good: sealed at the block's length, the length its file was closed
// with; on a volume in service; not marked corrupt), and a replica counts
// toward its block's replication when it is good and its chunkserver is
// not draining (Counts). A block with fewer counting replicas than its
// replication is under-replicated; one of a closed file with no good
// replica is missing, whatever replicas it has (corrupt, short,
// unsealed): counted (Stats.Missing, the missing_blocks gauge) and
// logged, and queued only if some replica sealed at its length may still
// be copied (a corrupt one: the last hope).
//
// The queue: under-replicated blocks of closed files wait in priority
// order, fewest counting replicas first (a block down to one replica is
// copied before one down to two), then first come first served. Blocks of
// files open for write are counted but not queued: the writer's pipeline
// owns them until the close, and the close (Check) queues them.
//
// A copy goes from a source, a replica sealed at exactly the block's
// length (counting first, then draining, then, as a last hope for a block
// with no other, a corrupt one: the target verifies every chunk's
// checksum, so corrupt bytes are never copied), to a target the block map
// picks (placement rules: free-space floor and fill ratio, not draining, a host without
// a replica of the block where possible, never a chunkserver that holds
// one). Several copies of one block may run at once, one per missing
// replica. Copies in flight are bounded in total (MaxCopies) and per
// chunkserver, as source and target together (MaxCopiesPerServer; the
// bandwidth a target's copies take is its own --copy-rate); each
// has a timeout of minCopyTimeout plus its size at minCopyRate. A failure
// steers the next attempt: a busy target (RESOURCE_EXHAUSTED) is left
// alone for BusyFor, a source without a good replica or a target with one
// is avoided for that block, any other failure backs the block off
// (internal/retry's jittered backoff).
//
// Completion: the target reports the new replica itself (BlockReceived),
// and the next check of the block sees it in the map. Until it does (at
// most expectFor), the copy counts, so the block is not copied twice.
//
// Deletes: once a block has at least its replication in counting
// replicas, its replicas that are not good (corrupt, short, unsealed,
// longer than the block) are dropped from the map and deleted, and
// counting replicas beyond the replication are trimmed. A replica on a draining
// chunkserver never counts and so is never trimmed (the decommission owns
// it). Nothing is deleted while a copy of the block is in flight.
//
// Triggers: Check (a replica marked corrupt, a file closed, a degraded
// block added), Received (a new sealed replica of a block being
// repaired), Rescan (a chunkserver declared dead, or done with the first
// full report of a registration: back, perhaps with replicas now in
// excess; a volume reported failed), and a full pass over the namespace
// every Interval, and once safe mode ends. What later full reports change
// the periodic pass finds. A full
// pass reads the namespace in one iteration and takes the block map's
// lock once per block, never for the pass.
//
// Concurrency: one goroutine runs the loop (checks, dispatch); each copy
// runs in a goroutine of its own. Close stops the loop, cancels the copies
// and waits for all of them. The Scheduler's mutex guards its tables and
// is never held across namespace reads or RPCs; it is taken before the
// block map's (Target), never after.
package repair
