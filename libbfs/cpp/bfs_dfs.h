// bfs_dfs.h: a C++ Dfs adapter over libbfs, for a Tera-style table store.
//
// Dfs and DfsFile below have the shape of the table store's storage
// interface (the methods, arguments and return values its tablet servers
// and master call); BfsDfs and the files it opens implement it over the C
// API of bfs.h. A port of the table store derives its own interface from
// these classes, or changes their base to its own.
//
// Return values: 0 means success. A failure is the negative of a bfs.h
// status code (-BFS_ERR_LOCKED, -BFS_ERR_STALE_EPOCH, ...), so nothing is
// lost in the mapping; methods returning a count (Read, Write, Pread,
// Tell) return it, or such a negative code. OpenFile returns NULL on
// failure; LastStatus() then has the code for the calling thread, and
// bfs_last_error_message() the explanation.
//
// Directory locks: LockDirectory locks for the adapter's session, waiting
// (bounded by BfsDfsOptions::lock_wait_ms) while another holder has the
// directory; UnlockDirectory releases this adapter's lock of the directory
// and of every directory below it it locked (nested locks: a tablet, then
// tablet/lg); ClearDirOwner is the master's forced unlock, fencing the old
// holder, and returns once the directory is unlocked (bounded by
// clear_wait_ms). A lock lost while held (forced away, session lost) is
// reported to the handler set with SetLockLostHandler and by LockStatus;
// after the loss, this adapter's mutations under the directory fail with
// -BFS_ERR_STALE_EPOCH (and its open writers there with -BFS_ERR_SEALED or
// -BFS_ERR_STALE_EPOCH) until it locks the directory again.
//
// Threads: a BfsDfs may be used from any number of threads; a DfsFile too
// (its calls are serialized, Pread excepted). The handler is called from a
// thread of the library and may call the adapter (UnlockDirectory of the
// lost path included). C++11.
#ifndef BFS_DFS_H_
#define BFS_DFS_H_

#include <stdint.h>
#include <sys/stat.h>

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "bfs.h"

namespace bfs {

// A file, as the table store's storage interface has it.
class DfsFile {
 public:
  virtual ~DfsFile() {}
  // Appends len bytes; returns len, or a negative code.
  virtual int32_t Write(const char* buf, int32_t len) = 0;
  // Pushes what was written to the replicas. Here the same as Sync: the
  // file system has no weaker flush.
  virtual int32_t Flush() = 0;
  // Makes what was written durable on every replica.
  virtual int32_t Sync() = 0;
  // Reads up to len bytes at the current offset; returns the count (0 at
  // the end), or a negative code.
  virtual int32_t Read(char* buf, int32_t len) = 0;
  // Reads up to len bytes at offset; the count is short only at the end.
  virtual int32_t Pread(int64_t offset, char* buf, int32_t len) = 0;
  // The current offset (a writer: the bytes written).
  virtual int64_t Tell() = 0;
  // Sets the offset of the next Read (files open for reading).
  virtual int32_t Seek(int64_t offset) = 0;
  // Closes the file: a writer's bytes are sealed and the file closed.
  virtual int32_t CloseFile() = 0;
};

// The file system, as the table store's storage interface has it.
class Dfs {
 public:
  virtual ~Dfs() {}
  // Creates path and any missing parents; an existing directory is fine.
  virtual int32_t CreateDirectory(const std::string& path) = 0;
  // Deletes the directory path and everything under it.
  virtual int32_t DeleteDirectory(const std::string& path) = 0;
  // 0 if filename exists; -BFS_ERR_NOT_FOUND if not.
  virtual int32_t Exists(const std::string& filename) = 0;
  // Deletes the file filename.
  virtual int32_t Delete(const std::string& filename) = 0;
  virtual int32_t GetFileSize(const std::string& filename, uint64_t* size) = 0;
  virtual int32_t Rename(const std::string& from, const std::string& to) = 0;
  // The names in the directory path, sorted.
  virtual int32_t ListDirectory(const std::string& path, std::vector<std::string>* result) = 0;
  virtual int32_t LockDirectory(const std::string& path) = 0;
  virtual int32_t UnlockDirectory(const std::string& path) = 0;
  virtual int32_t ClearDirOwner(const std::string& path) = 0;
  // flags: O_RDONLY opens for reading; O_WRONLY creates (replacing an
  // existing file). NULL on failure. The caller deletes the file (which
  // closes it if CloseFile was not called).
  virtual DfsFile* OpenFile(const std::string& filename, int32_t flags) = 0;
  // Fills st_size, st_mode (S_IFDIR or S_IFREG with the permission bits),
  // st_mtime, st_ino and st_nlink.
  virtual int32_t Stat(const std::string& filename, struct stat* fstat) = 0;
};

// The status (0 or a negative code) of the calling thread's last adapter
// call that failed; what OpenFile's NULL means.
int32_t LastStatus();

struct BfsDfsOptions {
  // The nameserver, "host:port" (see bfs_options).
  std::string nameservers;
  // The holder id of the session (the tablet server's "ip:port"); empty:
  // the library's default.
  std::string holder;
  int64_t session_ttl_ms = 0;  // 0: the library's default
  int64_t call_timeout_ms = 0; // 0: none
  // How long LockDirectory waits for a directory another server holds.
  int64_t lock_wait_ms = 10000;
  // How long ClearDirOwner waits for the directory to be cleaned.
  int64_t clear_wait_ms = 30000;
};

// Called when a lock taken with LockDirectory is lost. path is as it was
// locked; code is -BFS_ERR_LOCK_LOST; why is the library's explanation.
typedef std::function<void(const std::string& path, int32_t code, const std::string& why)> LockLostHandler;

// BfsDfs is Dfs over libbfs: one file system handle, so one session.
class BfsDfs : public Dfs {
 public:
  // Connects; NULL on failure, with *status (if not NULL) the code.
  static BfsDfs* Open(const BfsDfsOptions& options, int32_t* status);
  // Closes the handle: its locks are released and its files abandoned.
  ~BfsDfs();

