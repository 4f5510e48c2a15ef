// Command libbfs is the C library of BFS-Go: the Go SDK (package sdk)
// behind a C API, so that a C or C++ program (the tablet servers and the
// master of a Tera-style table store) can use the file system and its
// directory locks. It is built, never run:
//
//	go build -buildmode=c-shared -o libbfs.so ./libbfs   # or c-archive, libbfs.a
//
// bfs.h is the API, hand-written and documented there: status codes,
// ownership of memory, thread safety. Its prototypes are checked by the
// compiler against the functions this package exports (internal.h gives
// cgo the const types to match them), so the header cannot drift from the
// library. cpp/ holds the C++ adapter over it (bfs_dfs.h), which is
// Tera's DFS plugin when built as libbfs_dfs.so; python/ a ctypes binding
// (bfs.py) and its test; testdata/ the C and C++ test programs (the Tera
// plugin test among them); bench/ the C and C++ benchmark programs of
// bfsbench's capi and tera. BUILD.md, "The C API" and "Running Tera on
// BFS-Go", says how to build, test and benchmark it.
//
// # Layout
//
// Each exported function is an adapter: it decodes its C arguments,
// calls the SDK and encodes the result and a status code. fs.go holds the
// file system handles, namespace.go the namespace calls, file.go files,
// lock.go directory locks and their lost-lock callbacks, errors.go the
// one table from the SDK's errors to the codes of bfs.h, glue.c the C
// side (per-thread messages, code names, frees, the callback trampoline).
//
// # Invariants
//
//   - No Go pointer reaches C. C holds integer handles (handles.go): one
//     counter for every kind, never reused, so a stale, forged or
//     mistyped handle finds nothing and is BFS_ERR_BAD_HANDLE.
//   - C memory is only borrowed during a call: strings are copied in,
//     buffers are read or written in place and never kept. Memory given
//     to C comes from malloc and is freed by C (bfs_free and friends).
//   - A panic never unwinds into C: every export defers guard, which
//     turns it into BFS_ERR_INTERNAL.
//   - Error messages are per C thread: an exported function runs on the
//     calling C thread, so the C helper it calls stores the message in
//     that thread's slot (a pthread key, freed when the thread exits).
//   - A lost-lock callback runs at most once, never after its lock was
//     released (bfs_unlock and bfs_fs_close wait for one that is running,
//     unless called from it).
//
// # Concurrency
//
// Every export may be called from any number of C threads. The handle
// tables and each file system's sets of files and locks have their own
// mutexes, held only for map operations. A file's calls are serialized by
// its own lock (pread takes it shared, as the SDK's ReadAt allows), since
// an SDK Writer or Reader is for one goroutine at a time. Closing a file
// system cancels the context of its calls, so none outlives it for long.
package main
