// Package nameserver is the BFS nameserver: the gRPC adapter in front of
// the namespace (nameserver/namespace), the session table
// (nameserver/session) and, in later layers, the block map and the
// directory-lock table.
//
// A Server is a library: New opens the data directory, Serve answers on a
// listener until its context ends or Close is called, Close stops every
// goroutine the server started and closes the store. There is no
// package-level state, so a test can run several servers in one process.
//
// Handlers decode a request, normalize its paths (bad ones get
// INVALID_ARGUMENT), call one domain method and encode the answer; the one
// table in status.go maps domain errors to protocol status codes.
package nameserver
