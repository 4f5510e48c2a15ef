/* The C test of libbfs: every group of calls of bfs.h against a running
 * cluster (BFS_NAMESERVER), under BFS_TEST_ROOT. Run by libbfs's Go test,
 * built with -fsanitize=address,undefined against libbfs.so and, in race
 * runs, against the race-checked libbfs.a. Prints one "ok" line per test
 * and "PASS" at the end; exits non-zero at the first failed check. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bfs.h"
#include "check.h"

static const char* nameserver;
static const char* root;

/* path formats root + suffix into a static-free buffer the caller owns. */
static void path(char* buf, size_t n, const char* fmt, const char* a) {
  int k = snprintf(buf, n, "%s", root);
  snprintf(buf + k, n - (size_t)k, fmt, a);
}

/* open_fs_as opens a file system handle as holder with the client
 * certificate of user (NULL: the default, "bfs") from $BFS_CERTS_DIR. */
static bfs_fs open_fs_as(const char* holder, const char* user) {
  bfs_options o;
  memset(&o, 0, sizeof o);
  o.nameservers = nameserver;
  o.holder = holder;
  o.user = user;
  o.session_ttl_ms = 3000;
  bfs_fs fs = 0;
  CHECK_OK(bfs_fs_open(&o, &fs));
  CHECK(fs != 0);
  return fs;
}

static bfs_fs open_fs(const char* holder) { return open_fs_as(holder, NULL); }

static void fill(unsigned char* buf, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)((i * 31 + seed) >> 3);
}

/* put writes n pattern bytes to p in writes of chunk bytes and closes it. */
static void put(bfs_fs fs, const char* p, size_t n, size_t chunk, unsigned seed) {
  unsigned char* data = malloc(n);
  fill(data, n, seed);
  bfs_file f;
  CHECK_OK(bfs_create(fs, p, BFS_CREATE_OVERWRITE, 0, 0, &f));
  for (size_t off = 0; off < n; off += chunk) {
    size_t k = n - off < chunk ? n - off : chunk;
    CHECK_OK(bfs_write(f, data + off, k));
  }
  int64_t pos;
  CHECK_OK(bfs_tell(f, &pos));
  CHECK(pos == (int64_t)n);
  CHECK_OK(bfs_close(f));
  free(data);
}

