// Package benchcmd is the command tree of bfsbench, the benchmarks of
// SPEC §8. Every subcommand either starts what it measures (an in-process
// sandbox: a nameserver and three chunkservers on loopback, data in a fresh
// temporary directory, durable writes and mutual TLS as by default;
// plaintext with --insecure, and for capi, whose libbfs takes no
// certificates yet) or targets a running cluster with --nameserver (and
// --certs-dir or --insecure), prints progress on stderr, and reports through
// one table format, then a summary of the figures the issues name against
// their targets (targets.go); --csv writes every result for machines and
// --plot draws the benchmark's chart (plot.go).
//
// bfsbench is a Go module of its own, so that the product's module graph
// never holds etcd or the plotting library; it builds against the
// repository's packages through a replace directive.
//
// What each number is, exactly:
//
//   - meta: closed-loop creates, create+delete pairs and stats; each client
//     has its own connection, session and directory. create+delete is
//     measured in an empty unlocked directory and in an empty directory the
//     client's session has locked, alternating in quarters of --duration (ABBA), and
//     reported with their throughput ratio.
//   - locks: closed-loop SDK LockDir + Lock.Unlock cycles, each client on its
//     own directory with its own session. With --vs-etcd, the same workload
//     runs against an embedded one-member etcd (fsync on, data beside the
//     cluster's) through concurrency.Mutex, each client with its own
//     connection, session and key prefix; bfs and etcd alternate in halves
//     of --duration and the table gives their throughput ratio.
//   - io: one file of --size put (SDK Create, 1 MiB writes, Close) and got
//     (Open, 1 MiB reads, verified), per trial, next to a raw Go loop on the
//     same disk: 1 MiB writes and one fdatasync at the end (a put syncs each
//     replica once, with its last packet), then the file read back after
//     posix_fadvise(DONTNEED) dropped it from the page cache (checked with
//     mincore). The chunkservers' files are dropped too before the get. The
//     ratios are put / (raw write / replication) and get / raw read.
//   - seal: per block, 64 KiB written and synced, then a 256 KiB packet
//     written and not synced; the chunkserver Seal RPC is sent to every
//     replica at once, as the nameserver's closer does, and the time until
//     the nameserver has BlockReceived from all of them and has committed
//     the close is observed with FinishFile(wait), which the nameserver
//     answers on that event. Each Seal RPC's round trip is reported too.
//   - fence: a holder locks a directory and opens K files in it (3 replicas
//     each, 4 KiB synced and a 256 KiB packet unsynced); a master's
//     UnlockDir(Force, WaitUnlocked) is timed until it answers UNLOCKED, and
//     the time until the holder's Lock.Done closes is reported too.
//   - expiry: a holder opens a session with raw RPCs, locks a directory,
//     sends one last KeepAlive and goes silent; a second client blocked in
//     LockDir(WaitForLock) is timed from just before that KeepAlive until it
//     holds the lock, against the target TTL + 1s.
//   - scale: a nameserver in a process of its own (bfsbench re-executed,
//     see scaleserver.go) gets --locks directories made and locked by
//     --sessions raw-RPC sessions, each directory also unlocked and locked
//     again so that it has one lock history entry; then every lock is
//     listed through the SDK's AllDirLocks and through lockctl -o json list
//     (lockcmd.Main in this process, lines counted), each checked to see
//     them all; the nameserver's VmRSS is read before and after the locks,
//     and their difference divided by the locks is the RSS per lock.
//   - repair: a sandbox of five chunkservers gets --size bytes in files of
//     --file-size with replication 3; the raw disk's sequential write and
//     read are measured as in io, and --putters clients put files of
//     --put-size for --put-time (put latencies without a repair). Then the
//     chunkservers' files are dropped from the page cache and the
//     chunkserver holding most replicas is stopped. From the nameserver
//     declaring it dead (a 1 s dead timeout) until every file's blocks
//     have 3 good replicas again, with no client writing, the bytes of the
//     replicas it held over the time taken is the repair throughput, set
//     against raw write / 2 (each copy reads once and writes once on the
//     one disk). A second chunkserver is then stopped while the clients
//     put files until that repair is over: put latencies during a repair,
//     and the repair's throughput while it yields to them.
//   - tls: two sandboxes at once, one with mutual TLS and one in plaintext
//     (even with --nameserver, as repair); lock+unlock cycles and creates
//     with each --clients value, alternating between them in eighths of
//     --duration (plaintext, TLS, TLS, plaintext, twice), and a put of --size with
//     3 replicas --trials times on each, alternating which goes first; the
//     TLS/plaintext throughput ratios are what TLS costs.
//   - capi: libbfs from a C process (libbfs/bench/bench.c) beside the SDK
//     from a Go process (this binary run again, capiloop.go): lock+unlock
//     cycles alternating in eighths of --duration, and files of --size
//     written in 1 MiB writes, alternating which goes first.
//   - tera: libbfs_dfs.so, Tera's DFS plugin, loaded by a C++ process
//     (libbfs/bench/dfs_bench.cc) as Tera's loader loads it and called
//     through Tera's leveldb::Dfs, beside the SDK from a Go process: per
//     trial each writes one file of --size in --chunk writes and closes it
//     (timed from the open to the close), then reads it back in --chunk
//     reads after the chunkservers' files were dropped from the page
//     cache; which side goes first alternates. The medians' ratios,
//     plugin over SDK, are held to 0.8x.
//   - all: each of the above on a fresh cluster, with defaults sized for
//     under five minutes on two cores, etcd included; --plot-dir gets every
//     chart.
//
// Every benchmark checks what it measured (file sizes, bytes read back, the
// fenced writer refused, epochs) and reports failures as errors rather than
// as fast results.
package benchcmd
