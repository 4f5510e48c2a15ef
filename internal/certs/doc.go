// Package certs makes and loads the certificates of a BFS cluster and turns
// them into mutual TLS: every daemon port and every client speaks TLS 1.3,
// and both ends of every connection present a certificate signed by the
// cluster's CA. It stands on the ground: it imports nothing of the product.
//
// # The certificates directory
//
// The layout is cockroach's (`cockroach cert`):
//
//	ca.crt              the CA certificate(s) peers are verified against
//	node.crt, node.key  a daemon's certificate (nameserver, chunkserver),
//	                    presented when it serves and when it dials another
//	                    daemon
//	client.NAME.crt,    a client's certificate for NAME (the SDK, bfs,
//	client.NAME.key     lockctl, grpcurl)
//
// The CA's private key is not in the directory: CreateCA writes it where
// it is told (--ca-key), and only making certificates needs it. ca.crt may
// hold several CA certificates (the old and the new during a rotation of
// the CA); a peer signed by any of them is accepted.
//
// Private keys are written with mode 0600 and refused (LoadNode,
// LoadClient, LoadAuthority) when their group or others may read them.
// Keys are ECDSA P-256: fast to make and to sign with, which also keeps
// the test clusters (one CA per cluster) cheap.
//
// # Identities
//
// A certificate names one identity: a kind (node, admin or client) and a
// name. It is carried in a URI subject alternative name,
//
//	bfs://nameserver/NAME   a nameserver (kind node, role nameserver)
//	bfs://chunkserver/NAME  a chunkserver (kind node, role chunkserver)
//	bfs://node/NAME         a daemon's certificate made before roles: a
//	                        chunkserver's, never a nameserver's
//	bfs://admin/NAME        an operator (force unlock, safe mode, decommission, ...)
//	bfs://client/NAME       an application (a tablet server, a file command)
//
// (NAME: the node's name, by default its first host.) Every node is of
// kind node; the role is what a chunkserver checks before it takes a
// command (only a nameserver's) and what the nameserver checks before it
// registers a chunkserver (only a chunkserver's): one chunkserver's
// certificate cannot command another.
//
// and repeated for people in the subject (CN=NAME, OU=kind, O=BFS); only
// the URI counts. A peer whose verified certificate carries no such URI, or
// more than one, is refused at the handshake. Node certificates are valid
// for serving and for dialing (server and client auth); client and admin
// certificates only for dialing, and a client accepts only a node
// certificate from a server. Names are 1 to 128 characters of letters,
// digits, '.', '_', '-' and ':' (so an IPv6 address is a node name).
//
// On a server the verified identity of the peer reaches every RPC: the
// interceptors (UnaryServerInterceptor, StreamServerInterceptor) put it in
// the request context, PeerIdentity reads it back, and HTTPIdentity does
// the same for an HTTPS handler. Deciding what an identity may do is the
// caller's business.
//
// # Reloading
//
// Creds read the certificate, its key and ca.crt when loaded, and again at
// the next handshake after any of the three files changed (its size,
// modification time or inode), so certificates and the CA are rotated by
// replacing the files, without a restart. A connection already open keeps
// the certificates it was made with. Files that do not load (a rotation
// half done: the new key beside the old certificate) leave the previous
// certificates in use, and the failure is logged once per change; the
// writers in this package replace each file atomically (a temporary file
// renamed into place) and write the key before the certificate.
//
// gRPC servers and clients use ServerCredentials and ClientCredentials.
// Other node-to-node links (the Raft transport) use ServerConfig for their
// listener and ClientConfig at each dial.
//
// Creds are safe for concurrent use.
package certs
