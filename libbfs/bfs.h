/*
 * bfs.h: the C API of BFS-Go (libbfs).
 *
 * libbfs is the Go SDK built as a C library (libbfs.so with
 * -buildmode=c-shared, libbfs.a with -buildmode=c-archive); see BUILD.md,
 * "The C API". A process opens a file system handle (a connection to the
 * nameserver with one session), and through it makes namespace calls,
 * reads and writes files, and takes directory locks with fencing.
 *
 * Status codes
 *   Every call that can fail returns an int: BFS_OK (0) or one of the
 *   BFS_ERR_* codes below. Results come back through out parameters, which
 *   are written only on success. bfs_last_error_message() explains the last
 *   failure on the calling thread.
 *
 * Handles
 *   bfs_fs, bfs_file and bfs_lock are integers naming objects inside the
 *   library; no pointer into the library's memory ever reaches the caller.
 *   A handle is never reused: a call with a handle that was closed, that
 *   never existed or that names an object of another kind returns
 *   BFS_ERR_BAD_HANDLE (never a crash). 0 is never a valid handle.
 *
 * Memory
 *   Strings and buffers passed in are read during the call only (copied if
 *   kept). Memory the library returns is allocated with malloc and belongs
 *   to the caller, who frees it with the function named at the call:
 *   bfs_free for a string, bfs_dirents_free for a listing,
 *   bfs_lock_info_free for the strings of a bfs_lock_info.
 *
 * Threads
 *   Every function may be called from any number of threads at once, on
 *   the same handles or on different ones. Calls on one bfs_file are
 *   serialized, except bfs_pread, which runs concurrently with other
 *   bfs_preads of the same file. A Go panic inside the library is caught
 *   at the call and returned as BFS_ERR_INTERNAL; it never unwinds into C.
 *
 * Blocking
 *   Calls block until the nameserver (or the chunkservers) answered, at
 *   most for the call timeout of the file system handle when one is set
 *   (bfs_options.call_timeout_ms); lock waits have their own bound.
 *   bfs_fs_close makes calls still running on its handles return
 *   BFS_ERR_CLOSED.
 *
 * Paths
 *   Absolute, "/"-separated, UTF-8. Repeated slashes and "." are folded;
 *   an empty or relative path, "..", or a NULL path is
 *   BFS_ERR_INVALID_ARGUMENT.
 */
#ifndef BFS_H_
#define BFS_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- codes */

/*
 * Status codes. The values are stable: new codes are only ever added. The
 * library maps each of the Go SDK's errors to exactly one code (one table,
 * libbfs/errors.go).
 */
