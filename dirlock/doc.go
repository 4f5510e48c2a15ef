// Package dirlock is the directory-lock extension: the state machine
// (Table: which directories are locked, by whom, at which epoch, and
// whether a mutation of a path is allowed) and the cleaning that fences a
// lock's holder before its directory is free again (Cleaner).
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
// # Cleaning
//
// SPEC §6, step by step, and who does each:
//
//  1. An unlock (by the holder, forced, or by the end of the holder's
//     session) moves the directory and every lock below it to CLEANING in
//     one durable batch that also records the files open for write in the
//     subtree. A cleaning still going on below is handed over to it: its
//     files join, its record goes (the namespace's takeOverCleanings). A
//     LockDir that finds other sessions' files open for write under the
//     directory does the same, holder-less, with reason "grant".
//  2. The nameserver gives the Cleaner that cleaning as a Job (Start). The
//     Cleaner closes the Job's files through its FileCloser, at most
//     CleanerConfig.Concurrency at once (CloseFilesCtx); the FileCloser
//     (nameserver/fileclose) seals each file's last block on every
//     replica, with its own bounded RPCs, retries and jittered backoff.
//  3. Each replica's BlockReceived counts; a replica on a chunkserver
//     declared dead, or alive but failing for the dead timeout, is waited
//     for no longer. CloseFile returns once the file is closed at the
//     agreed length and every live replica holds that length.
//  4. When every file is closed, the Cleaner persists the end through its
//     Store (FinishCleaning: the directory and the locks it took over
//     become UNLOCKED, watchers hear of it), retrying with a jittered
//     backoff until the Store takes it, reports it handed over, or says
//     the directory is gone (ErrGone) or at another epoch (ErrStaleEpoch).
//     OnEnd then hears of it, once.
//  5. After a restart, Resume starts every cleaning the Store has in
//     progress again at step 2: chunkservers re-register and report, and
//     the seals still needed go out.
//
// So I5 holds: UNLOCKED is persisted only after every file of the
// cleaning (those handed over included) was closed with all its live
// replicas at the agreed length, also for a resumed cleaning. And I7:
// a cleaning ends whenever one replica of each open block is reachable,
// since nothing waits for a chunkserver longer than the dead timeout.
//
// The Cleaner works with its own Job type (path, directory entry id,
// epoch, reason, files) and the small interfaces it consumes, FileCloser
// and Store; dirlock imports nothing of the protocol or the namespace.
//
// Goroutines: a Cleaner runs one goroutine for each cleaning in progress
// and at most Concurrency more for its files. Close cancels them and
// waits for them; a cleaning cut short neither ends nor calls OnEnd (it
// resumes after the restart), and Start refuses new ones. The Cleaner's
// mutex guards its map of cleanings only and is never held across the
// FileCloser, the Store or OnEnd, which runs on the cleaning's goroutine.
//
// The stories in testdata (run by TestTranscripts) drive a whole
// nameserver, this Cleaner and the fileclose Closer included, with fake
// chunkservers and a fake clock: the quickest way to see all of the above
// happen.
//
// # Purity
//
// A Table does no I/O, starts no goroutines and reads no clock: times are
// passed in. It decides; its owner (the nameserver) persists the decision
// and then records it with Set or Remove. The owner is also what makes a
// check and the mutation it guards atomic with respect to lock transitions
// (the nameserver holds path locks across both); the Table's own mutex only
// keeps its maps consistent. The Cleaner is the other owner, beside the
// Table: it does the I/O and the waiting of a cleaning, through the
// interfaces it is given.
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
