/*
 * What the library's Go files need from C beyond bfs.h: const types for the
 * exported signatures (cgo writes a parameter's C type by the name of its Go
 * type, and has no const of its own, so these typedefs let the exports
 * match bfs.h exactly; the compiler checks every prototype of bfs.h against
 * the function Go exports) and the helpers of glue.c.
 */
#ifndef BFS_INTERNAL_H_
#define BFS_INTERNAL_H_

#include <stdlib.h>
#include "bfs.h"

typedef const char bfs__cchar;
typedef const void bfs__cvoid;
typedef const bfs_options bfs__coptions;

/* Sets the calling thread's last error message to msg[0:n]. */
void bfs__set_error(const char* msg, size_t n);

/* Calls fn for the lock's loss, marking the thread as running the callback
 * of lock for bfs__in_callback. arg is the caller's void*, which Go keeps
 * as an integer: whatever it holds, Go's garbage collector must not take
 * it for a pointer. */
void bfs__call_lost(bfs_lock_lost_fn fn, bfs_lock lock, int code, const char* message, uintptr_t arg);

/* Reports whether the calling thread is running the lost-lock callback of
 * lock. */
int bfs__in_callback(bfs_lock lock);

#endif /* BFS_INTERNAL_H_ */
