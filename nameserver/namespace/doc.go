// Package namespace is the nameserver's file tree, stored in Pebble.
//
// # Layout
//
// Every entry is one key: the big-endian 8-byte entry id of its parent
// directory followed by its name, holding a bfspb.FileInfo. Looking up a
// path reads one key per component; listing a directory is a bounded prefix
// scan; renaming a directory rewrites one key, because its children are
// keyed by its entry id, which never changes. System records (the id
// counter, sessions) live under separate prefixes. keys.go defines them all.
//
// The keys of directories are also cached in memory (dircache.go): which
// entry id a (parent id, name) key names. A key is only ever rebound to
// another entry by deleting it first, so the cache needs no more than
// invalidation on deletes; with it a lookup reads Pebble once, for its
// leaf, however deep the path.
//
// # Mutations
//
// Every mutation is a bfspb.Command. Apply turns a command into exactly one
// Pebble batch, committed with pebble.Sync: when Apply returns nil the
// mutation survives a crash. The apply step is deterministic: everything it
// needs that is not in the stored state (new entry ids, the time) is in the
// command, so a replicated log of commands yields the same state everywhere.
//
// Each kind of command is described once, in the table of commands.go:
// the paths it names, the ids it hands out, the session it acts for, its
// gate and its apply step. Apply reads everything from there. A gate is
// the directory-lock check (gate.go): the fences the command carries,
// then the locks over its target (GateTarget), its subtree too
// (GateSubtree) or a move's source and destination (GateMove); GateNone
// is for the commands that say why they need none (sessions, the lock
// commands, the nameserver's own close and end of a cleaning). A command
// without a description, or described without a gate, is refused; the
// enumeration test keeps every op of a Command described. Store.Gate runs
// the same check for the requests that are not one command (FinishFile).
//
// Where the apply steps are: entries.go (mkdir, create, delete, rename,
// chmod), files.go (blocks and closing), sessions.go, lockapply.go
// (LockDir, UnlockDir, FinishCleaning), with the records they keep in
// history.go (past locks) and cleaning.go (what a cleaning drains).
//
// # What is kept in memory
//
// Besides the directory cache, three things mirror stored records, are
// changed by Apply only (from committed commands, under their path locks)
// and are built again by Open: the id and epoch counters; the lock table
// (locks.go: every directory LOCKED or CLEANING); and the open-file index
// (openindex.go): the files open for write arranged by the directories
// above them, so that a lock or an unlock finds the open files of its
// subtree at a cost that grows with what it finds, not with every file
// open in the namespace. Renaming a directory moves its node in the
// index, and with it everything below.
//
// # Concurrency
//
// Pebble has no transactions, so a Store serializes read-modify-write with
// path locks: a mutation read-locks the ancestors it depends on and
// write-locks the entries it changes, all at once (no lock ordering, no
// deadlock). Mutations on disjoint paths run in parallel and their syncs are
// grouped by Pebble's commit pipeline. Reads take no locks; they see the
// last committed state. A mutation that deletes a directory's key takes
// it out of the directory cache before its batch commits and lets it back
// in (read afresh) only after, so a lookup never sees from the cache
// anything older than what Pebble shows. All methods are safe for
// concurrent use.
//
// # Invariants
//
//   - The root directory exists and has entry id RootID.
//   - Every entry's parent exists and is a directory.
//   - Entry ids are never reused: the counter only grows (a max-merge), also
//     when concurrent batches commit out of order.
//   - An entry key names the same entry id until the key is deleted; the
//     directory cache holds only bindings whose key has not been deleted
//     since they were read, and none whose delete is committing.
//   - The open-file index has a node for exactly the files with an
//     open-file record and the directories above them, each under the
//     directory its entry record names.
//   - Every op a Command can carry has a description with a gate.
package namespace
