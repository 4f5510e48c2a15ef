// Package fileclose closes files open for write and keeps the replicas of
// closed files at their agreed length: the HDFS "lease recovery" of the
// nameserver, and the mechanism directory cleaning fences a holder with.
//
// A file closes when every replica of its block in the write set has
// reported the block sealed (BlockReceived, or a block report that says
// sealed), leaving out replicas the writer dropped and replicas on
// chunkservers declared dead. Its writer normally seals the replicas
// itself (its last packet); when the writer finishes (Finish), when it is
// gone (its session ended, Load after a restart) and when a directory is
// cleaned (CloseFile), the Closer sends the Seals, retrying with a
// jittered backoff until the replica reports or its chunkserver is
// declared dead.
//
// Reports of replicas of closed files (Reconcile) bring them in line: a
// replica that missed the close is sealed, a longer one truncated, a
// shorter one deleted.
//
// # Seams
//
// The Closer sees the rest of the nameserver through four interfaces
// declared here: Files (the namespace: reads, and the CloseFile command),
// Replicas (the block map: who holds what, who is dead), Chunkservers
// (Seal, Truncate, replica info, delete) and a clock. The nameserver
// implements them (nameserver/seams.go); tests use a real namespace in a
// temporary directory and fakes for the others.
//
// # Invariants
//
//   - The agreed length comes from what the replicas reported, never from
//     a writer's claim (agree): it keeps every synced byte the replicas
//     hold, and no claim makes the nameserver drop or cut bytes a replica
//     holds durably (SPEC §4).
//   - CloseFile, the dirlock.FileCloser a cleaning drains its files
//     through, returns only once the file is closed and every live replica
//     of its block holds the agreed length (settle), also for a file closed
//     before a restart whose truncations never went out: the cleaning
//     persists UNLOCKED only then (I5).
//   - A replica is waited for no longer than its chunkserver lives; a live
//     chunkserver whose calls keep failing is given up on after the dead
//     timeout, as if it were dead. A close therefore ends whenever one
//     replica of the block can be sealed (I7). A replica given up on is
//     reconciled when its chunkserver reports again.
//   - A close is decided once (readyLocked marks it finishing). If the
//     file gained a block meanwhile (ErrBlockChanged), it starts over on
//     the new block and only then wakes its waiters.
//
// # Concurrency
//
// A Closer is safe for concurrent use. One mutex guards the files being
// closed, the index of open blocks and the registration signal; it is
// held across nothing but in-memory work (the block map's liveness
// answer included), never across a namespace or chunkserver call. The
// Closer's goroutines (seals, closes being persisted, truncations, late
// seals) belong to one task group: Close cancels their context, refuses
// new work and waits for them. The Seal and replica-info calls in flight
// are bounded by Config.SealConcurrency.
package fileclose
