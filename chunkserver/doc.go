// Package chunkserver is the BFS chunkserver: the gRPC adapter in front
// of its volumes (a volume.Set: a blockstore.Store per data directory,
// one per disk), and the chunkserver's side of its relation with the
// nameserver.
//
// # Volumes
//
// bfs chunkserver --data DIR1,DIR2,... serves one volume per directory
// (chunkserver/volume): a block has one replica on the chunkserver, on
// the volume that holds it; a new one goes to a volume picked at random
// by free space above what the nameserver's placement policy (sent at
// registration) keeps free. Registration and every heartbeat describe
// each volume (state, capacity, free, used, blocks) and every replica
// reported names its volume. A volume that fails its check after an I/O
// error is out of service at once: its replicas are no longer served or
// reported, and a heartbeat goes out at once so that the nameserver
// stops counting them. So is one whose disk hangs: a check that does not
// finish within Config.VolumeCheckTimeout (--volume-check-timeout,
// default 30 s) fails it, and its stalled readers are let go (see
// chunkserver/volume). A full one takes no new replica until space is
// freed. Past --failed-volumes-tolerated failed volumes (default -1:
// while one is left) Serve stops with an error saying how many failed
// and why, and the daemon exits non-zero. HDFS's default
// (dfs.datanode.failed.volumes.tolerated) is 0, a datanode stopping at
// its first failed disk: that turns the loss of one disk into that of
// every disk of the machine, all to be re-replicated, while the failed
// disk's replicas are re-made either way.
//
// With Config.TLS both its ports take only peers with a certificate of
// the cluster's CA (internal/daemon), each RPC's context carrying the
// peer's identity (certs.PeerIdentity), and it dials the nameserver and
// the sources of its copies with its node certificate, which must carry
// the chunkserver role (bfs cert create-node --role chunkserver; one made
// before roles is taken, with a warning; a nameserver's is refused).
//
// # Trust
//
// A chunkserver acts only on the nameserver's word (SPEC §10; trust.go).
//
//   - Write and Read need a block token (internal/blocktoken): a
//     bfspb.BlockToken the nameserver signed with HMAC-SHA256, carried in
//     the call's metadata (bfs-block-token-bin), naming the block, the
//     access (a write token reads too), the identity it was issued to
//     (the peer must be that one) and a deadline on the nameserver's
//     clock. A Write stream's token is checked at its first packet, and
//     the stream writes only that block; a stream outlives its token
//     (the nameserver's Seal, not the token, ends a writer). Refusals are
//     PERMISSION_DENIED (no token, a forged or foreign one, another block
//     or peer, expired); a chunkserver with TLS that has no keys yet (not
//     registered) answers UNAVAILABLE. A token whose key the chunkserver
//     does not hold yet waits up to 3 s for it: the nameserver counts a
//     chunkserver registered, and hands out its tokens, before the answer
//     with the keys has reached it. The keys come with the answers to
//     Register and to every heartbeat, with the nameserver's clock: a
//     deadline is judged on that clock as last learned plus the time
//     elapsed on this chunkserver's monotonic clock, never on its own
//     wall clock (see internal/blocktoken, "Clocks").
//   - CreateBlock, Seal, Truncate, DeleteBlocks, ReplicateBlock and
//     VerifyBlock are taken only from a peer whose certificate has the
//     nameserver role (PERMISSION_DENIED otherwise, counted by
//     bfs_chunkserver_refused_total), before the cluster id and the
//     leader's term are checked. All nodes' certificates are of kind node;
//     the role (bfs://nameserver/NAME, bfs://chunkserver/NAME) is what
//     tells a nameserver from a chunkserver, so no chunkserver, whatever
//     it registers as, can command another.
//   - A copy (ReplicateBlock) reads only from the source the nameserver
//     named: the request names the identity that registered the source
//     with the nameserver, and the target checks the certificate the
//     source presents on the connection before it reads a byte. It reads
//     with the read token the request carries, issued to the target.
//   - VerifyBlock reads a replica whole for the nameserver, which asks
//     before it believes someone else's report that the replica is bad;
//     a replica that fails is marked and reported like the scrubber's.
//   - GetBlockInfo answers any peer of the cluster: it tells sizes, not
//     bytes.
//
// An insecure chunkserver (--insecure) knows no identities and skips
// every check that needs one (daemon logs that loudly at start); it
// still checks tokens once the nameserver has handed it keys, and one
// that runs without a nameserver (no keys) serves everyone.
//
// # Data path
//
// CreateBlock makes the empty replica of a block the nameserver has just
// allocated; Write never creates one. Write takes a stream of packets of
// one block and acknowledges every packet in order (OK, SEALED,
// NOT_FOUND for a block with no replica here, INVALID_ARGUMENT for a gap,
// a wrong offset or a retransmit that does not match what is stored,
// CORRUPT for a bad checksum); packets are applied on the handler's
// goroutine while a second goroutine, owned by the handler, sends the
// acks. A packet's bytes are copied once on their way from the
// transport to the store: the server's codec (codec.go) decodes write
// packets by hand into a pooled buffer, and gRPC's buffers come from a
// pool that does not clear them (bufpool.go). Read streams a verified
// range in 1 MiB chunks. Seal, Truncate, DeleteBlocks and GetBlockInfo
// are one store call each; concurrent seals share the store's group
// commit. Status codes travel in responses (status.go is the one table
// mapping store errors to them); gRPC errors mean transport failures
// only.
//
// A packet with the sequence number of one already stored is
// acknowledged again only if its bytes are exactly what the replica holds
// at its offset (the store reads them back and compares): a second
// writer, or a confused retry, is refused rather than told that bytes are
// stored which are not. Each stream has its own writer id
// (blockstore.WriterID); a refusal names the replica's sequence numbers
// only to the stream whose packet the replica applied last. Any other
// stream gets one and the same INVALID_ARGUMENT text for a gap, a wrong
// offset and a mismatched retransmit, naming no number but the block's,
// so it cannot learn where the writer is.
//
// # Limits
//
// Every gRPC message received or sent is bounded by Config.MaxMessageSize
// (--max-message-size, 4 MiB: packets are 256 KiB, read chunks 1 MiB,
// reports paged to fit): gRPC refuses a bigger one RESOURCE_EXHAUSTED
// before any handler, and internal/daemon's stats handler counts it. A
// Write stream that waits longer than Config.WriteIdleTimeout
// (--write-idle-timeout, a minute) for its next packet is ended,
// RESOURCE_EXHAUSTED with limit.WriteIdle in its trailer, after the
// acks of what it sent (daemon.IdleStreams: a reader goroutine receives
// for the handler, so the wait can end without cancelling the stream;
// the clock runs only while the handler waits, never while it applies,
// and a packet that arrives as the time runs out is dropped, never half
// applied). The SDK opens a new stream when its writer goes on. Both
// are counted in bfs_chunkserver_limit_refusals_total{limit}.
//
// # Nameserver
//
// Serve registers with the nameserver (retrying with backoff until it
// answers), sends a full block report, then heartbeats every
// HeartbeatInterval and reports every ReportInterval, deleting the blocks
// a report answer calls obsolete. A full report goes in pages of
// DefaultReportPage replicas (one message each, within gRPC's default 4
// MiB), in order, each answered with the obsolete blocks among its own; a
// page that fails ends the report, which is sent again from its first
// page at the next heartbeat. A heartbeat answered with reregister
// starts over with Register and a full report. Every replica sealed here,
// by a Seal RPC or a last packet, is reported with BlockReceived at once;
// reports that pile up while a call is in flight go in the next call, and
// a failed call is retried with backoff until the nameserver answers.
//
// Cluster identity (cluster.go): at its first registration the
// chunkserver records the nameserver's cluster id in CLUSTER_ID in each
// of its volumes (written to a temporary file, fsynced, renamed, the
// directory fsynced; a new volume is given it at start) and presents it
// at every later Register. A volume whose CLUSTER_ID names another
// cluster than the others is taken out of service, nothing on it deleted. From then
// on it does not register with a nameserver that answers another id (it
// logs both ids and retries with backoff, so an operator can fix a wrong
// --nameserver address or a nameserver's wrong --data directory without a
// restart), applies no obsolete list that comes with another id, and
// refuses (WRONG_CLUSTER) a DeleteBlocks or Truncate that names another.
// A request naming no cluster is not checked for it (it must come from a
// nameserver's certificate all the same: see Trust). A chunkserver never
// registered has no id and nothing to protect.
//
// # Scrubber
//
// With Config.ScrubRate > 0 (bfs chunkserver --scrub-rate, bytes per
// second) Serve runs a scrubber per volume (scrub.go), each at that rate
// and stopping when its volume fails: it walks the volume's sealed
// replicas in block-id order, reading each whole through the store (which checks
// every chunk's CRC32C), and sleeps on Config.Clock after every piece read
// to hold the rate. Its position, the last replica verified, is written
// atomically (fsync, rename) to SCRUB_POSITION in the volume's directory every
// 64 replicas or 30 seconds, at the end of a pass and when it stops, so a
// restart resumes after it; a pass that reaches the last replica starts
// again at the first, no sooner than an hour after the previous pass
// started (a store holding little is not read over and over). A replica that fails is marked corrupt in the store
// (blockstore.MarkCorrupt: every later read of it answers CORRUPT, whatever
// its bytes) and counted once; it is reported to the nameserver
// (ReportBadReplicas, bad.go: queued without blocking, sent from the first
// registration on, retried with backoff) at every pass, so a restarted
// nameserver learns of it again. A Read that finds a checksum mismatch in
// a sealed replica marks and reports it the same way. The nameserver stops
// counting the replica, copies its block from a good replica elsewhere
// and then deletes it (nameserver/repair). The mark lives in
// memory: after a restart the next pass finds the replica again. Progress is exported as the
// bfs_chunkserver_scrub_* metrics.
//
// # Copies
//
// ReplicateBlock (replicate.go) is how the nameserver re-makes a lost
// replica: this chunkserver, the target, asks the source for its replica's
// info (it must be sealed at the size asked), creates an empty replica,
// checks that the source's certificate is the one the nameserver named
// (Trust), reads the source's bytes with Read (and the request's read
// token) and writes them through the store as packets, then seals (syncing) and reports the copy with BlockReceived.
// Every ReadChunk carries the CRC32C of its bytes, computed by the source
// from bytes it verified against its stored checksums; the target checks
// it on arrival, and the store computes its own chunk checksums from the
// bytes it keeps, so a bit flipped on the source's disk, on the wire or in
// between is caught. A copy that fails deletes its partial replica. At
// most Config.MaxCopies (--max-copies) copies run at once, beyond that and
// for a block already being copied the answer is RESOURCE_EXHAUSTED.
// Copies yield to clients (clients.go): while a client's write or read
// stream is open, or one ended less than a second ago, all copies
// together take in, and send as sources (a copy's Read says it is one),
// at most Config.CopyRate (--copy-rate) bytes per second
// (golang.org/x/time/rate); while clients are idle copies run at the
// disk's speed. A copy runs on its RPC's goroutine and ends with the RPC
// (Close stops gRPC, which cancels it).
//
// # Invariants
//
//   - I4 (no byte accepted for a sealed block) is the store's; the server
//     never writes around it.
//   - No byte is accepted for a block the nameserver deleted either,
//     whatever order packets, seals and deletes arrive in. Replicas are
//     created at AddBlock (CreateBlock), never by a packet: a packet for
//     a block the store has no record of is refused (NOT_FOUND). A delete
//     drops the block's record, so nothing writes the block again; a Seal
//     that finds no record leaves one sealed at 0, which refuses packets.
//     What remains is a create arriving after the delete, which would
//     bring back an empty replica that a late packet could fill. The
//     nameserver rules it out: it holds back every DeleteBlocks (and
//     every "obsolete" answer to a block report) of a block while
//     CreateBlock calls for it are in flight, and sends them once the
//     calls have ended. A call that ended on the nameserver's side by its
//     deadline is dead here too: the store checks the call's context
//     after the block's entry is in its map and before creating files, so
//     a delete sent after the caller gave up either finds the replica
//     (and waits for it) or follows a create that did nothing. Only a
//     create stuck on a connection that broke could slip past, and its
//     empty replica is reported obsolete and deleted by the next block
//     report. So a create never outlives a delete, and (tombstones being
//     unneeded) the store keeps no record of deleted blocks.
//   - A sealed replica is reported to the nameserver (BlockReceived, or a
//     block report after a restart or re-registration) as long as the
//     server runs.
//
// # Concurrency and lifetime
//
// A Server is a library: New opens the volumes, Serve answers on a
// listener until its context ends, Close is called or too many volumes
// fail, Close stops everything the server started and closes the
// volumes. Serve owns, besides gRPC's and the metrics server, the
// membership loop (register, heartbeat, report), the BlockReceived
// reporter, the bad-replica reporter (both an outbox: outbox.go), a
// scrubber per volume and a watch of the volumes' fatal failure; all
// stop before Serve returns. The volume.Set owns its checks.
// Time is read through Config.Clock, so tests drive heartbeats, reports
// and retries with a fake clock. There is no package-level state.
package chunkserver
