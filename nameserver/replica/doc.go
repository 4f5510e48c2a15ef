// Package replica replicates the nameserver's command log with
// github.com/hashicorp/raft (SPEC §9). It is the only package of the
// product that imports raft.
//
// # The log store
//
// LogStore (logstore.go) keeps raft's log and its stable values (the
// current term, the vote) in a Pebble directory of its own, apart from the
// namespace's. It implements raft.LogStore, raft.StableStore and
// raft.MonotonicLogStore; the caller wraps it in raft.LogCache so that
// recent entries are read from memory.
//
// Layout: a log entry is the key 'l' + its index in 8 big-endian bytes, so
// that Pebble's order is index order; a stable value is the key 's' +
// raft's key; the key "format" names the store's format. A directory
// holding another format, or data without that key (the namespace's, for
// one), is refused at open and left as it was. An entry's value is the
// versioned encoding documented at encodeLog, carrying every field of
// raft.Log (Index, Term, Type, Data, Extensions, AppendedAt); a value that
// does not decode, or whose index is not its key's, is an error wrapping
// ErrCorrupt, never a panic.
//
// Durability: StoreLogs is one batch committed with pebble.Sync, so the
// entries it was given are on disk, all or none, when it returns nil;
// DeleteRange is one range deletion, synced too; Set and SetUint64 are
// synced. Raft counts on each of these: a follower acknowledges entries,
// and a candidate grants its vote, only once they are stored.
//
// Raft's contract for what is missing: GetLog of an index not stored
// returns raft.ErrLogNotFound itself; Get of a key never set returns nil
// and ErrKeyNotFound, whose text "not found" raft matches; GetUint64 of a
// key never set returns 0 and no error, as raft.InmemStore does.
//
// # Invariants
//
//   - FirstIndex and LastIndex are the lowest and highest stored indexes,
//     both 0 when none is stored. They are kept in memory: found by two
//     seeks at open, widened by StoreLogs, and after a DeleteRange that
//     takes the first or the last entry, moved to the next stored entry by
//     one seek. Index 0 is never stored.
//   - Gaps are allowed, as the raft.LogStore contract allows them:
//     StoreLogs may write indexes that do not follow LastIndex, and
//     DeleteRange may cut the middle. Raft makes none: the store tells it
//     (IsMonotonic) to delete the whole log after a snapshot is installed
//     or restored rather than leave a gap before the new entries, which
//     here is one range deletion.
//   - The bounds never name an entry that GetLog cannot read yet:
//     StoreLogs moves them only after its batch has committed.
//
// # Concurrency
//
// Raft calls the store from several goroutines at once (the main loop
// appends and truncates, the snapshot goroutine compacts the head, each
// replication goroutine reads), and every method is safe for concurrent
// use. StoreLogs and DeleteRange are serialized, their commits and their
// bound updates in one order; GetLog and Get read Pebble without waiting
// for a write in progress; FirstIndex and LastIndex read memory only. While
// a DeleteRange is committing, FirstIndex or LastIndex may still name an
// entry it has just deleted: raft reads the oldest entry in a loop that
// expects this, and truncates the tail from its main loop only, which also
// is the only one to append. Close waits for the calls in flight, closes
// Pebble, and makes every later call fail with ErrClosed. The store starts
// no goroutine of its own; Pebble's stop in Close, and also when
// OpenLogStore fails (Pebble's Open alone would leave its disk-health
// checker running).
package replica
