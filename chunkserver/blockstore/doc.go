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
// replicas. Next to them is the meta log:
//
//	<dir>/LOCK                                   flock: one Store per directory
//	<dir>/blocks/<id>>16&0xff>/<id>>8&0xff>/<id>.data   the bytes
//	<dir>/blocks/<id>>16&0xff>/<id>>8&0xff>/<id>.meta   what is durable about them
//	<dir>/metalog/<generation>.log               metas newer than their .meta
//
// with <id> and <generation> as 16 hex digits and the two directory
// levels as 2 hex digits. The meta file is a 64-byte little-endian header
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
// # The meta log
//
// A sync, seal, truncate or delete does not rewrite the meta file: it
// appends a record (the whole new meta file, or "deleted") to the meta
// log and waits for it to be durable. One committer goroutine writes all
// the records pending as one checksummed frame and fdatasyncs the log
// once for them, so concurrent seals (a fence seals hundreds of blocks
// at once) share one flush instead of paying a file, a rename and two
// fsyncs each. When a log passes 4 MiB the committer starts the next
// generation and a checkpointer goroutine writes the newest meta of every
// replica the full log mentions into its meta file (as above, with one
// directory fsync per directory), then removes the log. A replica whose
// meta file is behind the log keeps its checksums in memory meanwhile.
// Close checkpoints everything, so a store closed cleanly has no log
// records left. See metalog.go for the format.
//
// # Durability and recovery
//
// Packets are written to the data file without syncing; once 256 KiB
// have piled up their writeback is started, so the disk works while
// packets arrive. Sync (and Last, and Seal) fdatasyncs the data file
// (and, the first time, fsyncs the directory holding its new entry), and
// only then logs the meta: no record, acknowledged or not, claims a byte
// that is not on disk. Open therefore recovers, after any crash (kill -9
// included), replaying the logs oldest first over the meta files:
//
//   - every replica at its last logged meta, or else at the size its meta
//     file records: bytes of the data file past it were never covered by
//     a sync and are cut; the checksums cover exactly what stays;
//   - every sealed replica whole, still sealed; a replica whose last
//     record is a delete is removed;
//   - nothing of a replica that was never synced (data without meta or
//     record), nor stray temporary metas: both are removed;
//   - a replica whose meta header is damaged is set aside (*.corrupt) and
//     not served.
//
// MarkCorrupt marks a replica found bad (by the chunkserver's scrubber or a
// read): every later ReadAt of it is ErrCorrupt until it is deleted, even
// where its bytes still match. The mark is kept in memory only.
//
// # A full disk
//
// A disk that fills is no failure. A log frame that meets ENOSPC (or
// EDQUOT), writing or syncing, is cut back off the log, which is synced
// at its last durable frame: the records fail (their callers get an error
// wrapping ENOSPC, RESOURCE_EXHAUSTED on the wire) and the log takes
// records again as soon as there is room. A new log that finds no space
// is tried again at the next commit, a checkpoint at the next full log
// or Check. A store opens on a full disk: if recovery finds no room to
// write the metas its logs hold into the meta files, or to start a new
// log, the logs stay and are replayed in memory (every replica is served
// from them), and are checkpointed and removed once there is room. Any
// other failure of the meta log (an I/O error: what the disk holds is
// unknown) is sticky: the store persists nothing more until reopened.
// A create that fails leaves nothing behind.
//
// # A failing disk
//
// Check probes the disk the way a failing one shows itself: the meta log
// still persisting, a file written, synced and read back from the disk
// (O_DIRECT where the file system allows), and the first bytes of a few
// replicas read from the disk. It tells a full disk (ErrFull) from a
// failing one. Reads tell an I/O error from a damaged replica: bytes
// missing or failing their checksum are ErrCorrupt, an error reading them
// is returned as it is, for the chunkserver to check the volume.
// Abandon stops the store of a failed disk without writing to it again.
//
// A crash can only tear the last frame of a log (each frame is synced
// before the next is written); a torn tail is dropped, its records were
// never acknowledged. A damaged frame followed by an intact one means
// acknowledged records are lost: Open fails with ErrCorrupt naming the
// log, rather than serve replicas that forgot they were sealed. Recovery
// ends by checkpointing what it replayed and removing the logs.
//
// # Invariants
//
//   - A replica is created by Create (durably: it survives a crash and is
//     listed, empty) or by a Seal of an unknown block (sealed at 0), never
//     by a packet: a packet for a block with no record is ErrNotFound.
//     Delete removes the record; nothing of the block is accepted after.
//   - Packets of a block are applied in sequence order from 1, each at the
//     offset equal to the replica's size; a packet with a bad CRC32C, a gap
//     or a wrong offset changes nothing.
//   - A packet whose sequence number was applied already is acknowledged
//     only if its bytes are exactly those stored at its offset (read back,
//     verified and compared), and a last one only if the replica is sealed
//     where it ends; otherwise it is ErrMismatch (ErrSealed on a sealed
//     replica) and changes nothing.
//   - A refusal for a gap, an offset or a mismatch names the replica's
//     sequence numbers only to the writer of its last applied packet
//     (Packet.Writer); to anyone else its text is the same for all three.
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
// replica's I/O (append, fdatasync, waiting for its record's commit):
// packets and seals of one block are serialized, different blocks proceed
// in parallel and their records share group commits. Readers hold a
// replica's RWMutex shared only to keep Truncate and Delete away; they
// read the data file without the replica's mutex, so reads do not wait
// for a writer's fdatasync. The committer never takes a replica's mutex;
// the checkpointer takes it only briefly, around a rename. Open starts
// the two and Close stops them; the only other goroutines the package
// starts (a data file's fdatasync during a sync, a checkpoint's writers)
// are joined before the call that started them returns.
package blockstore