static void test_roundtrip(void) {
  bfs_fs fs = open_fs("c-roundtrip");
  char dir[256], p[256], p2[256];
  path(dir, sizeof dir, "/rt%s", "");
  path(p, sizeof p, "/rt/a/b/%s", "file");
  path(p2, sizeof p2, "/rt/a/b/%s", "renamed");
  CHECK_OK(bfs_mkdir(fs, dir, 0755, 0));
  CHECK_CODE(BFS_ERR_EXISTS, bfs_mkdir(fs, dir, 0755, 0));
  path(dir, sizeof dir, "/rt/a/%s", "b");
  CHECK_OK(bfs_mkdir(fs, dir, 0, BFS_MKDIR_PARENTS));
  CHECK_OK(bfs_mkdir(fs, dir, 0, BFS_MKDIR_PARENTS)); /* exists: fine with parents */

  const size_t n = 3 * 1024 * 1024 + 12345; /* several packets, a ragged end */
  put(fs, p, n, 100000, 7);

  bfs_file_info info;
  CHECK_OK(bfs_stat(fs, p, &info));
  CHECK(info.size == (int64_t)n && !info.is_dir && info.mode == 0644 && !info.open_for_write);
  CHECK(info.mtime_ns > 0 && info.entry_id != 0);

  unsigned char* want = malloc(n);
  unsigned char* got = malloc(n + 10);
  fill(want, n, 7);
  bfs_file f;
  CHECK_OK(bfs_open(fs, p, &f));
  int64_t size;
  CHECK_OK(bfs_file_size(f, &size));
  CHECK(size == (int64_t)n);
  size_t k, total = 0;
  do { /* reads in odd sizes to the end */
    CHECK_OK(bfs_read(f, got + total, 70001, &k));
    total += k;
  } while (k > 0);
  CHECK(total == n && memcmp(got, want, n) == 0);

  /* pread: inside, across the end (short), past the end (0). */
  CHECK_OK(bfs_pread(f, got, 4096, 1000000, &k));
  CHECK(k == 4096 && memcmp(got, want + 1000000, 4096) == 0);
  CHECK_OK(bfs_pread(f, got, 100, (int64_t)n - 10, &k));
  CHECK(k == 10 && memcmp(got, want + n - 10, 10) == 0);
  CHECK_OK(bfs_pread(f, got, 100, (int64_t)n + 5, &k));
  CHECK(k == 0);

  /* seek and tell */
  int64_t pos;
  CHECK_OK(bfs_seek(f, 500, BFS_SEEK_SET, &pos));
  CHECK(pos == 500);
  CHECK_OK(bfs_seek(f, 10, BFS_SEEK_CUR, NULL));
  CHECK_OK(bfs_tell(f, &pos));
  CHECK(pos == 510);
  CHECK_OK(bfs_read(f, got, 20, &k));
  CHECK(k == 20 && memcmp(got, want + 510, 20) == 0);
  CHECK_OK(bfs_seek(f, -3, BFS_SEEK_END, &pos));
  CHECK(pos == (int64_t)n - 3);
  CHECK_OK(bfs_read(f, got, 20, &k));
  CHECK(k == 3 && memcmp(got, want + n - 3, 3) == 0);
  CHECK_OK(bfs_close(f));

  /* list, rename, remove */
  bfs_dirent* ents;
  size_t count;
  CHECK_OK(bfs_list(fs, dir, &ents, &count));
  CHECK(count == 1 && strcmp(ents[0].name, "file") == 0 && ents[0].info.size == (int64_t)n);
  bfs_dirents_free(ents, count);
  CHECK_OK(bfs_rename(fs, p, p2));
  CHECK_CODE(BFS_ERR_NOT_FOUND, bfs_stat(fs, p, &info));
  CHECK_OK(bfs_chmod(fs, p2, 0600));
  CHECK_OK(bfs_stat(fs, p2, &info));
  CHECK(info.mode == 0600);
  CHECK_CODE(BFS_ERR_IS_DIRECTORY, bfs_remove(fs, dir));
  path(dir, sizeof dir, "/rt%s", "");
  CHECK_CODE(BFS_ERR_NOT_EMPTY, bfs_rmdir(fs, dir, 0));
  CHECK_OK(bfs_remove(fs, p2));
  CHECK_OK(bfs_rmdir(fs, dir, BFS_RMDIR_RECURSIVE));
  CHECK_CODE(BFS_ERR_NOT_FOUND, bfs_stat(fs, dir, &info));

  /* An empty file, and an empty listing. */
  CHECK_OK(bfs_mkdir(fs, dir, 0, 0));
  CHECK_OK(bfs_list(fs, dir, &ents, &count));
  CHECK(count == 0 && ents == NULL);
  path(p, sizeof p, "/rt/%s", "empty");
  CHECK_OK(bfs_create(fs, p, 0, 0, 0, &f));
  CHECK_CODE(BFS_ERR_EXISTS, bfs_create(fs, p, 0, 0, 0, &(bfs_file){0}));
  CHECK_OK(bfs_close(f));
  CHECK_OK(bfs_open(fs, p, &f));
  CHECK_OK(bfs_read(f, got, 10, &k));
  CHECK(k == 0);
  CHECK_OK(bfs_close(f));

  char* holder;
  CHECK_OK(bfs_fs_holder(fs, &holder));
  CHECK(strcmp(holder, "c-roundtrip") == 0);
  bfs_free(holder);
  free(want);
  free(got);
  CHECK_OK(bfs_fs_close(fs));
}