enum {
  BFS_OK = 0,
  /* Bad input: a NULL pointer, a malformed path, an option out of range, a
   * call that does not apply (bfs_sync on a file open for reading). */
  BFS_ERR_INVALID_ARGUMENT = 1,
  /* The handle is not open: closed, never issued, or of another kind. */
  BFS_ERR_BAD_HANDLE = 2,
  BFS_ERR_NOT_FOUND = 3,
  BFS_ERR_EXISTS = 4,
  BFS_ERR_NOT_DIRECTORY = 5,
  BFS_ERR_IS_DIRECTORY = 6,
  BFS_ERR_NOT_EMPTY = 7,
  BFS_ERR_PERMISSION_DENIED = 8,
  /* A directory lock held by another session refused the call (the message
   * names the holder and the epoch). */
  BFS_ERR_LOCKED = 9,
  /* The directory is not locked (an unlock of a lock that is gone). */
  BFS_ERR_UNLOCKED = 10,
  /* The directory is being cleaned after an unlock: files that were open
   * in it are being sealed. Retryable. */
  BFS_ERR_CLEANING = 11,
  /* Fencing: this client held a lock on the directory (or one above the
   * path) and lost it (forced unlock, session expiry). Every mutation of
   * this client under that directory is refused with this code until it
   * locks the directory again. */
  BFS_ERR_STALE_EPOCH = 12,
  /* The lock was lost (bfs_lock_poll, the lost-lock callback). */
  BFS_ERR_LOCK_LOST = 13,
  /* The session expired; the call was not applied. */
  BFS_ERR_SESSION_EXPIRED = 14,
  /* The file's block was sealed under this writer: its lock was taken away
   * or its session ended. The writer is dead; close it. */
  BFS_ERR_SEALED = 15,
  /* The file is not open for write (it was closed meanwhile). */
  BFS_ERR_NOT_OPEN = 16,
  /* The nameserver is not the leader of its group; not applied. */
  BFS_ERR_NOT_LEADER = 17,
  /* The nameserver or chunkservers could not be reached, or could not
   * answer: the outcome of a mutation is unknown. */
  BFS_ERR_UNAVAILABLE = 18,
  /* The call's time ran out (call timeout, lock wait). A lock wait that
   * ended with the directory still locked names the holder in the
   * message. */
  BFS_ERR_TIMEOUT = 19,
  /* The file system handle was closed while the call ran. */
  BFS_ERR_CLOSED = 20,
  /* Data failed its checksum on every replica. */
  BFS_ERR_CORRUPT = 21,
  /* The call or option is not supported by this build or this cluster. */
  BFS_ERR_UNIMPLEMENTED = 22,
  /* A bug: the nameserver's, or the library's (a caught panic). */
  BFS_ERR_INTERNAL = 23,
  /* An error no other code describes (a transport failure); see the
   * message. */
  BFS_ERR_UNKNOWN = 24,
  /* A chunkserver's disk is full (a later write set may have room), or
   * a limit of the servers was reached (too many sessions or lock
   * waits of this identity, a message too big; see the message). */
  BFS_ERR_RESOURCE_EXHAUSTED = 25
};

/* The name of a code ("BFS_ERR_LOCKED") and what it means, as a static
 * string: never freed, valid forever. Unknown codes give "BFS_ERR_?". */
const char* bfs_strerror(int code);

/*
 * The message of the last call that failed on the calling thread: what
 * failed and why, with the path ("lock /tera/t1: directory /tera/t1 locked
 * by 10.0.0.7:4242:1700000000 (epoch 12)"). Per thread, like errno: calls
 * that succeed leave it as it was. The pointer stays valid until the next
 * failing call on this thread; do not free it. "" when no call failed yet.
 */
const char* bfs_last_error_message(void);

/* Frees a string the library returned. NULL is fine. */
void bfs_free(void* p);

/* ---------------------------------------------------------- file system */

typedef uint64_t bfs_fs;
typedef uint64_t bfs_file;
typedef uint64_t bfs_lock;

/* Options of bfs_fs_open. Zero-initialize, then set what you need: a zero
 * field means its default. */
typedef struct bfs_options {
  /* The nameserver, "host:port" (required), or a comma-separated list of
   * the members of a nameserver group ("10.0.0.1:8828,10.0.0.2:8828,..."):
   * calls go to the group's leader and follow it when it moves. */
  const char* nameservers;
  /* The holder id recorded with the session and its locks (the tablet
   * server's "ip:port"). NULL: "ip:pid:start-time" of this process. */
  const char* holder;
  /* The session time-to-live asked of the nameserver, in milliseconds.
   * 0: 10000. The library renews it every third of it; once no renewal
   * succeeded for nearly this long, the session and its locks are lost. */
  int64_t session_ttl_ms;
  /* A bound on every call, in milliseconds. 0: none (calls still fail
   * fast when the nameserver cannot be reached). Lock waits are bounded by
   * their own argument instead. */
  int64_t call_timeout_ms;
  /* Mutual TLS: the certificates directory, in the layout `bfs cert`
   * makes (ca.crt, client.USER.crt, client.USER.key), read again when its
   * files change. NULL: $BFS_CERTS_DIR, else ./bfs-data/certs (where
   * `bfs sandbox` makes them) when it holds a CA. None found, and insecure
   * not set, is BFS_ERR_INVALID_ARGUMENT. */
  const char* certs_dir;
  /* The client certificate presented: client.USER.crt of certs_dir. NULL:
   * "bfs", the sandbox's client. A master that clears dead servers' locks
   * (BFS_UNLOCK_FORCE) needs an admin certificate ("admin" in the
   * sandbox); other identities get BFS_ERR_PERMISSION_DENIED. The session
   * belongs to this identity. */
  const char* user;
  /* Nonzero: plaintext, for a cluster run with --insecure (certs_dir must
   * then be NULL). */
  int insecure;
} bfs_options;

