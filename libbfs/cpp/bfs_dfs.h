// bfs_dfs.h: BFS-Go as a DFS plugin of the Tera table store.
//
// Tera reaches its distributed file system through a plugin: it opens a
// shared object with dlopen (RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND), looks
// up the C symbol NewDfs, calls it with a configuration string and then
// calls the object it returns through its own abstract classes
// leveldb::Dfs and leveldb::DfsFile (tera: src/leveldb/include/leveldb/
// dfs.h), from its leveldb Env. libbfs_dfs.so (scripts/libbfs.sh) is such a
// plugin; BUILD.md, "Running Tera on BFS-Go", says how to use it.
//
// The ABI contract. Dfs and DfsFile below are our declarations of those
// two classes: the same virtual functions, with the same signatures, in
// the same order (the destructor first), and nothing else virtual, so
// that under the Itanium C++ ABI their vtables have Tera's layout slot for
// slot. Never add a virtual function to them, nor reorder these; BfsDfs's
// extra methods are not virtual. libbfs/testdata/tera_plugin_test.cc
// holds the plugin to that layout without Tera's source.
//
// They are declared in namespace leveldb, under Tera's names, because
// Tera casts the pointer NewDfs returns to its own leveldb::Dfs* and calls
// through it: the layout alone makes the calls land, but only an object
// whose class derives from a class of that name is a leveldb::Dfs to the
// language. Under any other name each of Tera's calls would be a call
// through a pointer to an unrelated type, which C++ leaves undefined and
// which UBSan's vptr check reports ("member call on address ... which
// does not point to an object of type 'Dfs'"; the plugin test saw it
// when the classes were bfs::Dfs); RTTI (typeid, dynamic_cast) on Tera's
// side would not know the object either. RTLD_LOCAL and RTLD_DEEPBIND
// keep the plugin's copies of the two classes' vtables and typeinfo to
// itself; the type names match Tera's, so they compare equal where the
// runtime compares them. Everything else of the plugin is in namespace
// bfs. Do not include this header and Tera's dfs.h in one program: they
// declare the same two classes.
//
// Tera's conventions, which every method follows:
//   - 0 is success; a failure returns -1 with errno set (below), except
//     Write, Read and Pread, which return a byte count or -1, Tell, which
//     returns the offset or -1, and OpenFile, which returns NULL.
//   - errno tells Tera's Env what failed: ENOENT (nothing there), EEXIST,
//     ENOTDIR, EISDIR, ENOTEMPTY, EINVAL (bad path, bad flags, NULL),
//     EACCES (a directory lock held by another, or this client fenced: its
//     lock was taken away or its session lost; Tera's Env turns EACCES into
//     IOPermissionDenied, on which a tablet stops writing and unloads),
//     EAGAIN (the directory is being cleaned after an unlock; retry),
//     ETIMEDOUT, ENOSPC, EIO (chunkservers or nameserver unreachable, data
//     corrupt on every replica, an internal error). ErrnoOf is the table.
//   - The detailed status stays available: LastStatus() is the bfs.h code
//     (BFS_ERR_LOCKED, BFS_ERR_STALE_EPOCH, ...) of the calling thread's
//     last failed call and LastMessage() its explanation.
//
// Directory locks. LockDirectory locks for this plugin's session, the
// lock covering the subtree; it fails at once (-1, EACCES) when another
// session holds the directory (or one above or below it), as Tera's NFS
// plugin does: in Tera the master decides that a tablet server is dead
// and then calls ClearDirOwner, so a tablet server waiting for a lock
// would only hold its load thread while the conflict stays hidden from
// the master (the conf's lock_wait_ms makes it wait instead). Locking a
// directory held already succeeds; a lock of a directory this plugin lost
// is taken again. UnlockDirectory releases this plugin's locks of the
// directory and of every directory below it (Tera locks a tablet, then
// each locality group below it), deepest first. ClearDirOwner is the
// master's forced unlock: the old holder is fenced (its files there
// sealed, its later mutations refused) and the call returns once the
// directory is unlocked, so a new tablet server can lock it at once. The
// old holder's writers hear EACCES from then on, also once the new holder
// has deleted their files (Tera's leveldb deletes the logs it replayed),
// where a plain writer would hear ENOENT. A
// lock lost while held is reported to the handler of SetLockLostHandler
// and by LockStatus.
//
// Threads: a BfsDfs may be used from any number of threads; a DfsFile too
// (its calls are serialized, Pread excepted). errno, LastStatus and
// LastMessage are per thread. C++11.
#ifndef BFS_DFS_H_
#define BFS_DFS_H_

#include <stdint.h>
#include <sys/stat.h>

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bfs.h"

