// Package blockstore keeps a chunkserver's block replicas on local disk:
// it orders and checks the packets of a block, makes them durable on
// request, seals replicas (the chunkserver half of fencing), truncates
// them to an agreed length and reads them back verified.
//
// # On disk
//
// Each replica is two files in a two-level fan-out directory keyed by
// bits 16-23 and 8-15 of its id. Ids are allocated in sequence, so 256
// consecutive blocks share a leaf and the 65536 leaves fill evenly; no
// directory holds more than a few thousand files below 100 million
// replicas:
//
//	<dir>/LOCK                                   flock: one Store per directory
//	<dir>/blocks/<id>>16&0xff>/<id>>8&0xff>/<id>.data   the bytes
//	<dir>/blocks/<id>>16&0xff>/<id>>8&0xff>/<id>.meta   what is durable about them
//
// with <id> as 16 hex digits and the two directory levels as 2 hex digits.
// The meta file is a 64-byte little-endian header
//
//	0  magic "BFSMETA\x01"     8  flags (bit 0: sealed)
//	12 chunk size (65536)      16 block id
//	24 version                 32 size: durable bytes of the data file
//	40 seq of the last packet within size
//	48 number of chunks        52 reserved (zero)
//	60 CRC32C of bytes 0..59
//
// followed by one CRC32C (Castagnoli) per 64 KiB chunk of the first size
// bytes, the last chunk possibly partial. A meta file is only ever
// replaced whole: written to <id>.meta.tmp, fdatasync'd, renamed over
// <id>.meta, directory fsync'd. A crash never leaves a half-written one.
//
// # Durability and recovery
//
// Packets are written to the data file without syncing. Sync (and Last,
// and Seal) fdatasyncs the data file and the new temporary meta (the two
// in parallel), and only then renames the meta into place: the meta never
// claims a byte that is not on disk. Open
// therefore recovers, after any crash (kill -9 included):
//
//   - every replica whose meta exists, at the size its meta records: bytes
//     of the data file past it were never covered by a sync and are cut;
//     the checksums cover exactly what stays;
//   - every sealed replica whole, still sealed;
//   - nothing of a replica that was never synced (data without meta), nor
//     stray temporary metas: both are removed;
//   - a replica whose meta header is damaged is set aside (*.corrupt) and
//     not served.
//
// # Invariants
//
//   - Packets of a block are applied in sequence order from 1, each at the
//     offset equal to the replica's size; a packet with a bad CRC32C, a gap
//     or a wrong offset changes nothing.
//   - I4: once Seal (or a Last packet) has taken a replica, no packet not
//     yet applied is ever accepted for it, in this process or after a
//     restart, and its size changes only by Truncate. A Seal of an unknown
//     block records it sealed at 0 bytes.
//   - Every byte below a replica's durable size has been fdatasync'd and is
//     covered by the checksums in its meta file.
//   - Read never returns a byte whose chunk fails its checksum.
//
// # Concurrency
//
// A Store is safe for concurrent use. The store-wide mutex guards only the
// map from id to replica and is never held during I/O or while waiting
// for a replica. Each replica has its own mutex, held across that
// replica's I/O (append, fdatasync, meta rewrite): packets and seals of
// one block are serialized, different blocks proceed in parallel. Readers
// hold a replica's RWMutex shared only to keep Truncate and Delete away;
// they read the data file without the replica's mutex, so reads do not
// wait for a writer's fdatasync. The only goroutine the package starts is
// the data file's fdatasync during a sync, joined before the sync returns.
package blockstore