/* Connects to the nameserver and opens a session, so that an unreachable
 * nameserver fails here. On success *fs is the new handle; close it with
 * bfs_fs_close. */
int bfs_fs_open(const bfs_options* options, bfs_fs* fs);

/*
 * Closes the handle: its locks are released (their lost-lock callbacks are
 * not called, and one running is waited for unless bfs_fs_close is called
 * from it), its files are abandoned (a file open for write keeps what was
 * synced; the nameserver closes it when the session ends), the session is
 * closed and the connections with it. Every handle opened through fs
 * becomes invalid. Calls still running on them return BFS_ERR_CLOSED.
 */
int bfs_fs_close(bfs_fs fs);

/* The holder id of the handle's session, as a string to bfs_free. */
int bfs_fs_holder(bfs_fs fs, char** holder);

/* ------------------------------------------------------------ namespace */

/* bfs_mkdir flags. */
#define BFS_MKDIR_PARENTS 1 /* create missing parents; an existing directory is not an error */

/* Creates the directory path. mode: permission bits (0: the nameserver's
 * default). Without BFS_MKDIR_PARENTS the parent must exist and an existing
 * path is BFS_ERR_EXISTS. */
int bfs_mkdir(bfs_fs fs, const char* path, uint32_t mode, int flags);

/* Deletes the file path. A directory is BFS_ERR_IS_DIRECTORY. */
int bfs_remove(bfs_fs fs, const char* path);

/* bfs_rmdir flags. */
#define BFS_RMDIR_RECURSIVE 1 /* delete the whole subtree */

/* Deletes the directory path; without BFS_RMDIR_RECURSIVE it must be
 * empty (else BFS_ERR_NOT_EMPTY). */
int bfs_rmdir(bfs_fs fs, const char* path, int flags);

/* Moves src to dst atomically; a file replaces a file at dst. */
int bfs_rename(bfs_fs fs, const char* src, const char* dst);

/* Sets the permission bits (07777) of path. */
int bfs_chmod(bfs_fs fs, const char* path, uint32_t mode);

/* Directory lock states. */
enum {
  BFS_LOCK_UNLOCKED = 0,
  BFS_LOCK_LOCKED = 1,
  BFS_LOCK_CLEANING = 2
};

/* What bfs_stat and bfs_list report of a file or directory. */
typedef struct bfs_file_info {
  int64_t size;           /* bytes (files) */
  int64_t mtime_ns;       /* modification time, ns since 1970; 0 if unknown */
  uint64_t entry_id;      /* the nameserver's id; survives renames */
  uint64_t lock_epoch;    /* directories: the epoch of its lock, if any */
  uint32_t mode;          /* permission bits with setuid/setgid/sticky: 07777 */
  int32_t is_dir;         /* 1 for a directory */
  int32_t replication;    /* files: replicas of each block */
  int32_t lock_status;    /* directories: BFS_LOCK_* */
  int32_t open_for_write; /* files: 1 while a writer has it open */
} bfs_file_info;

/* Describes path. BFS_ERR_NOT_FOUND if there is nothing there. */
int bfs_stat(bfs_fs fs, const char* path, bfs_file_info* info);

/* One entry of a listing. name is the last path component. */
typedef struct bfs_dirent {
  char* name;
  bfs_file_info info;
} bfs_dirent;