static void test_locks(void) {
  bfs_fs a = open_fs("c-lock-a"), b = open_fs("c-lock-b");
  char d[256], lg[256];
  path(d, sizeof d, "/locks/%s", "tablet");
  path(lg, sizeof lg, "/locks/tablet/%s", "lg0");
  CHECK_OK(bfs_mkdir(a, lg, 0, BFS_MKDIR_PARENTS));

  bfs_lock la, lla, lb;
  CHECK_OK(bfs_lock_dir(a, d, 0, &la));
  uint64_t e1, e2;
  CHECK_OK(bfs_lock_epoch(la, &e1));
  CHECK(e1 > 0);
  CHECK_OK(bfs_lock_poll(la));
  /* nested, by the same session */
  CHECK_OK(bfs_lock_dir(a, lg, 0, &lla));
  CHECK_OK(bfs_lock_epoch(lla, &e2));
  CHECK(e2 > e1);

  /* another session: refused at once, or after its wait */
  CHECK_CODE(BFS_ERR_LOCKED, bfs_lock_dir(b, d, 0, &lb));
  CHECK(strstr(bfs_last_error_message(), "c-lock-a") != NULL);
  CHECK_CODE(BFS_ERR_LOCKED, bfs_lock_dir(b, lg, 0, &lb));
  double t0 = now_seconds();
  CHECK_CODE(BFS_ERR_TIMEOUT, bfs_lock_dir(b, d, 300, &lb));
  CHECK(now_seconds() - t0 >= 0.25);
  CHECK(strstr(bfs_last_error_message(), "c-lock-a") != NULL);
  /* and its mutations in the subtree too */
  char f[256];
  path(f, sizeof f, "/locks/tablet/%s", "x");
  CHECK_CODE(BFS_ERR_LOCKED, bfs_mkdir(b, f, 0, 0));
  CHECK_OK(bfs_mkdir(a, f, 0, 0));

  bfs_lock_info info;
  CHECK_OK(bfs_lock_status(b, d, &info));
  CHECK(info.status == BFS_LOCK_LOCKED && info.epoch == e1 && strcmp(info.holder, "c-lock-a") == 0);
  CHECK(info.session_id != NULL && info.since_ns > 0);
  bfs_lock_info_free(&info);
  CHECK(info.holder == NULL);

  /* Unlocking by path, as the holder; then the handle by itself. */
  int state = -1;
  CHECK_OK(bfs_unlock_dir(a, lg, 0, 0, &state));
  CHECK(state == BFS_LOCK_UNLOCKED || state == BFS_LOCK_CLEANING);
  CHECK_OK(bfs_unlock(lla));
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_lock_poll(lla));
  CHECK_OK(bfs_unlock(la));

  /* b waits, and gets it as soon as a lets go */
  CHECK_OK(bfs_lock_dir(a, d, 0, &la));
  CHECK_OK(bfs_unlock(la));
  CHECK_OK(bfs_lock_dir(b, d, 5000, &lb));
  CHECK_OK(bfs_lock_epoch(lb, &e2));
  CHECK(e2 > e1);
  CHECK_OK(bfs_unlock(lb));
  CHECK_OK(bfs_lock_status(a, d, &info));
  CHECK(info.status != BFS_LOCK_LOCKED);
  bfs_lock_info_free(&info);
  CHECK_OK(bfs_fs_close(a));
  CHECK_OK(bfs_fs_close(b));
}

/* What a lost-lock callback saw. */
struct lost {
  pthread_mutex_t mu;
  pthread_cond_t cond;
  int calls;
  int code;
  bfs_lock lock;
  char message[512];
  int unlock_from_callback; /* the callback unlocks its own lock */
  int unlock_code;
};

static void on_lost(bfs_lock lock, int code, const char* message, void* arg) {
  struct lost* l = arg;
  int unlock_code = -1;
  if (l->unlock_from_callback) unlock_code = bfs_unlock(lock);
  pthread_mutex_lock(&l->mu);
  l->calls++;
  l->code = code;
  l->lock = lock;
  l->unlock_code = unlock_code;
  snprintf(l->message, sizeof l->message, "%s", message);
  pthread_cond_broadcast(&l->cond);
  pthread_mutex_unlock(&l->mu);
}

static void lost_init(struct lost* l) {
  memset(l, 0, sizeof *l);
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->cond, NULL);
}

/* wait_lost waits up to 10 s for the callback and returns its calls. */
static int wait_lost(struct lost* l) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 10;
  pthread_mutex_lock(&l->mu);
  while (l->calls == 0 && pthread_cond_timedwait(&l->cond, &l->mu, &deadline) == 0) {
  }
  int calls = l->calls;
  pthread_mutex_unlock(&l->mu);
  return calls;
}