namespace leveldb {

// An open file: Tera's leveldb::DfsFile.
class DfsFile {
 public:
  DfsFile() = default;
  virtual ~DfsFile() {}
  // Appends len bytes; returns len, or -1.
  virtual int32_t Write(const char* buf, int32_t len) = 0;
  // Pushes what was written to the replicas. A file system with no
  // weaker flush makes it durable, as Sync does; on a reader, nothing.
  virtual int32_t Flush() = 0;
  // Makes what was written durable on every replica.
  virtual int32_t Sync() = 0;
  // Reads up to len bytes at the current offset; returns the count, short
  // only at the end of the file (0 there), or -1.
  virtual int32_t Read(char* buf, int32_t len) = 0;
  // Reads up to len bytes at offset, leaving the current offset alone.
  virtual int32_t Pread(int64_t offset, char* buf, int32_t len) = 0;
  // The current offset; a writer's is the count of bytes written.
  virtual int64_t Tell() = 0;
  // Sets the offset of the next Read (files open for reading only).
  virtual int32_t Seek(int64_t offset) = 0;
  // Closes the file; a writer's bytes are sealed on every replica and the
  // file closed at its length. A second call returns 0, and so does a
  // writer whose file was deleted meanwhile (as close after unlink),
  // unless the writer was fenced (EACCES).
  virtual int32_t CloseFile() = 0;

  DfsFile(const DfsFile&) = delete;
  DfsFile& operator=(const DfsFile&) = delete;
};

// The file system: Tera's leveldb::Dfs.
class Dfs {
 public:
  Dfs() = default;
  virtual ~Dfs() {}
  // Creates path and any missing parent; an existing directory is fine,
  // even under a lock held by another.
  virtual int32_t CreateDirectory(const std::string& path) = 0;
  // Deletes the directory path and everything under it.
  virtual int32_t DeleteDirectory(const std::string& path) = 0;
  // 0 if something is at filename; -1 with errno ENOENT if nothing is.
  virtual int32_t Exists(const std::string& filename) = 0;
  // Deletes the file filename (a directory: EISDIR).
  virtual int32_t Delete(const std::string& filename) = 0;
  virtual int32_t GetFileSize(const std::string& filename, uint64_t* size) = 0;
  // Moves from to to atomically; a file replaces a file at to.
  virtual int32_t Rename(const std::string& from, const std::string& to) = 0;
  // Copies the file from to to, replacing a file at to. to is created as
  // OpenFile creates a file, so a lock on its directory held by another
  // refuses the copy (EACCES).
  virtual int32_t Copy(const std::string& from, const std::string& to) = 0;
  // Appends the names (last path components, sorted) of the entries of
  // the directory path to *result, as Tera's other plugins do.
  virtual int32_t ListDirectory(const std::string& path, std::vector<std::string>* result) = 0;
  virtual int32_t LockDirectory(const std::string& path) = 0;
  virtual int32_t UnlockDirectory(const std::string& path) = 0;
  virtual int32_t ClearDirOwner(const std::string& path) = 0;
  // flags: bfs::kOpenRead opens filename for reading; bfs::kOpenWrite
  // creates it, replacing a file there. Any other value is EINVAL. NULL on
  // failure. The caller deletes the file, which closes it if need be.
  virtual DfsFile* OpenFile(const std::string& filename, int32_t flags) = 0;
  // Fills st_mode (S_IFDIR or S_IFREG with the permission bits), st_size,
  // st_ino (the nameserver's entry id), st_nlink, st_blocks, st_blksize and
  // the three times (the modification time: there is no other); the rest
  // is zero.
  virtual int32_t Stat(const std::string& filename, struct stat* fstat) = 0;

  Dfs(const Dfs&) = delete;
  Dfs& operator=(const Dfs&) = delete;
};

}  // namespace leveldb

namespace bfs {

using leveldb::Dfs;
using leveldb::DfsFile;

// The flags of Dfs::OpenFile, with Tera's values (its leveldb::RDONLY and
// leveldb::WRONLY), which are not O_RDONLY and O_WRONLY.
enum OpenFlags { kOpenRead = 1, kOpenWrite = 2 };

// The bfs.h code of the calling thread's last failed call (BFS_OK if none
// failed yet), and its explanation (valid until the thread's next failed
// call). A call that succeeds leaves them alone, as it leaves errno. A
// program that loaded the plugin with dlopen finds them as the C symbols
// bfs_dfs_last_status and bfs_dfs_last_message (below).
int LastStatus();
const char* LastMessage();

// The errno a failure with the bfs.h code gives (0 for BFS_OK).
int ErrnoOf(int code);

struct BfsDfsOptions {
  // The nameservers, "host:port" or a comma-separated list of them (the
  // members of a nameserver group; calls follow its leader).
  std::string nameservers;
  // The holder id recorded with the session and its locks (the tablet
  // server's "ip:port"); empty: libbfs's default, "ip:pid:start-time".
  std::string holder;
  int64_t session_ttl_ms = 0;  // 0: libbfs's default (10 s)
  int64_t call_timeout_ms = 0; // 0: none
  // How long LockDirectory waits for a directory another server holds;
  // 0 fails at once.
  int64_t lock_wait_ms = 0;
  // How long ClearDirOwner waits for the directory to be cleaned.
  int64_t clear_wait_ms = 30000;
  // Mutual TLS, as bfs_options has it: the certificates directory (empty:
  // $BFS_CERTS_DIR, else the sandbox's ./bfs-data/certs), the client
  // certificate presented (empty: "bfs"; the master's ClearDirOwner needs
  // an admin one), or plaintext for a cluster run with --insecure.
  std::string certs_dir;
  std::string user;
  bool insecure = false;

