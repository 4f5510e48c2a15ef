// Package volume is a chunkserver's set of volumes: one data directory
// per disk (bfs chunkserver --data DIR1,DIR2,...), each a
// blockstore.Store of its own, with its own meta log, capacity and free
// space. A Set routes every call about a block to the volume that holds
// it, places a new replica on a volume of its choosing, and takes a
// failing volume out of service at once while the chunkserver serves the
// others.
//
// # Replicas
//
// A block has at most one replica on a chunkserver, whatever its volumes:
// a create (or a seal of an unknown block) looks in every volume in
// service first, under a lock striped by block id, and places the replica
// only if none holds it. Two volumes that come back from a restart with
// the same block (one was out of service when the other was given a
// copy) keep one replica: the sealed one, then the longer, then the one on
// the earlier volume; the other is deleted.
//
// A new replica goes to a volume picked at random among those in service
// with room, weighted by their headroom: the free space above what the
// Policy (the nameserver's, sent at registration) keeps free, the larger
// of MinFree and (1 - MaxFill) of the capacity. This is the shape of
// HDFS's available-space volume choice: an emptier disk fills faster,
// yet every disk with room takes its share.
//
// # States
//
// A volume is Healthy, Full or Failed. Any error from a volume's store
// that is not about the request itself (an I/O error on a write, a
// fsync, a read of metadata; ENOSPC on the meta log) asks for a check
// (blockstore.Store.Check). A check that fails takes the volume out
// of service for good (until the chunkserver restarts): Failed, its store
// abandoned (nothing more is written there), its replicas no longer
// listed, served or reported, and OnChange is called so that the next
// heartbeat, sent at once, tells the nameserver. A check that finds the
// disk out of space makes it Full, as does free space below the Policy's
// reserve: it serves what it holds and takes no new replica, and it is
// Healthy again once space is freed (a Full volume is checked again
// every few seconds). Every volume is also checked every CheckInterval
// without an error.
//
// # Checks
//
// Each volume has a checker goroutine of its own, running its checks one
// at a time, so that a disk that hangs holds up no other volume's checks.
// A check asked for is one that starts after the asking: an error met
// while a check runs, or right after one passed, has the volume checked
// again (the check under way may have looked at the disk before it broke).
// Requests made before a check starts share it; one nobody waits for runs
// no sooner than a second after the last check started, so a burst of
// errors costs one check a second at most.
//
// A disk can hang rather than fail: its I/O neither ends nor errs. Every
// check runs on a goroutine of its own and is given CheckTimeout (30 s by
// default; see DefaultCheckTimeout for why); one that has not finished by
// then takes the volume out of service as failed ("the disk hangs"). And
// since a hung disk returns no error to ask for a check, the checker
// watches the volume's store calls: calls under way, none of which has
// ended for 10 s, ask for one.
//
// A read that fails on an I/O error checks its volume before it answers
// (waiting for that volume's check alone, bounded by the timeout): if
// the volume fails, the replica is gone with it (ErrVolumeFailed); if it
// passes, the replica itself is unreadable and the error wraps
// blockstore.ErrCorrupt, so that the chunkserver reports it bad. A read
// runs on a goroutine of its own, so that a reader waiting on a hung
// disk is let go with ErrVolumeFailed once the volume goes out of service
// (within some 45 s: the stall seen, then the check's timeout); the SDK
// then reads another replica. The read left behind may still write into
// the caller's buffer, which the caller must not use again. Writes,
// seals and creates on a hung disk are not let go: they wait for the
// disk, though the volume goes out of service all the same (its stalled
// calls ask for the check).
//
// The chunkserver serves while no more than FailedTolerated volumes have
// failed (-1: while one is left); beyond that, Fatal delivers the reason
// and the chunkserver stops. A volume that does not open (its directory
// unusable, its meta log damaged) counts as failed from the start; a
// full disk never keeps a volume from opening (blockstore opens on one).
//
// # Concurrency
//
// A Set is safe for concurrent use. It starts a checker goroutine per
// volume that opened, and I/O goroutines (a check, a read, the abandoning
// of a failed volume's store) that a hung disk may keep. Close stops the
// checkers (a check under way ends first, within the timeout), waits for
// the I/O goroutines for at most the check timeout, and closes the
// stores. An I/O goroutine blocked in a system call on a hung disk
// cannot be stopped by anyone; Close leaves it behind, saying so, so
// that the chunkserver can still stop.
package volume
