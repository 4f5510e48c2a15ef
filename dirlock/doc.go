// Package dirlock is the directory-lock state machine: which directories
// are locked, by whom, at which epoch, and whether a mutation of a path is
// allowed.
//
// # States
//
//	UNLOCKED -> LOCKED(holder, session, epoch) -> CLEANING(epoch) -> UNLOCKED
//
// A lock on D covers D and its whole subtree. A mutation whose target lies
// in a locked subtree must come from the holder's session; anyone else gets
// a *LockedError (ErrLocked). While a directory is CLEANING everybody gets
// ErrCleaning. Reads are never checked. One session may nest locks (Tera
// locks tablet/ and then tablet/<lg>/); a lock above or below another
// session's lock is refused.
//
// A lock never moves: renaming a locked directory, or one above a lock,
// is refused for everyone, the holder included (CheckMove), because the
// holder's handle, the master, lockctl and the history all know the lock
// by its path. The holder may delete its locked directory; its locks end
// with it.
//
// # Fences
//
// A client sends, with every mutation, the locks it holds or has lost over
// (and for a recursive delete or a move, under) the paths it names: their
// directory and epoch (Fence). CheckFences accepts the mutation only while
// each is LOCKED at that epoch by the sending session; otherwise it is a
// *StaleEpochError (ErrStaleEpoch) naming the directory's lock now. So a
// client whose lock was taken away (forced, expired, its session lost)
// stays fenced from that subtree after the directory is UNLOCKED, after
// someone else locked it, and from a new session, until it locks the
// directory again (SPEC §6, I8). Fences are checked before locks, so such
// a client hears STALE_EPOCH whoever holds the directory now.
//
// # Purity
//
// A Table does no I/O, starts no goroutines and reads no clock: times are
// passed in. It decides; its owner (the nameserver) persists the decision
// and then records it with Set or Remove. The owner is also what makes a
// check and the mutation it guards atomic with respect to lock transitions
// (the nameserver holds path locks across both); the Table's own mutex only
// keeps its maps consistent.
//
// # Listings
//
// Page lists the locks a page at a time, in path order, filtered by
// prefix, state, holder and session: each page resumes strictly after the
// path the previous one ended at (found by binary search on the sorted
// paths), so a page costs O(log n) plus the locks it looks at (Query.Scan
// bounds those for selective filters), and a lock set or removed
// between pages is neither listed twice nor breaks the listing. Counts
// and HeldBy serve the nameserver's metrics and its session listing.
//
// # Invariants
//
//   - I1: at most one session holds locks in any chain of ancestors: for
//     every pair of locked directories where one is an ancestor of the other,
//     both belong to the same session.
//   - Epochs are handed out by the owner from a persisted counter that only
//     grows; the Table never invents one.
//   - A CLEANING lock with no holder is the cleaning that comes before a
//     grant (SPEC §6, "a grant starts clean"): the owner records it when
//     other sessions have files open for write under the directory, and
//     grants the lock once it has ended.
package dirlock