static void test_lost_lock(void) {
  bfs_fs a = open_fs("c-lost-a"), master = open_fs_as("c-master", "admin");
  char d[256], sub[256];
  path(d, sizeof d, "/lost/%s", "tablet");
  path(sub, sizeof sub, "/lost/tablet/%s", "sub");
  CHECK_OK(bfs_mkdir(a, d, 0, BFS_MKDIR_PARENTS));
  bfs_lock la;
  CHECK_OK(bfs_lock_dir(a, d, 0, &la));
  struct lost l;
  lost_init(&l);
  CHECK_OK(bfs_lock_on_lost(la, on_lost, &l));
  CHECK_OK(bfs_mkdir(a, sub, 0, 0));

  int state = -1;
  CHECK_OK(bfs_unlock_dir(master, d, BFS_UNLOCK_FORCE, 10000, &state));
  CHECK(state == BFS_LOCK_UNLOCKED);
  CHECK(wait_lost(&l) == 1);
  CHECK(l.code == BFS_ERR_LOCK_LOST && l.lock == la && strlen(l.message) > 0);
  CHECK_CODE(BFS_ERR_LOCK_LOST, bfs_lock_poll(la));
  /* Fenced: refused although the directory is unlocked now. */
  CHECK_CODE(BFS_ERR_STALE_EPOCH, bfs_rmdir(a, sub, 0));
  CHECK_CODE(BFS_ERR_STALE_EPOCH, bfs_create(a, sub, 0, 0, 0, &(bfs_file){0}));
  CHECK_OK(bfs_unlock(la)); /* frees the handle; the fence stays */
  CHECK_CODE(BFS_ERR_STALE_EPOCH, bfs_rmdir(a, sub, 0));
  /* Locking again lifts the fence. */
  CHECK_OK(bfs_lock_dir(a, d, 5000, &la));
  CHECK_OK(bfs_rmdir(a, sub, 0));

  /* Only an admin identity forces a lock open: another client's try is
   * refused and changes nothing. (Here, not before the fence checks
   * above: a's locking again would have lifted its fence.) */
  bfs_fs other = open_fs("c-lost-other");
  CHECK_CODE(BFS_ERR_PERMISSION_DENIED, bfs_unlock_dir(other, d, BFS_UNLOCK_FORCE, 10000, NULL));
  bfs_lock_info info;
  CHECK_OK(bfs_lock_status(other, d, &info));
  CHECK(info.status == BFS_LOCK_LOCKED && strcmp(info.holder, "c-lost-a") == 0);
  bfs_lock_info_free(&info);
  CHECK_OK(bfs_fs_close(other));
  CHECK_OK(bfs_lock_poll(la));

  /* A callback registered after the loss is called too, and may unlock
   * its own lock from inside. */
  CHECK_OK(bfs_unlock_dir(master, d, BFS_UNLOCK_FORCE, 10000, NULL));
  struct lost late;
  lost_init(&late);
  late.unlock_from_callback = 1;
  CHECK_OK(bfs_lock_on_lost(la, on_lost, &late));
  CHECK(wait_lost(&late) == 1);
  CHECK(late.unlock_code == BFS_OK);
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_lock_poll(la));

  /* Released locks do not call back. */
  CHECK_OK(bfs_lock_dir(a, d, 5000, &la));
  struct lost quiet;
  lost_init(&quiet);
  CHECK_OK(bfs_lock_on_lost(la, on_lost, &quiet));
  CHECK_OK(bfs_unlock(la));
  CHECK(quiet.calls == 0);
  CHECK(l.calls == 1);

  /* Closing the file system releases its locks without calling back. */
  CHECK_OK(bfs_lock_dir(a, d, 5000, &la));
  CHECK_OK(bfs_lock_on_lost(la, on_lost, &quiet));
  bfs_file w;
  path(sub, sizeof sub, "/lost/tablet/%s", "open");
  CHECK_OK(bfs_create(a, sub, 0, 0, 0, &w));
  CHECK_OK(bfs_write(w, "abc", 3));
  CHECK_OK(bfs_fs_close(a));
  CHECK(quiet.calls == 0);
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_lock_poll(la));
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_write(w, "abc", 3));
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_close(w));
  /* Its session's lock is released by the close. */
  bfs_lock lm;
  CHECK_OK(bfs_lock_dir(master, d, 10000, &lm));
  CHECK_OK(bfs_unlock(lm));
  CHECK_OK(bfs_fs_close(master));
}

