// The C half of libbfs: per-thread error messages, static code names, the
// frees of what the library allocates, and the trampoline calling lost-lock
// callbacks (Go cannot call a C function pointer).

#include <pthread.h>
#include <string.h>

#include "internal.h"

// Each thread's last error message lives in a malloc'd buffer held by a
// thread-specific key, so that it is freed when the thread exits.
static pthread_key_t message_key;
static pthread_once_t message_once = PTHREAD_ONCE_INIT;

static void make_message_key(void) { pthread_key_create(&message_key, free); }

void bfs__set_error(const char* msg, size_t n) {
  pthread_once(&message_once, make_message_key);
  char* old = pthread_getspecific(message_key);
  char* m = realloc(old, n + 1);
  if (m == NULL) {
    // Keep the old buffer, which still holds an older message: better a
    // stale message than none. Empty it so it does not mislead.
    if (old != NULL) old[0] = '\0';
    return;
  }
  memcpy(m, msg, n);
  m[n] = '\0';
  pthread_setspecific(message_key, m);
}

const char* bfs_last_error_message(void) {
  pthread_once(&message_once, make_message_key);
  const char* m = pthread_getspecific(message_key);
  return m != NULL ? m : "";
}

const char* bfs_strerror(int code) {
  switch (code) {
    case BFS_OK: return "BFS_OK: success";
    case BFS_ERR_INVALID_ARGUMENT: return "BFS_ERR_INVALID_ARGUMENT: invalid argument";
    case BFS_ERR_BAD_HANDLE: return "BFS_ERR_BAD_HANDLE: handle not open";
    case BFS_ERR_NOT_FOUND: return "BFS_ERR_NOT_FOUND: no such file or directory";
    case BFS_ERR_EXISTS: return "BFS_ERR_EXISTS: file exists";
    case BFS_ERR_NOT_DIRECTORY: return "BFS_ERR_NOT_DIRECTORY: not a directory";
    case BFS_ERR_IS_DIRECTORY: return "BFS_ERR_IS_DIRECTORY: is a directory";
    case BFS_ERR_NOT_EMPTY: return "BFS_ERR_NOT_EMPTY: directory not empty";
    case BFS_ERR_PERMISSION_DENIED: return "BFS_ERR_PERMISSION_DENIED: permission denied";
    case BFS_ERR_LOCKED: return "BFS_ERR_LOCKED: directory locked by another session";
    case BFS_ERR_UNLOCKED: return "BFS_ERR_UNLOCKED: directory not locked";
    case BFS_ERR_CLEANING: return "BFS_ERR_CLEANING: directory being cleaned";
    case BFS_ERR_STALE_EPOCH: return "BFS_ERR_STALE_EPOCH: fenced by a lock this client lost";
    case BFS_ERR_LOCK_LOST: return "BFS_ERR_LOCK_LOST: directory lock lost";
    case BFS_ERR_SESSION_EXPIRED: return "BFS_ERR_SESSION_EXPIRED: session expired";
    case BFS_ERR_SEALED: return "BFS_ERR_SEALED: block sealed under the writer";
    case BFS_ERR_NOT_OPEN: return "BFS_ERR_NOT_OPEN: file not open for write";
    case BFS_ERR_NOT_LEADER: return "BFS_ERR_NOT_LEADER: nameserver is not the leader";
    case BFS_ERR_UNAVAILABLE: return "BFS_ERR_UNAVAILABLE: service unavailable";
    case BFS_ERR_TIMEOUT: return "BFS_ERR_TIMEOUT: timed out";
    case BFS_ERR_CLOSED: return "BFS_ERR_CLOSED: file system handle closed";
    case BFS_ERR_CORRUPT: return "BFS_ERR_CORRUPT: data corrupt";
    case BFS_ERR_UNIMPLEMENTED: return "BFS_ERR_UNIMPLEMENTED: not supported";
    case BFS_ERR_INTERNAL: return "BFS_ERR_INTERNAL: internal error";
    case BFS_ERR_UNKNOWN: return "BFS_ERR_UNKNOWN: error";
    case BFS_ERR_RESOURCE_EXHAUSTED: return "BFS_ERR_RESOURCE_EXHAUSTED: no space left, or a limit reached";
  }
  return "BFS_ERR_?: unknown status code";
}

void bfs_free(void* p) { free(p); }

void bfs_dirents_free(bfs_dirent* entries, size_t count) {
  if (entries == NULL) return;
  for (size_t i = 0; i < count; i++) free(entries[i].name);
  free(entries);
}

void bfs_lock_info_free(bfs_lock_info* info) {
  if (info == NULL) return;
  free(info->holder);
  free(info->session_id);
  info->holder = NULL;
  info->session_id = NULL;
}

// The lost-lock callback a thread is running, 0 when none: what lets
// bfs_unlock called from a callback skip waiting for that callback to
// return (itself).
static __thread bfs_lock callback_lock;

void bfs__call_lost(bfs_lock_lost_fn fn, bfs_lock lock, int code, const char* message, uintptr_t arg) {
  bfs_lock outer = callback_lock;
  callback_lock = lock;
  fn(lock, code, message, (void*)arg);
  callback_lock = outer;
}

int bfs__in_callback(bfs_lock lock) { return lock != 0 && callback_lock == lock; }