/* Lists the directory path, sorted by name. On success *entries is an
 * array of *count entries (NULL when empty) to free with
 * bfs_dirents_free. */
int bfs_list(bfs_fs fs, const char* path, bfs_dirent** entries, size_t* count);

/* Frees what bfs_list returned. NULL is fine. */
void bfs_dirents_free(bfs_dirent* entries, size_t count);

/* ---------------------------------------------------------------- files */

/* bfs_create flags. */
#define BFS_CREATE_OVERWRITE 1 /* replace an existing file */

/*
 * Creates path and opens it for write under the handle's session. mode:
 * permission bits (0: 0644); replication: replicas per block (0: the
 * nameserver's default). An existing file is BFS_ERR_EXISTS unless
 * BFS_CREATE_OVERWRITE. Bytes written are durable once bfs_sync (or
 * bfs_close) returned BFS_OK.
 */
int bfs_create(bfs_fs fs, const char* path, int flags, uint32_t mode, int replication, bfs_file* file);

/* Opens path for reading. The readable length is fixed at open: a closed
 * file's length, or for a file still being written the bytes every
 * reachable replica has. */
int bfs_open(bfs_fs fs, const char* path, bfs_file* file);

/*
 * Appends len bytes to a file open for write. Bytes are buffered and sent
 * in packets to every replica; a failure may show at a later bfs_write,
 * bfs_sync or bfs_close, and then every later call fails. BFS_ERR_SEALED
 * or BFS_ERR_STALE_EPOCH: the writer was fenced (its lock or session was
 * lost).
 */
int bfs_write(bfs_file file, const void* buf, size_t len);

/* Makes every byte written so far durable on every replica and known to
 * the nameserver. */
int bfs_sync(bfs_file file);

/* Reads from the current offset of a file open for reading, until len
 * bytes or the end of the file; *n is the count (0 at the end). */
int bfs_read(bfs_file file, void* buf, size_t len, size_t* n);

/* Reads up to len bytes at offset, independently of the current offset;
 * *n is the count (short only at the end of the file). Safe to call from
 * several threads on one file at once. */
int bfs_pread(bfs_file file, void* buf, size_t len, int64_t offset, size_t* n);

/* Whence of bfs_seek, as in stdio. */
#define BFS_SEEK_SET 0
#define BFS_SEEK_CUR 1
#define BFS_SEEK_END 2

/* Sets the offset of the next bfs_read; *pos (may be NULL) gets it. Files
 * open for write cannot seek (BFS_ERR_INVALID_ARGUMENT). */
int bfs_seek(bfs_file file, int64_t offset, int whence, int64_t* pos);

/* The current offset: of the next read, or for a writer the bytes
 * written. */
int bfs_tell(bfs_file file, int64_t* pos);

/* The readable length of a file open for reading, or the bytes written to
 * one open for write. */
int bfs_file_size(bfs_file file, int64_t* size);

/*
 * Closes the file and frees the handle, whatever the result. For a writer:
 * writes what is buffered, seals every replica at the final length and
 * returns once the nameserver has closed the file.
 */
int bfs_close(bfs_file file);

/* ----------------------------------------------------- directory locks */

/*
 * Locks the directory path for the handle's session; it covers the whole
 * subtree. *lock is the new lock handle; release it with bfs_unlock.
 *
 * wait_ms: 0 fails at once with BFS_ERR_LOCKED or BFS_ERR_CLEANING when
 * another session has the directory; > 0 waits up to that many
 * milliseconds for it (then BFS_ERR_TIMEOUT, the message naming the
 * holder); < 0 waits without bound (until bfs_fs_close). The waiting is
 * done by the nameserver, which answers as soon as the directory is free.
 *
 * Locking a directory the session holds already succeeds with the same
 * epoch: another handle of the same lock. Releasing either releases the
 * lock; the other then reports it lost (without a fence). Nested locks (a tablet, then
 * tablet/lg) are allowed; a lock above or below another session's lock is
 * BFS_ERR_LOCKED. A new lock lifts the fence of a lock of the directory
 * (or one below) that this client lost.
 */
