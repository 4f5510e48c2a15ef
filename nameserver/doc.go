// Package nameserver is the BFS nameserver: the gRPC adapter in front of
// the namespace and its directory locks (nameserver/namespace, dirlock),
// the session table (nameserver/session), the block map
// (nameserver/blockmap), and the closer of files open for write
// (nameserver/fileclose), all wired together here.
//
// The directory-lock cleaning is dirlock's Cleaner, which drains a
// cleaning's files through fileclose's Closer; each of them sees the
// nameserver only through interfaces it declares, which seams.go
// implements: the namespace as the Cleaner's Store and the Closer's
// Files, the block map as the Closer's Replicas, the chunkservers' gRPC
// clients as its Chunkservers. Every cleaning starts in clean and its end
// is reported to cleaned (locks.go).
//
// Goroutines: the session manager's expiry loop, the chunkserver liveness
// loop, the Cleaner's cleanings, the Closer's seals and truncations, and
// the server's own task group (releasing the locks of ended sessions,
// deletes of replicas) all stop in Close, and none starts once Close has
// begun.
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
// Handlers decode a request, normalize its paths (bad ones get
// INVALID_ARGUMENT), call one domain method and encode the answer; the one
// table in status.go maps domain errors to protocol status codes.
package nameserver
