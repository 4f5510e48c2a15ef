// Package sdk is the Go client of BFS-Go: namespace calls (Mkdir, Touch,
// Stat, List, Remove, Rename, Chmod, DiskUsage, ...), files (Create returns
// a Writer that streams to every replica at once; Open returns a Reader),
// directory locks (LockDir returns a Lock whose Done closes when the lock
// is lost; UnlockDir, GetDirLock, ListDirLocks, WatchDirLocks,
// LockHistory) and the session that mutations, open files and locks
// belong to.
//
// # Connecting
//
// Dial returns a *Client for one nameserver. The gRPC connection is made
// lazily, so an unreachable nameserver shows in the first call. Close
// releases everything the Client owns.
//
// WithCertsDir has every connection (to the nameserver and to the
// chunkservers) speak mutual TLS 1.3 with a client certificate of the
// cluster's CA, read from a certificates directory (the layout `bfs cert`
// makes) and read again when its files change; the client accepts only a
// server presenting a node certificate of that CA. Without it the client
// speaks plaintext, which only a cluster run with --insecure accepts: a
// refused handshake shows as ErrUnavailable.
//
// # Sessions
//
// A Client has at most one live session at a time, opened on the first call
// that needs one (every namespace mutation carries the session id, which is
// what directory locks are checked against). A goroutine owned by the
// Client renews it every TTL/3. The session is lost when the nameserver
// answers SESSION_EXPIRED or when no renewal succeeded for nearly a TTL,
// on a timer counting from the sending of the last renewal that did, so
// the client gives the session up before the nameserver expires it (and
// before the session's locks can go to another holder), however long a
// renewal hangs. Session(ctx).Done() is closed then, with the Done of the
// session's locks, and the next call that needs a session opens a new one. A mutation refused with SESSION_EXPIRED is
// retried once under the new session: the refusal means nothing changed.
// Close stops the renewals and closes the session on the nameserver (best
// effort, with a short timeout; the nameserver expires it anyway), then
// closes the connection.
//
// The holder id recorded with the session is "ip:port:timestamp" of the
// process unless WithHolder says otherwise; see Dial.
//
// # Fencing
//
// The client remembers every directory lock it was granted. Each mutation
// it sends (namespace calls, and a Writer's AddBlock, SyncBlock and
// FinishFile) carries the locks it holds or lost at or above the paths it
// names (for RemoveDir and Rename, below them too), and the nameserver
// accepts it only while each is still LOCKED at its epoch by this
// client's session. A lock taken away (a forced unlock, its session
// expired or lost) keeps fencing: the client's mutations in that subtree
// fail with ErrStaleEpoch (a *StaleEpochError) even once the directory is
// UNLOCKED, and from a new session, until the client locks the directory,
// or one above it, again. A lock the client let go itself (Lock.Unlock,
// UnlockDir, deleting the directory) does not fence; Unlock of a handle
// already lost does not lift its fence. The client tells its own releases
// from the calls it made, not from the reason the nameserver gives for a
// lock's end: an end its lock watch reports while none of its unlocks or
// deletes of that directory (or one above) is in flight fences it, even
// one the nameserver calls the holder's (a session id is all another
// process of the same identity would need, or a bug).
//
// # Identities
//
// The session belongs to the identity of the client certificate
// (WithCertsDir's user): the nameserver refuses any use of it by another
// identity with ErrPermissionDenied, and shows its id whole only to that
// identity and to admins (others see a prefix, "3f2a9c1d…", in
// listings, lock states and watch events). Force, LockDirOperator,
// LeaveSafeMode, Decommission, CancelDecommission, AllChunkservers,
// BlockHealth, AddMember, RemoveMember and TransferLeader need an admin
// certificate; other identities get ErrPermissionDenied.
//
// # Listings
//
// The operators' listings are iterators that fetch a page per request as
// the loop asks for more: AllDirLocks (filtered on the nameserver by
// prefix, state, holder and session), AllSessions and AllLockHistory, each
// an iter.Seq2 of items and an error that, if one occurs, is yielded once
// and ends the sequence. ListDirLocks, Sessions and LockHistory collect
// every page into a slice.
//
// # Operating the cluster
//
// SafeMode and LeaveSafeMode show and end the nameserver's safe mode.
// Decommission and CancelDecommission start and end the draining of
// chunkservers; AllChunkservers (and Chunkservers, which collects it)
// reports every chunkserver the nameserver knows with its state (live,
// draining, decommissioned: safe to remove, dead), disk, volumes and
// blocks; BlockHealth the cluster's counts of under-replicated and
// missing blocks and corrupt replicas. Fsck walks the namespace under a
// path on the nameserver, a stretch per request, calls back with each
// file that has blocks under- or over-replicated, missing (no good
// replica: sealed at the block's length, on a volume in service, not
// known corrupt) or with a corrupt or stale replica, and returns the
// totals; a missing block makes the totals not Healthy.
//
// # Errors
//
// Every protocol StatusCode maps to one sentinel error (ErrNotFound,
// ErrExists, ErrLocked, ...) through a single table; refusals by a
// directory lock are a *LockedError carrying the holder and epoch, which
// matches ErrLocked or ErrCleaning. Returned errors wrap the sentinel with
// the operation and path (*fs.PathError, *os.LinkError for Rename), so use
// errors.Is and errors.As; nothing needs the message text. A failed RPC
// (the nameserver reached no decision) is returned as gRPC reports it, also
// matching ErrUnavailable when the nameserver cannot be reached, or as the
// context's error when the caller's context ended it. A limit of the
// servers (the sessions or waiting lock calls of the client's identity,
// a watch stream too many, a message too big) is ErrResourceExhausted,
// like a full disk; its text names the limit.
//
// # Limits the SDK rides out
//
// A chunkserver ends a write stream that sent no packet for its idle
// timeout (the application paused between writes): the Writer opens the
// stream again at its next Write, Sync or Close, with a write token the
// nameserver issues anew (the first may have expired during the pause; a
// writer fenced meanwhile gets none), sends first the packets it had not
// acknowledged, and keeps the replica. A session's lock watch
// that the nameserver cuts off for falling behind starts again like a
// broken one, and every Lock looks its lock up.
//
// # Concurrency
//
// A *Client, a *Session and a *Lock are safe for concurrent use by any
// number of goroutines; a Writer or a Reader is for one goroutine at a
// time (ReadAt may be called concurrently). Calls do not hold locks across RPCs; concurrent callers
// needing a session share the one opened first.
//
// # Corrupt replicas
//
// A Reader that gets CORRUPT from one replica reads from the next. Once a
// read has succeeded from another replica, it reports the bad ones to the
// nameserver (ReportBadReplicas, once per replica and Reader), in a
// goroutine of the Client (Close stops it) and best effort: an error is
// dropped, since the chunkserver holding the replica reports it too. The
// nameserver then stops sending readers to it.
package sdk
