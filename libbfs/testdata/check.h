/* Checks shared by the C and C++ test programs of libbfs. A failed check
 * prints where, what was expected and the library's message, and exits 1.
 * The programs read the nameserver's address from BFS_NAMESERVER and put
 * everything under BFS_TEST_ROOT. */
#ifndef BFS_TEST_CHECK_H_
#define BFS_TEST_CHECK_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bfs.h"

#define CHECK_CODE(want, expr)                                                          \
  do {                                                                                  \
    int got_ = (expr);                                                                  \
    if (got_ != (want)) {                                                               \
      fprintf(stderr, "%s:%d: %s\n  want %s\n  got  %s\n  message: %s\n", __FILE__,     \
              __LINE__, #expr, bfs_strerror(want), bfs_strerror(got_),                  \
              bfs_last_error_message());                                                \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

#define CHECK_OK(expr) CHECK_CODE(BFS_OK, expr)

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

static inline const char* env_or_die(const char* name) {
  const char* v = getenv(name);
  if (v == NULL || v[0] == '\0') {
    fprintf(stderr, "%s is not set\n", name);
    exit(2);
  }
  return v;
}

static inline double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif /* BFS_TEST_CHECK_H_ */
