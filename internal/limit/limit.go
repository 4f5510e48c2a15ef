// Package limit names the bounds the daemons hold their clients to (SPEC
// §10: message sizes, streams and sessions per identity are bounded).
// Every limit a request hits is answered RESOURCE_EXHAUSTED, in the
// answer's status or, for a stream, as its gRPC status with the limit's
// name in the Trailer, and counted under its name in the daemon's
// refusal counter (bfs_nameserver_limit_refusals_total{limit},
// bfs_chunkserver_limit_refusals_total{limit}). BUILD.md ("Limits")
// lists them with their flags and defaults.
//
// It stands on the ground: the daemons and the SDK both import it, so a
// client can tell which limit ended its stream without reading the
// message.
package limit

// Name is a limit: the label value of the refusal counters and the value
// of the Trailer.
type Name string

// The limits.
const (
	// MessageSize: a gRPC message received or sent over the daemon's
	// largest (--max-message-size), on either daemon.
	MessageSize Name = "message_size"
	// WatchStreams: an identity's WatchDirLocks streams that watch a
	// prefix (--max-watches-per-identity).
	WatchStreams Name = "watch_streams"
	// WatchStreamsTotal: the WatchDirLocks streams of a prefix of every
	// identity together (--max-watches).
	WatchStreamsTotal Name = "watch_streams_total"
	// SessionWatchStreams: the WatchDirLocks streams filtered to one
	// session (--max-watches-per-session).
	SessionWatchStreams Name = "session_watch_streams"
	// WatchLag: a watcher that fell further behind than the events a
	// watch keeps (--watch-buffer) is cut off.
	WatchLag Name = "watch_lag"
	// SessionsPerIdentity: the live sessions one identity holds
	// (--max-sessions-per-identity).
	SessionsPerIdentity Name = "sessions_per_identity"
	// Sessions: the live sessions of every identity (--max-sessions).
	Sessions Name = "sessions"
	// LockWaits: an identity's LockDir and UnlockDir calls waiting at
	// once (--max-lock-waits-per-identity).
	LockWaits Name = "lock_waits"
	// WriteIdle: a chunkserver's Write stream that sent no packet for
	// --write-idle-timeout is ended.
	WriteIdle Name = "write_idle"
)

// Trailer is the trailer key of a stream a limit ended; its value is the
// limit's Name.
const Trailer = "bfs-limit"
