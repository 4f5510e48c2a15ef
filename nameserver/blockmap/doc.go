// Package blockmap is the nameserver's picture of the chunkservers: which
// are registered and alive, and which replicas each holds.
//
// Nothing here is persisted. After a nameserver restart the map starts
// empty and is rebuilt from registrations and block reports; until a
// chunkserver has had the dead timeout to come back, it is not declared
// dead (Map.Dead answers false for an unknown address that young).
//
// Corrupt replicas: MarkCorrupt (from ReportBadReplicas) marks a replica
// that failed a checksum. A marked replica stops counting: Replicas leaves
// it out, so readers are not sent to it, unless every replica of the block
// is marked (then all are returned: a mistaken report must not hide a
// block, and a reader may still find good chunks). The mark is kept apart
// from the reported replicas, so a later block report or BlockReceived
// does not clear it; only DropReplica (the replica is being deleted) and
// Forget (the block is gone) do. Corrupt lists the marked replicas so
// that the delete of a removed file reaches them too. The repair
// (nameserver/repair) replaces a corrupt replica from a good copy and
// then drops it (DropReplica) and deletes it. The marks, like the rest,
// are lost with a nameserver restart; the scrubbers report the replicas
// again.
//
// Repair targets: PickFor (repair.go) chooses the chunkserver a copy of
// an existing block goes to, under the same Policy as Pick, never one
// that holds a replica of the block (in any state) and preferring a host
// none of its replicas is on.
//
// Decommission: SetDraining marks a chunkserver's address draining. The
// mark is kept by address (it holds across the chunkserver's restarts).
// A draining chunkserver is never picked for a new block, and its
// replicas do not count toward their block's replication (States reports
// each replica with its Corrupt and Draining marks; Counts says whether
// it counts), though they stay readable and can be copied from.
//
// Placement (Map.Pick, under a Policy) never chooses a chunkserver whose
// last reported free space is below the floor (one that cannot tell its
// free space is eligible), puts the replicas of a block on distinct hosts
// while unused hosts remain (Usage.Host, else the address's host part),
// and orders the rest by free space per block in flight (Assigned, since
// the last full report).
//
// A Map does no I/O and starts no goroutines; time is passed in. It is
// safe for concurrent use (one mutex, never held across anything but map
// updates).
package blockmap
