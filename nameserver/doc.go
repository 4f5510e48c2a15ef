// Package nameserver is the BFS nameserver: the gRPC adapter in front of
// the namespace and its directory locks (nameserver/namespace, dirlock),
// the session table (nameserver/session) and the block map
// (nameserver/blockmap); the closer, which closes files open for write once
// their replicas have reported them sealed, seals them itself when the
// writer finishes or is gone, and decides a file's length from what the
// replicas hold, never from a writer's claim; and the cleaning coordinator,
// which fences a directory's old holder and persists UNLOCKED only once
// every live replica of the files it closed has the agreed length.
//
// Goroutines: the session manager's expiry loop, the chunkserver liveness
// loop, and the closer's work (seals, truncates, cleanings) all stop in
// Close.
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
// those creates are in flight (see chunkserver/doc.go, I4).
//
// Handlers decode a request, normalize its paths (bad ones get
// INVALID_ARGUMENT), call one domain method and encode the answer; the one
// table in status.go maps domain errors to protocol status codes.
package nameserver
