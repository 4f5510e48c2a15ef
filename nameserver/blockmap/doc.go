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
// What counts: ReplicaState.Good is the one definition of a good replica
// (sealed at its block's length, on a volume in service, not marked
// corrupt), Counts adds "not on a draining chunkserver"; fsck, the
// metrics, the repair and stat all judge by them.
//
// Volumes: a chunkserver reports its volumes (Usage.Volumes) and names
// the volume of every replica (Replica.Volume, below MaxVolumes). A
// heartbeat that reports a volume failed marks it in the chunkserver's
// slot: its replicas are gone at once, whether or not the sweep (run
// before Heartbeat returns) has freed them yet, and a replica of that
// volume reported later is not recorded. A registration starts with the
// volumes it reports.
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
// Placement (Map.Pick, under a Policy) takes each replica at random among
// the chunkservers with a healthy volume whose free space is above the
// reserve (the larger of Policy.MinFree and what Policy.MaxFill leaves),
// weighted by that room over all such volumes (a chunkserver that cannot
// tell its free space weighs as much as the average); this is the shape
// of HDFS's available-space placement: an emptier disk takes more new
// blocks, yet every disk with room takes its share. No two replicas of a
// block share a chunkserver, nor a host while unused hosts remain
// (Usage.Host, else the address's host part).
//
// Full reports (Report, ReportPage): a chunkserver's full report comes
// in pages (Page: a report id, a sequence number from 0, and More on all
// but the last). Each page's replicas are recorded as it arrives;
// replicas the chunkserver held before and no page has named yet stay
// until the last page, which forgets every replica of that chunkserver
// that the report did not name, except those received (Received) while
// the report was under way: the chunkserver's listing may predate them.
// (Where a page and a Received both describe a replica, the later call's
// description stands, as it did when a report was one message.)
// A page out of order, or of a report replaced by a newer page 0 or by a
// new registration, is refused (ErrReportOrder, ErrUnknownServer) and the
// chunkserver starts over. A registration's first full report is the
// first whose last page arrives; Server.Reported is set then, and every
// page of it reports first. Report is a report of one page.
//
// Layout, sized for millions of blocks: chunkserver addresses are
// interned into slots (never freed), and a block's replicas are one
// exactly-sized slice of 24-byte values naming their slot, in one map
// (about 165 bytes a block with three replicas, see scale_test.go); the
// volume shares the slot index's word. There
// is no index by chunkserver: generations stand in for one. Each slot
// stamps the replicas it writes with its current generation and ignores
// those stamped below its floor; a full report's last page raises the
// floor to the report's generation, and a new registration or the death
// of the old one raises it past every stamp, so either drops a
// chunkserver's replicas at once without visiting them. A sweep then
// frees them. Held walks the whole map.
//
// A Map does no I/O and starts no goroutines; time is passed in. It is
// safe for concurrent use: one mutex, never held across anything but map
// updates, and never for more than one batch (1024 blocks) of a long
// operation (a report page, the sweep, Held), which release it between
// batches. The sweep runs in the goroutine of the call that made it
// necessary (the last page of a report, Register, Expire), one at a time.
// Only tests read the wall clock, to measure how long the mutex is held
// (holds.go).
package blockmap