  // Parse reads the conf string of NewDfs: the nameserver list, then
  // options, separated by ';':
  //
  //   127.0.0.1:8828
  //   10.0.0.1:8828,10.0.0.2:8828,10.0.0.3:8828;holder=10.0.0.7:2200;session_ttl_ms=10000
  //   10.0.0.1:8828;certs_dir=/etc/bfs/certs;user=master
  //
  // Options are key=value: holder, certs_dir, user, insecure (0 or 1),
  // session_ttl_ms, call_timeout_ms, lock_wait_ms, clear_wait_ms
  // (milliseconds, non-negative integers).
  // Blanks around fields are ignored. An unknown key, a key given twice,
  // a bad number or an empty list is an error: false, and *error (if not
  // NULL) says why.
  static bool Parse(const std::string& conf, BfsDfsOptions* options, std::string* error);
};

// Called when a lock taken with LockDirectory is lost. path is as it was
// locked; why is libbfs's explanation.
typedef std::function<void(const std::string& path, const std::string& why)> LockLostHandler;

// BfsDfs is Dfs over libbfs: one file system handle, so one session.
class BfsDfs final : public Dfs {
 public:
  // Connects and opens the session; NULL on failure, with errno,
  // LastStatus() and LastMessage() set.
  static BfsDfs* Open(const BfsDfsOptions& options);
  // Closes the handle: its locks are released and its files abandoned
  // (what a writer synced stays; the nameserver closes the file).
  ~BfsDfs() override;

  int32_t CreateDirectory(const std::string& path) override;
  int32_t DeleteDirectory(const std::string& path) override;
  int32_t Exists(const std::string& filename) override;
  int32_t Delete(const std::string& filename) override;
  int32_t GetFileSize(const std::string& filename, uint64_t* size) override;
  int32_t Rename(const std::string& from, const std::string& to) override;
  int32_t Copy(const std::string& from, const std::string& to) override;
  int32_t ListDirectory(const std::string& path, std::vector<std::string>* result) override;
  int32_t LockDirectory(const std::string& path) override;
  int32_t UnlockDirectory(const std::string& path) override;
  int32_t ClearDirOwner(const std::string& path) override;
  DfsFile* OpenFile(const std::string& filename, int32_t flags) override;
  int32_t Stat(const std::string& filename, struct stat* fstat) override;

  // Beyond Tera's interface, and not virtual (see the ABI contract).
  void SetLockLostHandler(const LockLostHandler& handler);
  // 0 while this plugin holds path; -1 otherwise, LastStatus() telling
  // BFS_ERR_LOCK_LOST (it was lost) from BFS_ERR_UNLOCKED (never locked
  // here, or unlocked).
  int32_t LockStatus(const std::string& path);
  // The epoch of this plugin's lock of path, 0 if none.
  uint64_t LockEpoch(const std::string& path);

 private:
  struct HeldLock;

  BfsDfs(bfs_fs fs, const BfsDfsOptions& options);

  static void OnLost(bfs_lock lock, int code, const char* message, void* arg);
  // The locks of this plugin at or above path, deepest first: directory
  // and epoch. A writer keeps them, to tell its fence from a plain delete.
  std::vector<std::pair<std::string, uint64_t> > LocksOver(const std::string& path);
  void Release(std::vector<HeldLock*>* held, int* first_failure);

  const bfs_fs fs_;
  const BfsDfsOptions options_;

  std::mutex mu_;  // guards held_ and handler_; never held across a call that may wait for a callback
  std::map<std::string, HeldLock*> held_;
  LockLostHandler handler_;
};

}  // namespace bfs

// The plugin's entry point, which Tera's loader looks up with dlsym: conf
// as BfsDfsOptions::Parse reads it. NULL on failure, with the reason on
// stderr (the loader has no other way to show it) and in errno,
// LastStatus() and LastMessage().
extern "C" leveldb::Dfs* NewDfs(const char* conf);

// bfs::LastStatus and bfs::LastMessage, by names dlsym can find.
extern "C" int bfs_dfs_last_status(void);
extern "C" const char* bfs_dfs_last_message(void);

#endif  // BFS_DFS_H_
