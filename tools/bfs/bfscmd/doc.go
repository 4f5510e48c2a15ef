// Package bfscmd is the command tree of the bfs binary: the daemons
// (nameserver, chunkserver, sandbox) and the file commands in the spirit of
// Baidu's bfs_client (ls, stat, mkdir, touchz, rm, rmr, mv, du, chmod, put,
// get, cat, location), fsck, and the operators' admin commands (safemode,
// report, decommission, fsck). The main package only calls Main, so the
// whole tool runs in-process in tests. put writes PATH._COPYING_ and
// renames it to PATH once it is closed, so a put that fails leaves
// nothing under PATH; admin report shows every chunkserver's volumes.
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
