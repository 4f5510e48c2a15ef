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
// (blockstore.Store.Check), run by the Set's goroutine, or at once by
// the read that met the error. A check that fails takes the volume out
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
// A read that fails on an I/O error checks its volume before it answers:
// if the volume fails, the replica is gone with it (ErrVolumeFailed);
// if it passes, the replica itself is unreadable and the error wraps
// blockstore.ErrCorrupt, so that the chunkserver reports it bad.
//
// The chunkserver serves while no more than FailedTolerated volumes have
// failed (-1: while one is left); beyond that, Fatal delivers the reason
// and the chunkserver stops. A volume that does not open (its directory
// unusable, its meta log damaged) counts as failed from the start; a
// full disk never keeps a volume from opening (blockstore opens on one).
//
// # Concurrency
//
// A Set is safe for concurrent use. It starts one goroutine (the checks),
// and one per failed volume while its store is abandoned; Close stops and
// waits for all of them, then closes the stores.
package volume