static void test_bad_calls(void) {
  bfs_options o;
  memset(&o, 0, sizeof o);
  bfs_fs fs;
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_fs_open(NULL, &fs));
  CHECK(strlen(bfs_last_error_message()) > 0);
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_fs_open(&o, &fs)); /* no nameserver */
  o.nameservers = " , ";
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_fs_open(&o, &fs));
  o.nameservers = "127.0.0.1:1,,127.0.0.1:2";
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_fs_open(&o, &fs));
  o.nameservers = nameserver;
  o.session_ttl_ms = -5;
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_fs_open(&o, &fs));
  o.session_ttl_ms = 0;
  /* certificates: a directory without them, a user without one, both
   * plaintext and a directory */
  o.certs_dir = "/nonexistent-certs";
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_fs_open(&o, &fs));
  CHECK(strstr(bfs_last_error_message(), "/nonexistent-certs") != NULL);
  o.insecure = 1;
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_fs_open(&o, &fs));
  o.certs_dir = NULL;
  o.user = "nobody";
  o.insecure = 0;
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_fs_open(&o, &fs));
  o.user = NULL;
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_fs_open(&o, NULL));
  /* a secure cluster refuses a plaintext client */
  o.insecure = 1;
  CHECK_CODE(BFS_ERR_UNAVAILABLE, bfs_fs_open(&o, &fs));
  o.insecure = 0;
  o.nameservers = "127.0.0.1:1,127.0.0.1:2"; /* nobody listens there */
  CHECK_CODE(BFS_ERR_UNAVAILABLE, bfs_fs_open(&o, &fs));

  fs = open_fs("c-bad");
  char dir[256], p[256];
  path(dir, sizeof dir, "/bad%s", "");
  path(p, sizeof p, "/bad/%s", "f");
  CHECK_OK(bfs_mkdir(fs, dir, 0, 0));

  /* handles: never issued, zero, of another kind, closed */
  bfs_file_info info;
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_stat(0, dir, &info));
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_stat(fs + 1000000, dir, &info));
  bfs_file f;
  CHECK_OK(bfs_create(fs, p, 0, 0, 0, &f));
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_stat(f, dir, &info));
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_sync(fs));
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_unlock(f));
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_lock_poll(0));

  /* NULL and malformed arguments */
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_stat(fs, NULL, &info));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_stat(fs, dir, NULL));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_stat(fs, "relative/path", &info));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_stat(fs, "", &info));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_mkdir(fs, "/a/../b", 0, 0));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_mkdir(fs, dir, 010000, 0));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_mkdir(fs, dir, 0, 0x40));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_rename(fs, NULL, dir));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_list(fs, dir, NULL, NULL));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_lock_dir(fs, NULL, 0, NULL));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_lock_dir(fs, dir, 0, NULL));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_unlock_dir(fs, dir, 0x10, 0, NULL));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_create(fs, p, 0, 0, -1, &f));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_fs_holder(fs, NULL));
  CHECK_CODE(BFS_ERR_NOT_FOUND, bfs_open(fs, "/no/such/file", &(bfs_file){0}));
  CHECK_CODE(BFS_ERR_NOT_FOUND, bfs_lock_dir(fs, "/no/such/dir", 0, &(bfs_lock){0}));
  CHECK(strstr(bfs_last_error_message(), "/no/such/dir") != NULL);

  /* calls that do not apply to the file */
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_write(f, NULL, 10));
  CHECK_OK(bfs_write(f, NULL, 0));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_read(f, &info, 1, &(size_t){0}));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_seek(f, 0, BFS_SEEK_SET, NULL));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_tell(f, NULL));
  CHECK_OK(bfs_write(f, "hello", 5));
  CHECK_OK(bfs_close(f));
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_close(f)); /* twice */
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_write(f, "x", 1));
  CHECK_OK(bfs_open(fs, p, &f));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_write(f, "x", 1));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_sync(f));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_seek(f, 0, 7, NULL));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_seek(f, -1, BFS_SEEK_SET, NULL));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_pread(f, NULL, 1, 0, &(size_t){0}));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_pread(f, &info, 1, -1, &(size_t){0}));
  CHECK_CODE(BFS_ERR_INVALID_ARGUMENT, bfs_pread(f, &info, 1, 0, NULL));
  CHECK_OK(bfs_close(f));

  /* codes have names; unknown ones too */
  CHECK(strncmp(bfs_strerror(BFS_ERR_STALE_EPOCH), "BFS_ERR_STALE_EPOCH", 19) == 0);
  CHECK(strncmp(bfs_strerror(12345), "BFS_ERR_?", 9) == 0);
  bfs_free(NULL);
  bfs_dirents_free(NULL, 0);
  bfs_lock_info_free(NULL);

  CHECK_OK(bfs_fs_close(fs));
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_fs_close(fs));
  CHECK_CODE(BFS_ERR_BAD_HANDLE, bfs_mkdir(fs, dir, 0, 0));
}

/* Threads: each its own directory, file and lock, on one shared handle,
 * plus preads of one shared file from every thread at once. */
enum { THREADS = 8, ROUNDS = 6, FILE_BYTES = 200000 };

struct worker {
  bfs_fs fs;
  bfs_file shared;
  const unsigned char* shared_data;
  int id;
};