  int32_t CreateDirectory(const std::string& path) override;
  int32_t DeleteDirectory(const std::string& path) override;
  int32_t Exists(const std::string& filename) override;
  int32_t Delete(const std::string& filename) override;
  int32_t GetFileSize(const std::string& filename, uint64_t* size) override;
  int32_t Rename(const std::string& from, const std::string& to) override;
  int32_t ListDirectory(const std::string& path, std::vector<std::string>* result) override;
  // Locks path, waiting up to lock_wait_ms. 0 also when this adapter holds
  // it already. A lock of path this adapter had lost is replaced.
  int32_t LockDirectory(const std::string& path) override;
  // Releases this adapter's locks of path and below, deepest first. With
  // none recorded, asks the nameserver to unlock path for this session.
  int32_t UnlockDirectory(const std::string& path) override;
  // Force-unlocks path, whoever holds it, and waits until it is unlocked.
  int32_t ClearDirOwner(const std::string& path) override;
  DfsFile* OpenFile(const std::string& filename, int32_t flags) override;
  int32_t Stat(const std::string& filename, struct stat* fstat) override;

  // Beyond the table store's interface: the loss notification.
  void SetLockLostHandler(const LockLostHandler& handler);
  // 0 while this adapter holds path; -BFS_ERR_LOCK_LOST once it was lost;
  // -BFS_ERR_UNLOCKED if it never locked it (or unlocked it).
  int32_t LockStatus(const std::string& path);
  // The epoch of this adapter's lock of path, 0 if none.
  uint64_t LockEpoch(const std::string& path);

 private:
  struct HeldLock;

  BfsDfs(bfs_fs fs, const BfsDfsOptions& options);
  BfsDfs(const BfsDfs&) = delete;
  BfsDfs& operator=(const BfsDfs&) = delete;

  static void OnLost(bfs_lock lock, int code, const char* message, void* arg);
  void Release(std::vector<HeldLock*>* held, int32_t* status);

  const bfs_fs fs_;
  const BfsDfsOptions options_;

  std::mutex mu_;  // guards held_ and handler_; never held across a call that may wait for a callback
  std::map<std::string, HeldLock*> held_;
  LockLostHandler handler_;
};

}  // namespace bfs

// For loaders that open the adapter with dlopen and look up "NewDfs":
// conf is the nameserver address. NULL on failure.
extern "C" bfs::Dfs* NewDfs(const char* conf);

#endif  // BFS_DFS_H_
