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
package namespace
