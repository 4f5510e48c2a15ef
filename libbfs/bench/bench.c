/* The C side of bfsbench's capi benchmark: the same workloads as its Go
 * SDK side, through libbfs.
 *
 *   bench lock NAMESERVER DIR DURATION_MS
 *     lock+unlock cycles of DIR (bfs_lock_dir without wait, bfs_unlock),
 *     back to back for DURATION_MS, after one cycle not counted. Prints
 *     "cycles N elapsed_ns E", then each cycle's latency in ns, one a line.
 *   bench write NAMESERVER PATH BYTES
 *     creates PATH (replacing it) and writes BYTES in writes of 1 MiB, then
 *     closes it (every replica sealed, the file closed). Prints
 *     "bytes B elapsed_ns E", timed from before the create to after the
 *     close.
 *
 * Exits 1 with the library's message on any failure. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bfs.h"

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void check(int code, const char* what) {
  if (code != BFS_OK) {
    fprintf(stderr, "bench: %s: %s: %s\n", what, bfs_strerror(code), bfs_last_error_message());
    exit(1);
  }
}

static bfs_fs open_fs(const char* nameserver) {
  bfs_options o;
  memset(&o, 0, sizeof o);
  o.nameservers = nameserver;
  o.holder = "bfsbench-c";
  /* The client certificate of $BFS_CERTS_DIR, or plaintext with
   * $BFS_INSECURE (as bfsbench runs the cluster). */
  o.insecure = getenv("BFS_INSECURE") != NULL;
  bfs_fs fs;
  check(bfs_fs_open(&o, &fs), "open");
  return fs;
}

static int lock_cycles(const char* nameserver, const char* dir, int64_t duration_ms) {
  bfs_fs fs = open_fs(nameserver);
  check(bfs_mkdir(fs, dir, 0, BFS_MKDIR_PARENTS), "mkdir");
  size_t cap = 1 << 16, n = 0;
  int64_t* lat = malloc(cap * sizeof *lat);
  bfs_lock l;
  check(bfs_lock_dir(fs, dir, 0, &l), "lock");  // warm-up: the session's lock watch starts
  check(bfs_unlock(l), "unlock");
  int64_t start = now_ns(), end = start + duration_ms * 1000000, t = start;
  while (t < end) {
    check(bfs_lock_dir(fs, dir, 0, &l), "lock");
    check(bfs_unlock(l), "unlock");
    int64_t t2 = now_ns();
    if (n == cap) lat = realloc(lat, (cap *= 2) * sizeof *lat);
    lat[n++] = t2 - t;
    t = t2;
  }
  printf("cycles %zu elapsed_ns %lld\n", n, (long long)(t - start));
  for (size_t i = 0; i < n; i++) printf("%lld\n", (long long)lat[i]);
  free(lat);
  check(bfs_fs_close(fs), "close");
  return 0;
}

static int write_file(const char* nameserver, const char* path, int64_t bytes) {
  enum { CHUNK = 1 << 20 };
  bfs_fs fs = open_fs(nameserver);
  unsigned char* buf = malloc(CHUNK);
  for (size_t i = 0; i < CHUNK; i++) buf[i] = (unsigned char)(i * 7 + 3);
  int64_t start = now_ns();
  bfs_file f;
  check(bfs_create(fs, path, BFS_CREATE_OVERWRITE, 0, 0, &f), "create");
  for (int64_t off = 0; off < bytes; off += CHUNK) {
    int64_t k = bytes - off < CHUNK ? bytes - off : CHUNK;
    check(bfs_write(f, buf, (size_t)k), "write");
  }
  check(bfs_close(f), "close");
  int64_t elapsed = now_ns() - start;
  printf("bytes %lld elapsed_ns %lld\n", (long long)bytes, (long long)elapsed);
  free(buf);
  check(bfs_fs_close(fs), "close fs");
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 5 && strcmp(argv[1], "lock") == 0) return lock_cycles(argv[2], argv[3], atoll(argv[4]));
  if (argc == 5 && strcmp(argv[1], "write") == 0) return write_file(argv[2], argv[3], atoll(argv[4]));
  fprintf(stderr, "usage: bench lock NAMESERVER DIR DURATION_MS | bench write NAMESERVER PATH BYTES\n");
  return 2;
}
