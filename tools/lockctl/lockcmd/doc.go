// Package lockcmd is the command tree of lockctl, the operators' tool for
// directory locks (SPEC §6, §8): lock, unlock, status, list, watch,
// history and sessions. The main package only calls Main, so the whole
// tool runs in-process in tests. It speaks mutual TLS with the client
// certificate of --user (default admin) in --certs-dir, $BFS_CERTS_DIR or
// ./bfs-data/certs, or plaintext with --insecure.
//
// Output is a table for people by default; with -o json every command
// prints one JSON document on stdout, except watch and the listings (list,
// sessions, history), which print one JSON object per line. The listings
// are fetched a page at a time and printed as the pages arrive (format.go,
// stream), so 100,000 locks start printing at once and --limit stops
// early. Errors and progress go to stderr.
// Paths, holders, session ids and errors are printed with their control
// characters escaped (package internal/printable), so that no name can
// make a table lie; JSON escapes them by itself.
//
// Exit codes (the Exit* constants) are decided with errors.Is on the SDK's
// sentinels, never from message text:
//
//	0  ok
//	1  any other error (nameserver unreachable, not a directory, ...)
//	2  usage: unknown command or flag, bad flag value, bad path
//	3  locked: another holder has the lock (sdk.ErrLocked), also after
//	   --wait --timeout ran out
//	4  cleaning: the directory is being cleaned (sdk.ErrCleaning), also
//	   when unlock --wait ran out of time before UNLOCKED
//	5  not found (sdk.ErrNotFound)
//	6  lost: a lock held by `lockctl lock` was taken away or its session
//	   lost (sdk.ErrLockLost), or an --epoch named an old lock
//	   (sdk.ErrStaleEpoch)
//
// A lockctl process has at most one session, opened on first need and
// closed on exit. So a non-forced unlock can only release a lock of that
// fresh session, which never holds anything: unlocking someone else's
// lock needs --force, and lockctl says so (exit 3).
//
// Main keeps no state between calls and may run concurrently.
package lockcmd
