// Package bfscmd is the command tree of the bfs binary: the daemons
// (nameserver, chunkserver, sandbox) and the file commands in the spirit of
// Baidu's bfs_client (ls, stat, mkdir, touchz, rm, rmr, mv, du, chmod, put,
// get, cat, location), fsck, and the operators' admin commands (safemode,
// report, decommission, fsck), and cert, which makes and lists the
// certificates of mutual TLS. The main package only calls Main, so the
// whole tool runs in-process in tests. put writes PATH._COPYING_ and
// renames it to PATH once it is closed, so a put that fails leaves
// nothing under PATH; admin report shows every chunkserver's volumes.
//
// Every connection is mutual TLS with the certificates of --certs-dir,
// $BFS_CERTS_DIR or ./bfs-data/certs (certs.FindDir): file commands present
// client.bfs.crt, admin commands client.admin.crt, unless --user names
// another; daemons present node.crt. --insecure is plaintext, for a cluster
// run with --insecure; the sandbox makes its own certificates unless told
// --insecure.
//
// Exit codes: 0 on success, 1 when the file system refused or failed an
// operation (and for fsck when a block has no good replica), 2 for a
// usage error (unknown command or flag, wrong number of arguments, a
// malformed mode). Errors go to stderr as "bfs: <error>".
// Names, paths, holders and errors are printed with their control
// characters escaped (package internal/printable): a name can hold any
// character but NUL, and must not rewrite the terminal around it.
//
// Main keeps no state between calls and may run concurrently, except that
// daemon commands set glog's (process-wide) flags.
package bfscmd