static void* work(void* arg) {
  struct worker* w = arg;
  char id[16], dir[256], p[256], bad[256];
  snprintf(id, sizeof id, "%d", w->id);
  path(dir, sizeof dir, "/threads/t%s", id);
  path(p, sizeof p, "/threads/t%s/file", id);
  CHECK_OK(bfs_mkdir(w->fs, dir, 0, BFS_MKDIR_PARENTS));
  unsigned char* want = malloc(FILE_BYTES);
  unsigned char* got = malloc(FILE_BYTES);
  fill(want, FILE_BYTES, (unsigned)w->id);
  for (int r = 0; r < ROUNDS; r++) {
    bfs_lock l;
    CHECK_OK(bfs_lock_dir(w->fs, dir, 5000, &l));
    put(w->fs, p, FILE_BYTES, 65536, (unsigned)w->id);
    CHECK_OK(bfs_unlock(l));
    bfs_file f;
    CHECK_OK(bfs_open(w->fs, p, &f));
    size_t k;
    CHECK_OK(bfs_pread(f, got, FILE_BYTES, 0, &k));
    CHECK(k == FILE_BYTES && memcmp(got, want, FILE_BYTES) == 0);
    CHECK_OK(bfs_close(f));
    /* one shared file, pread by all at different offsets */
    size_t off = (size_t)(w->id * 1000 + r * 100);
    CHECK_OK(bfs_pread(w->shared, got, 5000, (int64_t)off, &k));
    CHECK(k == 5000 && memcmp(got, w->shared_data + off, 5000) == 0);
    /* each thread sees its own error message */
    path(bad, sizeof bad, "/threads/missing-%s", id);
    CHECK_CODE(BFS_ERR_NOT_FOUND, bfs_stat(w->fs, bad, &(bfs_file_info){0}));
    CHECK(strstr(bfs_last_error_message(), bad) != NULL);
  }
  free(want);
  free(got);
  return NULL;
}

static void test_threads(void) {
  bfs_fs fs = open_fs("c-threads");
  char p[256];
  path(p, sizeof p, "/threads/%s", "shared");
  CHECK_OK(bfs_mkdir(fs, p, 0, BFS_MKDIR_PARENTS));
  path(p, sizeof p, "/threads/shared/%s", "data");
  const size_t n = 100000;
  unsigned char* data = malloc(n);
  fill(data, n, 99);
  put(fs, p, n, n, 99);
  bfs_file shared;
  CHECK_OK(bfs_open(fs, p, &shared));
  pthread_t t[THREADS];
  struct worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (struct worker){.fs = fs, .shared = shared, .shared_data = data, .id = i};
    CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  CHECK_OK(bfs_close(shared));
  free(data);
  CHECK_OK(bfs_fs_close(fs));
}

/* A handle closed while other threads use it: they get errors, not
 * crashes. */
struct closer_arg {
  bfs_fs fs;
};

static void* hammer(void* arg) {
  struct closer_arg* c = arg;
  for (int i = 0; i < 200; i++) {
    int code = bfs_stat(c->fs, "/", &(bfs_file_info){0});
    if (code == BFS_ERR_BAD_HANDLE || code == BFS_ERR_CLOSED) break;
    CHECK_OK(code);
  }
  return NULL;
}

static void test_close_under_use(void) {
  bfs_fs fs = open_fs("c-closing");
  pthread_t t[4];
  struct closer_arg a[4];
  for (int i = 0; i < 4; i++) {
    a[i] = (struct closer_arg){.fs = fs};
    CHECK(pthread_create(&t[i], NULL, hammer, &a[i]) == 0);
  }
  CHECK_OK(bfs_fs_close(fs));
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
}

static void run(const char* name, void (*test)(void)) {
  double t0 = now_seconds();
  test();
  printf("ok   %-22s %6.0f ms\n", name, (now_seconds() - t0) * 1000);
  fflush(stdout);
}

int main(void) {
  nameserver = env_or_die("BFS_NAMESERVER");
  root = env_or_die("BFS_TEST_ROOT");
  bfs_fs fs = open_fs("c-setup");
  CHECK_OK(bfs_mkdir(fs, root, 0, BFS_MKDIR_PARENTS));
  CHECK_OK(bfs_fs_close(fs));
  run("roundtrip", test_roundtrip);
  run("locks", test_locks);
  run("lost_lock", test_lost_lock);
  run("bad_calls", test_bad_calls);
  run("threads", test_threads);
  run("close_under_use", test_close_under_use);
  printf("PASS\n");
  return 0;
}
