// Package nameserver is the BFS nameserver: the gRPC adapter in front of
// the namespace and its directory locks (nameserver/namespace, dirlock),
// replicated by the nameserver group (nameserver/replica), the session
// table (nameserver/session), the block map (nameserver/blockmap), and
// the closer of files open for write (nameserver/fileclose), all wired
// together here.
//
// # The group and its terms
//
// A nameserver is a member of a group (a lone one is a group of one).
// Every mutation is a command proposed through propose, the only way to
// one: Raft commits it in a majority's log and each member applies it to
// its namespace. Everything only the leader does belongs to one
// leadership term (term.go): the session manager, the block map, the
// closer and the cleaner, the repair, safe mode and the chunkserver
// liveness loop are the term's, started after a Barrier when this member
// becomes leader (every stored session with a full TTL, cleanings
// resumed, the block map rebuilt from the chunkservers' registrations),
// and stopped when leadership ends or before a transfer. RPC handlers
// run in the term that was in office when the request arrived
// (leaderOnly, leading, termOf); without one a request is answered
// NOT_LEADER, naming the leader's client address in the LeaderTrailer
// (leader.go). Decisive reads (keep-alives, lock state, fsck, obsolete
// replicas) run after a VerifyLeader round. A deposed leader's term may
// still be running for a moment: everything it would change goes through
// propose, which it can no longer commit, and its chunkserver commands
// carry its term, which chunkservers refuse once a newer leader has
// spoken.
//
// The directory-lock cleaning is dirlock's Cleaner, which drains a
// cleaning's files through fileclose's Closer; each of them sees the
// nameserver only through interfaces it declares, which seams.go
// implements: the namespace as the Cleaner's Store and the Closer's
// Files, the block map as the Closer's Replicas, the chunkservers' gRPC
// clients as its Chunkservers. Every cleaning starts in clean and its end
// is reported to cleaned (locks.go).
//
// With Config.TLS both its ports take only peers with a certificate of
// the cluster's CA (internal/daemon), each RPC's context carrying the
// peer's identity (certs.PeerIdentity), and it dials chunkservers and its
// peers with its node certificate, which must carry the nameserver role
// (bfs cert create-node --role nameserver): chunkservers take commands
// from no other certificate, and New refuses one without the role.
//
// # Trust (tokens.go, trust.go; SPEC §10)
//
// Block tokens. AddBlock answers a write token, GetFileLocation a read
// token per block, ReplicateBlock carries a read token for the copy's
// target (internal/blocktoken): block id, version, access, the identity
// of the peer it is issued to, a deadline (now + --block-token-lifetime,
// default 10 min, on this leader's wall clock) and, for a write, the
// writer's session and the deepest directory lock its AddBlock was fenced
// by, HMAC-SHA256-signed. The keys are the group's: the leader makes one
// (BlockKeyCmd, 32 random bytes, ids that only grow) when its term starts
// without one, and a new one every --block-key-rotation (default 10 h) in
// its liveness loop; the store keeps the newest two (the previous one
// verifies the tokens it signed until they expire, which the rotation
// being at least twice the lifetime guarantees). A new key signs only
// after three heartbeat intervals, so every live chunkserver has it
// (Register and every HeartBeat answer the keys and this leader's clock).
// A new leader signs with the keys in the namespace: the chunkservers
// hold them already.
//
// Chunkservers. Register is taken only from a node certificate of the
// chunkserver role (or one made before roles): not a client's, an
// admin's or a nameserver's (PERMISSION_DENIED). On a secure nameserver
// the address must be one to reach a chunkserver at (a host and a port,
// not an unspecified IP: INVALID_ARGUMENT) and one whose host the
// certificate names (its IP or DNS SANs), so nobody registers at
// another's address; an address a live chunkserver of another certificate
// holds is refused too. The term records which certificate registered
// each address (registrations), and takes HeartBeat, BlockReport and
// BlockReceived for that address only from it (PERMISSION_DENIED).
//
// Free space (blockmap.Usage.Sanitized). A volume's capacity, free and
// used bytes are believed within [0, MaxVolumeBytes] (1 PiB), free and
// used within the capacity, and the sums are recomputed from the volumes;
// placement weighs a chunkserver at most four times the median of the
// candidates, so one that claims more room than it has draws more new
// replicas than the others, but not all. Totals over the cluster add with
// saturation.
//
// Bad replicas. A chunkserver's report of its own replica (the identity
// that registered the address the replica is on) is its verdict. Any
// other report, a reader's or another chunkserver's, is a hint: the
// nameserver has the replica's chunkserver verify it (VerifyBlock, at most
// four at once; more hints are dropped and logged) and marks it corrupt
// only if the chunkserver answers CORRUPT. A false report deletes nothing.
//
// Unallocated blocks. A replica of a block id above the namespace's id
// counter (never allocated here) is no longer kept for ever: the term
// records when a block report first named it, out of safe mode, and once
// --unallocated-grace (default 1 h) has passed the next report answers it
// obsolete. Nothing is deleted in safe mode or when a lookup fails; ids
// are allocated by a committed command before any replica is created, so
// a live allocation is never above the counter a leader sees. The grace
// restarts with every term (never hastened by a leader change). A
// nameserver restored from an old copy of its data directory sees the
// newer blocks as unallocated: each is logged with the time it goes, and
// a negative grace keeps them for ever while an operator decides.
//
// An insecure nameserver (--insecure) knows no identities: it checks
// none, and a token names no holder; it still issues tokens and hands
// keys to whoever registers.
//
// Identities and authorization (authz.go, conceal.go; SPEC §10). Every
// RPC passes one pair of interceptors, after leaderOnly, that checks the
// caller's identity against what it asks. A session is owned by the
// identity that opened it, recorded in its SessionRecord (OpenSessionCmd)
// as "kind/name": any request whose message has a session_id field (found
// from the service's descriptors: every mutation, KeepAlive,
// CloseSession, LockDir, UnlockDir, the listing and the watch that filter
// by session) from another identity is answered PERMISSION_DENIED; an
// admin may name any session in a filter or a forced unlock, and act for
// none. The owner read before a command is the owner when it applies: a
// record never changes and ids are never reused. Records stored before
// owners were recorded have none and any identity may use them, so an
// upgrade keeps its clients' sessions; they end with those clients.
// Forced unlocks, operator locks, LeaveSafeMode, Decommission (and its
// cancel), ListChunkservers, AddMember, RemoveMember and TransferLeader
// need an admin (PublishMember a node or an admin); chunkservers are
// nodes, not admins. Every answer and watch event goes out with the
// session ids its caller may not see (another identity's, unless the
// caller is an admin) cut to session.ID.Short: the fields are found from
// the descriptors of the answers (session_id, *_session), and a message
// with one to cut is copied first, never changed in place. An insecure
// nameserver has no identities: every caller is an anonymous admin, and
// owns the sessions it opens as admin/anonymous.
//
// Limits (config.go Limits, watch.go, waits.go, sessions.go; SPEC §10;
// BUILD.md "Limits"). What one identity (a certificate's kind/name; an
// insecure nameserver's one anonymous admin) can make the nameserver
// hold is bounded, and each refusal is RESOURCE_EXHAUSTED and counted in
// bfs_nameserver_limit_refusals_total{limit} (internal/limit names
// them): every gRPC message received or sent (--max-message-size; gRPC
// refuses it before any handler, and a stats handler counts it,
// internal/daemon), WatchDirLocks streams of a prefix per identity and
// in all, and streams of one session's locks per session (refused before their
// headers), the transitions a watch keeps for a slow watcher (one
// further behind is cut off when it next reads, and must list again),
// live sessions per owner identity and in all (session.Manager counts
// them by owner; a term's manager starts from the stored sessions), and
// LockDir/UnlockDir calls waiting per identity (waits.go). Streams a
// limit ends carry its name in the limit.Trailer.
//
// Watch fan-out (watch.go). Lock transitions are published from the
// apply step, under the command's path locks, so publishing must not
// cost the number of watchers: a transition is appended to the feed of
// the session whose lock ended and to the feed of each watched prefix
// at or above its path (a map lookup per level), and wakes only the
// watchers waiting at a feed's end. Each watcher reads its feed at a
// cursor of its own, in batches, on its stream's goroutine; one blocked
// in a Send (a client that does not read) costs nothing per transition.
// A feed keeps its last --watch-buffer transitions while some watcher
// still needs them, shared by all its watchers. A stream keeps one
// viewer (conceal.go) for all it sends, so the owner of a session in
// its events is looked up once per stream. Waiting lock calls wait for
// a transition of the lock that refused them (watchers.waitAt), and look
// again in the lock table before proposing, so a refused wait adds
// nothing to the Raft log.
//
// Goroutines: Raft's (the replica's, stopped by its Close), the loop that
// publishes this member's addresses in the member table, the status
// page's sampler, and a term's: the session manager's expiry loop, the
// chunkserver liveness loop, the repair scheduler's loop and copies, the
// Cleaner's cleanings, the Closer's seals and truncations, and the term's
// task group (releasing the locks of ended sessions, deletes of
// replicas). A term's stop with it; all stop in Close, and none starts
// once Close has begun.
//
// A Server is a library: New opens the data directory, Serve answers on a
// listener until its context ends or Close is called, Close stops every
// goroutine the server started and closes the store. There is no
// package-level state, so a test can run several servers in one process,
// each on a data directory of its own: New locks the directory
// (internal/datadir) until Close, and refuses one that is held.
//
// AddBlock creates the replicas of the new block on its write set
// (create.go) before it answers, and the deletes of a block wait while
// those creates are in flight (see chunkserver/doc.go, I4); the Closer's
// deletes go through the same deleteReplicas.
//
// Placement and degraded writes (files.go). AddBlock picks the
// write set with blockmap.Map.Pick: at random among the chunkservers with
// a volume that has room, weighted by that room (free space above the
// larger of --min-free-bytes and what --max-volume-fill leaves), on
// distinct hosts while there are enough; the same policy goes to the
// chunkservers at registration, which pick the volume the same way. With
// fewer eligible chunkservers than the file's replication but at least
// --min-replication, the block starts with fewer replicas: the file keeps
// its replication, the repair scheduler counts the block (gauge
// bfs_nameserver_under_replicated_blocks) and repairs it once the file is
// closed, and Stat, List and GetFileLocation answer the live replica
// count beside the target, so nothing claims more replicas than exist.
//
// What counts (blockmap.ReplicaState.Good, Counts). A replica is good when
// it is sealed at its block's length, on a volume in service and not
// known corrupt; it counts toward the replication when it is good and
// not on a draining chunkserver. Fsck, the gauges, the repair and the
// live replica count of Stat, List and GetFileLocation all judge by it:
// a block of a closed file with no good replica is missing, whatever
// replicas it has.
//
// Volumes (chunks.go, volumes.go). A chunkserver reports its volumes at
// registration and in every heartbeat, and names the volume of every
// replica it reports. A heartbeat that reports a volume failed drops its
// replicas from the block map at once (not at the next full report) and
// asks the repair to rescan.
//
// Re-replication (repairseams.go, nameserver/repair). The repair.Scheduler
// keeps every block at its file's replication: it copies under-replicated
// blocks chunkserver to chunkserver (ReplicateBlock), fewest replicas
// left first, deletes corrupt replicas once replaced and trims excess
// ones. It sees the server through the interfaces repairseams.go
// implements: the namespace's blocks (namespace.Store.FileBlocks, Block),
// the block map under the placement policy (blockmap.Map.PickFor), the
// chunkservers (deletes go through deleteReplicas). It is told of a
// chunkserver declared dead (Rescan, from watchChunkservers) or a volume
// failed (Rescan, from HeartBeat), a replica
// marked corrupt, a file closed (fileStore.CloseFile, every close path),
// the end of a registration's first full block report (Rescan: a
// chunkserver back from the dead may leave replicas in excess) and a new
// sealed replica (Received), and checks every block each
// --repair-interval. --repair-max-copies and
// --repair-max-copies-per-server bound the copies in flight. Its state is
// in memory: after a restart the block reports and the first pass
// rebuild it; removing a file drops its block from it (Forget).
//
// Cluster identity and replica deletion (chunks.go, safemode.go). The
// namespace creates a random cluster id when it formats its data
// directory (namespace.Store.ClusterID). Register answers it, and refuses
// (WRONG_CLUSTER) a chunkserver that presents another; every answer or
// request that destroys data carries it (a block report's obsolete list,
// DeleteBlocks, Truncate) so the chunkserver can refuse it too (see
// chunkserver/doc.go). A nameserver started on an empty or wrong data
// directory thus cannot make the chunkservers of a cluster delete
// anything.
//
// Block reports and deletes are paged so that a million blocks fit the
// default gRPC message limit: a report arrives in pages (see
// blockmap.Map.ReportPage), each answered with its own obsolete blocks
// and counted by safe mode as it arrives, and DeleteBlocks names at most
// DefaultDeletePage blocks per message.
//
// A replica is obsolete only when the namespace positively knows its
// block is gone (namespace.Store.Fate): no file has it AND its id is at or
// below the namespace's id counter, so the id was handed out by this
// namespace and has since been deleted, superseded, or never committed.
// An id above the counter was never allocated here (a namespace restored
// from an older copy, or a replica planted on a chunkserver): the replica
// is kept for the grace period (see Trust, "Unallocated blocks") and then
// deleted. A lookup that fails keeps the replica.
//
// Safe mode: a nameserver starts in safe mode, holding every replica
// deletion (no obsolete answer; every DeleteBlocks asked for meanwhile,
// by a removed file or by the closer's reconcile, is kept and sent when
// safe mode ends: safeMode.later) until the block reports have named at
// least one replica of Config.SafeModeThreshold (default 99.9 %) of the
// blocks the namespace knew at start and Config.SafeModeMinChunkservers
// (--safemode-min-chunkservers, default 0) chunkservers have sent a full
// report, or an operator calls LeaveSafeMode (bfs admin safemode leave).
// An empty namespace waiting for no chunkserver leaves at once. Fsck
// answers say when safe mode is on. Not
// held: the truncation of a replica to its closed file's length. A
// cleaning must see its replicas cut before the directory is UNLOCKED
// (I5), and the cut compares one replica, as its chunkserver describes
// it, with the namespace's own record of the file, not a guess from
// missing reports.
// Re-replication is held the same way: no copy, no trim and no delete of
// a corrupt replica while safe mode is on (repair.Config.Hold).
//
// Corrupt replicas: ReportBadReplicas (from a chunkserver's scrubber, or
// from a client that read around a bad replica, verified first: see
// Trust) marks a replica of a live block corrupt in the block map: it is logged, counted by the
// bfs_nameserver_corrupt_replicas gauge, stops counting and is no longer
// given to readers by GetFileLocation (unless every replica of the block
// is marked; see nameserver/blockmap). Block reports do not clear the
// mark. The report asks the repair to check the block: it copies the
// block from a good replica, and only once the block has its full count
// of good replicas elsewhere drops the corrupt one from the map and
// deletes it. Reports for blocks of no live file are ignored.
//
// Decommission, the chunkserver report and fsck (admin.go,
// chunkservers.go, fsck.go). Decommission records the drain in the
// namespace (DrainCmd, read back at start by loadDraining) and marks the
// chunkservers draining in the block map (blockmap.Map.SetDraining): no
// new block goes to them and
// their replicas stop counting, so the repair (asked to rescan every block
// when a mark changes) copies them away. Only
// an address the nameserver knows (live, remembered dead, or already
// draining) is accepted; a request naming an unknown one changes
// nothing. ListChunkservers reports every chunkserver known, by address,
// with its volumes, failed volumes, non-DFS use and last full report, and
// the cluster's block health (the repair's counts) on every page: the
// live ones from the block map, and the dead from a bounded list
// (deadList) that forgets an address when it registers again. The list
// is kept in the namespace too (ChunkserverCmd, written when a
// chunkserver registers for the first time or again after it died, and
// when it is declared dead; read back at start by loadChunkservers), so
// a restarted nameserver lists the dead at once, and a chunkserver
// registered before the restart that does not come back within the dead
// timeout is declared dead then. A draining chunkserver is decommissioned (safe
// to remove) when every block it holds has, on other chunkservers,
// counting replicas at least its file's replication, or belongs to no
// live file; the report counts the blocks still short. Fsck
// walks the namespace under a path (namespace.Store.Walk) a bounded
// stretch per request, the page token being the last path walked, and
// judges each block of each file against the block map: missing (no
// good replica), under-replicated (fewer counting replicas than the
// file's replication), over-replicated (more), corrupt (a replica marked
// corrupt), stale replicas (no full copy); the last block of a file open
// for write is not judged. The
// gauges bfs_nameserver_chunkservers{state} and the per-chunkserver
// capacity and free bytes are read from the same sources at scrape time.
//
// The HTTP port (statuspage.go). Config.MetricsAddr serves the
// Prometheus metrics at /metrics and the status page (nameserver/
// statuspage) everywhere else; HTTPHandler is that port for a caller with
// a listener of its own (the sandbox). The page reads the server through
// its own RPC handlers (listings, safe mode), its metrics registry, and a
// watcher of every lock transition (lockFeed, on the watchers that serve
// WatchDirLocks, fed through a channel of its own: the one in-process
// sink); it runs one goroutine, stopped in Close. Over TLS it
// answers admins only; an insecure nameserver's answers loopback clients
// only, unless Config.StatusPublic. It shows a prefix of every session id.
//
// Handlers decode a request, normalize its paths (bad ones get
// INVALID_ARGUMENT), call one domain method and encode the answer; the one
// table in status.go maps domain errors to protocol status codes.
package nameserver