int bfs_lock_dir(bfs_fs fs, const char* path, int64_t wait_ms, bfs_lock* lock);

/* The lock's epoch: it grows with every grant of any lock, so a resource
 * stamped with it can refuse an older holder. */
int bfs_lock_epoch(bfs_lock lock, uint64_t* epoch);

/*
 * BFS_OK while the lock is held; BFS_ERR_LOCK_LOST once it is lost: the
 * directory was unlocked by someone else (the master's forced unlock) or
 * deleted, or the session was lost. A lost lock stays lost; its message
 * says why. Cheap: no call to the nameserver.
 */
int bfs_lock_poll(bfs_lock lock);

/*
 * Called once, from a thread of the library, when the lock is lost: code
 * is BFS_ERR_LOCK_LOST and message says why (valid during the call only).
 * It must not unwind (no longjmp, no C++ exception) out of the callback,
 * and should return promptly; it may call any bfs function, bfs_unlock of
 * its own lock included.
 */
typedef void (*bfs_lock_lost_fn)(bfs_lock lock, int code, const char* message, void* arg);

/*
 * Registers fn (with arg) to be called when the lock is lost, replacing an
 * earlier registration; NULL removes it. If the lock is lost already, fn is
 * called soon. Not called when the lock is released by bfs_unlock or
 * bfs_fs_close, nor after either returned.
 */
int bfs_lock_on_lost(bfs_lock lock, bfs_lock_lost_fn fn, void* arg);

/*
 * Releases the lock and frees the handle, whatever the result. The
 * directory is cleaned (files still open in it are sealed) and becomes
 * unlocked; bfs_unlock does not wait for that. Its callback is not called
 * after bfs_unlock returns (one running is waited for, unless bfs_unlock is
 * called from it). Releasing a lock that was lost already frees the handle
 * and does not lift its fence: this client's mutations under the
 * directory stay refused with BFS_ERR_STALE_EPOCH until it locks it again.
 */
int bfs_unlock(bfs_lock lock);

/* bfs_unlock_dir flags. */
#define BFS_UNLOCK_FORCE 1 /* whoever holds it (the master's failover unlock) */

/*
 * Unlocks the directory path by its path: held by this handle's session,
 * or with BFS_UNLOCK_FORCE whoever holds it. A forced unlock fences the old
 * holder: its files under the directory are sealed and its later
 * mutations there refused. wait_ms: 0 returns at once (the directory may
 * still be cleaning); > 0 waits up to that long for the directory to be
 * unlocked (then BFS_ERR_TIMEOUT); < 0 waits without bound. *state (may
 * be NULL) gets the state the directory is left in: BFS_LOCK_UNLOCKED or
 * BFS_LOCK_CLEANING. A directory already unlocked or cleaning is not an
 * error (the call may be a retry).
 */
int bfs_unlock_dir(bfs_fs fs, const char* path, int flags, int64_t wait_ms, int* state);

/* The state of a directory lock. holder and session_id are strings the
 * library allocated (NULL when the directory is unlocked): free them with
 * bfs_lock_info_free. */
typedef struct bfs_lock_info {
  int32_t status;        /* BFS_LOCK_* */
  uint64_t epoch;        /* of the lock, or of the last one */
  char* holder;          /* the holder id */
  char* session_id;      /* the holder's session */
  int64_t since_ns;      /* when it entered its status, ns since 1970; 0 if unknown */
  size_t pending_files;  /* while cleaning: files not sealed yet */
} bfs_lock_info;

/* Asks the nameserver for the lock state of the directory path. */
int bfs_lock_status(bfs_fs fs, const char* path, bfs_lock_info* info);

/* Frees the strings of info (not info itself) and zeroes them. */
void bfs_lock_info_free(bfs_lock_info* info);

#ifdef __cplusplus
}
#endif

#endif /* BFS_H_ */
