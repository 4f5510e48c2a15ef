// Package namespace is the nameserver's file tree, stored in Pebble.
//
// # Layout
//
// Every entry is one key: the big-endian 8-byte entry id of its parent
// directory followed by its name, holding a bfspb.FileInfo. Looking up a
// path reads one key per component; listing a directory is a bounded prefix
// scan; renaming a directory rewrites one key, because its children are
// keyed by its entry id, which never changes. System records (the
// counters, the applied index, sessions, members) live under separate
// prefixes. keys.go defines them all.
//
// The keys of directories are also cached in memory (dircache.go): which
// entry id a (parent id, name) key names. A key is only ever rebound to
// another entry by deleting it first, so the cache needs no more than
// invalidation on deletes; with it a lookup reads Pebble once, for its
// leaf, however deep the path.
//
// # Mutations
//
// Every mutation is a bfspb.Command, the entry of a replicated command
// log (nameserver/replica drives the store from a Raft log). Apply turns
// the command at a log index into exactly one Pebble batch that also
// records that index as applied (AppliedIndex). Commands apply one at a
// time, in log order, each reading what the ones before it committed.
// The apply step is deterministic: what it needs that is not in the
// stored state (the time, a new cluster id) is in the command, and new
// entry and block ids and lock epochs come from counters stored in the
// state and taken in the command's own batch, only if it commits. So
// every replica that applies one log holds byte for byte the same state,
// and a log replayed after a restart gives the same ids and epochs again.
// A command that fails changes nothing; applied again it fails again.
//
// Batches are written without their own fsync: the command log is the
// durable record. After a crash the store holds a prefix of what it
// applied, and the log is applied again from AppliedIndex on. Sync and
// Checkpoint make the store itself durable; Checkpoint and Restore are
// the snapshots of the log (snapshot.go).
//
// Each kind of command is described once, in the table of commands.go:
// the paths it names, the session it acts for, its gate and its apply
// step. Apply reads everything from there. A command naming a session
// applies only while the store holds that session (OpenSessionCmd
// applied, CloseSessionCmd not yet): a session's end is one command, and
// nothing of the session applies after it. A gate is the directory-lock
// check (gate.go): the fences the command carries, then the locks over
// its target (GateTarget), its subtree too (GateSubtree) or a move's
// source and destination (GateMove); GateNone is for the commands that
// say why they need none (sessions, the lock commands, the nameserver's
// own close and end of a cleaning, the format, the member table). A
// command without a description, or described without a gate, is
// refused; the enumeration test keeps every op of a Command described.
// Store.Gate runs the same check for the requests that are not one
// command (FinishFile).
//
// A new store is empty: it holds nothing until a FormatCmd applies (the
// root and the cluster id), and refuses every other command before.
//
// Where the apply steps are: entries.go (mkdir, create, delete, rename,
// chmod), files.go (blocks and closing), sessions.go, lockapply.go
// (LockDir, UnlockDir, FinishCleaning), drain.go, members.go (the
// nameserver group's member table), store.go (format), with the records
// they keep in history.go (past locks) and cleaning.go (what a cleaning
// drains).
//
// An error of Apply that is not one of the domain errors of this package
// or of dirlock is a storage failure (IsStorageError): the replica can no
// longer follow its log and must stop rather than diverge.
//
// # What is kept in memory
//
// Besides the directory cache, these mirror stored records, are changed
// by Apply only (from committed commands) and are built again by Open
// and Restore: the applied index, the id and epoch counters, the cluster
// id and the member table; the lock table (locks.go: every directory
// LOCKED or CLEANING); and the open-file index (openindex.go): the files
// open for write arranged by the directories above them, so that a lock
// or an unlock finds the open files of its subtree at a cost that grows
// with what it finds, not with every file open in the namespace.
// Renaming a directory moves its node in the index, and with it
// everything below.
//
// # Concurrency
//
// Apply, Checkpoint and Restore are serialized by one mutex: a single
// writer, so read-modify-write needs no path locks. Reads take no locks;
// they see the last committed state. A mutation that deletes a
// directory's key takes it out of the directory cache before its batch
// commits and lets it back in (read afresh) only after, so a lookup never
// sees from the cache anything older than what Pebble shows. While a
// Restore runs, readers may see a mix of two states: only a replica that
// answers no reads (a follower) restores. All methods are safe for
// concurrent use.
//
// # Invariants
//
//   - A formatted store has its root, with entry id RootID, and its
//     cluster id, which never changes.
//   - Every entry's parent exists and is a directory.
//   - Entry and block ids and lock epochs are never reused: their
//     counters only grow, and only a committed command moves them.
//   - The applied index only grows; the state is exactly what the log up
//     to it made.
//   - An entry key names the same entry id until the key is deleted; the
//     directory cache holds only bindings whose key has not been deleted
//     since they were read, and none whose delete is committing.
//   - The open-file index has a node for exactly the files with an
//     open-file record and the directories above them, each under the
//     directory its entry record names.
//   - Every op a Command can carry has a description with a gate.
package namespace
