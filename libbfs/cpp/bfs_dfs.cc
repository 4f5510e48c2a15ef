// The C++ Dfs adapter over libbfs; see bfs_dfs.h.
#include "bfs_dfs.h"

#include <fcntl.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <set>

namespace bfs {

namespace {

thread_local int32_t last_status = 0;

// Fail records code as the thread's last status and returns it negated.
int32_t Fail(int code) {
  last_status = -code;
  return -code;
}

// Result is 0 for BFS_OK, else Fail(code).
int32_t Result(int code) { return code == BFS_OK ? 0 : Fail(code); }

// Clean folds repeated and trailing slashes, so that "/t1/" and "/t1" name
// one lock here as they do on the nameserver.
std::string Clean(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '/' && !out.empty() && out[out.size() - 1] == '/') continue;
    out.push_back(c);
  }
  while (out.size() > 1 && out[out.size() - 1] == '/') out.erase(out.size() - 1);
  return out;
}

// Within reports whether path is dir or lies below it.
bool Within(const std::string& path, const std::string& dir) {
  if (dir == "/") return !path.empty() && path[0] == '/';
  return path.compare(0, dir.size(), dir) == 0 &&
         (path.size() == dir.size() || path[dir.size()] == '/');
}

class BfsFile final : public DfsFile {
 public:
  BfsFile(bfs_file file, bool writer) : file_(file), writer_(writer), closed_(false) {}
  ~BfsFile() { CloseFile(); }

  int32_t Write(const char* buf, int32_t len) override {
    if (len < 0) return Fail(BFS_ERR_INVALID_ARGUMENT);
    int code = bfs_write(file_, buf, static_cast<size_t>(len));
    return code == BFS_OK ? len : Fail(code);
  }

  int32_t Flush() override { return writer_ ? Sync() : 0; }

  int32_t Sync() override { return Result(bfs_sync(file_)); }

  int32_t Read(char* buf, int32_t len) override {
    if (len < 0) return Fail(BFS_ERR_INVALID_ARGUMENT);
    size_t n = 0;
    int code = bfs_read(file_, buf, static_cast<size_t>(len), &n);
    return code == BFS_OK ? static_cast<int32_t>(n) : Fail(code);
  }

  int32_t Pread(int64_t offset, char* buf, int32_t len) override {
    if (len < 0) return Fail(BFS_ERR_INVALID_ARGUMENT);
    size_t n = 0;
    int code = bfs_pread(file_, buf, static_cast<size_t>(len), offset, &n);
    return code == BFS_OK ? static_cast<int32_t>(n) : Fail(code);
  }

  int64_t Tell() override {
    int64_t pos = 0;
    int code = bfs_tell(file_, &pos);
    return code == BFS_OK ? pos : Fail(code);
  }

  int32_t Seek(int64_t offset) override { return Result(bfs_seek(file_, offset, BFS_SEEK_SET, nullptr)); }

  int32_t CloseFile() override {
    if (closed_.exchange(true)) return 0;
    return Result(bfs_close(file_));
  }

 private:
  const bfs_file file_;
  const bool writer_;
  std::atomic<bool> closed_;
};

// Paths LockDirectory is locking now, per adapter, so that two threads
// locking one path do not end up with two handles of one lock (releasing
// either would release the lock). Keyed by adapter.
std::mutex locking_mu;
std::condition_variable locking_done;
std::set<std::pair<const void*, std::string> > locking;

// LockingGuard marks (dfs, path) as being locked for its life.
class LockingGuard {
 public:
  LockingGuard(const void* dfs, const std::string& path) : key_(dfs, path) {
    std::unique_lock<std::mutex> l(locking_mu);
    while (locking.count(key_) > 0) locking_done.wait(l);
    locking.insert(key_);
  }
  ~LockingGuard() {
    std::lock_guard<std::mutex> l(locking_mu);
    locking.erase(key_);
    locking_done.notify_all();
  }

 private:
  const std::pair<const void*, std::string> key_;
};

}  // namespace

int32_t LastStatus() { return last_status; }

// HeldLock is a lock LockDirectory took: the argument of its lost-lock
// callback. It is deleted only after bfs_unlock (or bfs_fs_close)
// returned, when its callback is not running and will not start.
struct BfsDfs::HeldLock {
  BfsDfs* dfs;
  std::string path;
  bfs_lock lock;
};

BfsDfs* BfsDfs::Open(const BfsDfsOptions& options, int32_t* status) {
  bfs_options o;
  memset(&o, 0, sizeof o);
  o.nameservers = options.nameservers.c_str();
  o.holder = options.holder.empty() ? nullptr : options.holder.c_str();
  o.session_ttl_ms = options.session_ttl_ms;
  o.call_timeout_ms = options.call_timeout_ms;
  bfs_fs fs = 0;
  int32_t s = Result(bfs_fs_open(&o, &fs));
  if (status != nullptr) *status = s;
  return s == 0 ? new BfsDfs(fs, options) : nullptr;
}

BfsDfs::BfsDfs(bfs_fs fs, const BfsDfsOptions& options) : fs_(fs), options_(options) {}

BfsDfs::~BfsDfs() {
  bfs_fs_close(fs_);  // releases the locks: no callback runs after it
  for (auto& kv : held_) delete kv.second;
}

int32_t BfsDfs::CreateDirectory(const std::string& path) {
  return Result(bfs_mkdir(fs_, path.c_str(), 0, BFS_MKDIR_PARENTS));
}

int32_t BfsDfs::DeleteDirectory(const std::string& path) {
  return Result(bfs_rmdir(fs_, path.c_str(), BFS_RMDIR_RECURSIVE));
}

int32_t BfsDfs::Exists(const std::string& filename) {
  bfs_file_info info;
  return Result(bfs_stat(fs_, filename.c_str(), &info));
}

int32_t BfsDfs::Delete(const std::string& filename) { return Result(bfs_remove(fs_, filename.c_str())); }

int32_t BfsDfs::GetFileSize(const std::string& filename, uint64_t* size) {
  if (size == nullptr) return Fail(BFS_ERR_INVALID_ARGUMENT);
  bfs_file_info info;
  int code = bfs_stat(fs_, filename.c_str(), &info);
  if (code != BFS_OK) return Fail(code);
  *size = static_cast<uint64_t>(info.size);
  return 0;
}

int32_t BfsDfs::Rename(const std::string& from, const std::string& to) {
  return Result(bfs_rename(fs_, from.c_str(), to.c_str()));
}

int32_t BfsDfs::ListDirectory(const std::string& path, std::vector<std::string>* result) {
  if (result == nullptr) return Fail(BFS_ERR_INVALID_ARGUMENT);
  bfs_dirent* entries = nullptr;
  size_t count = 0;
  int code = bfs_list(fs_, path.c_str(), &entries, &count);
  if (code != BFS_OK) return Fail(code);
  result->clear();
  for (size_t i = 0; i < count; i++) result->push_back(entries[i].name);
  bfs_dirents_free(entries, count);
  return 0;
}

int32_t BfsDfs::LockDirectory(const std::string& path) {
  const std::string p = Clean(path);
  LockingGuard guard(this, p);
  std::vector<HeldLock*> lost;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = held_.find(p);
    if (it != held_.end()) {
      if (bfs_lock_poll(it->second->lock) == BFS_OK) return 0;  // held already
      lost.push_back(it->second);
      held_.erase(it);
    }
  }
  int32_t ignored = 0;
  Release(&lost, &ignored);  // a lost lock: only its handle is freed
  bfs_lock lock = 0;
  int code = bfs_lock_dir(fs_, p.c_str(), options_.lock_wait_ms, &lock);
  if (code != BFS_OK) return Fail(code);
  HeldLock* held = new HeldLock{this, p, lock};
  code = bfs_lock_on_lost(lock, &BfsDfs::OnLost, held);
  if (code != BFS_OK) {
    bfs_unlock(lock);
    delete held;
    return Fail(code);
  }
  std::lock_guard<std::mutex> l(mu_);
  held_[p] = held;
  return 0;
}

int32_t BfsDfs::UnlockDirectory(const std::string& path) {
  const std::string p = Clean(path);
  std::vector<HeldLock*> release;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = held_.begin(); it != held_.end();) {
      if (Within(it->first, p)) {
        release.push_back(it->second);
        it = held_.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (release.empty()) return Result(bfs_unlock_dir(fs_, p.c_str(), 0, 0, nullptr));
  // Deepest first: a nested lock goes before the one above it.
  std::sort(release.begin(), release.end(),
            [](const HeldLock* a, const HeldLock* b) { return a->path.size() > b->path.size(); });
  int32_t status = 0;
  Release(&release, &status);
  return status;
}

// Release unlocks and deletes every lock of held; *status gets the first
// failure.
void BfsDfs::Release(std::vector<HeldLock*>* held, int32_t* status) {
  for (HeldLock* h : *held) {
    int code = bfs_unlock(h->lock);
    if (code != BFS_OK && *status == 0) *status = Fail(code);
    delete h;
  }
  held->clear();
}

int32_t BfsDfs::ClearDirOwner(const std::string& path) {
  return Result(bfs_unlock_dir(fs_, path.c_str(), BFS_UNLOCK_FORCE, options_.clear_wait_ms, nullptr));
}

DfsFile* BfsDfs::OpenFile(const std::string& filename, int32_t flags) {
  bfs_file file = 0;
  int code;
  switch (flags & O_ACCMODE) {
    case O_RDONLY:
      code = bfs_open(fs_, filename.c_str(), &file);
      break;
    case O_WRONLY:
      code = bfs_create(fs_, filename.c_str(), BFS_CREATE_OVERWRITE, 0, 0, &file);
      break;
    default:
      code = BFS_ERR_INVALID_ARGUMENT;
  }
  if (code != BFS_OK) {
    Fail(code);
    return nullptr;
  }
  return new BfsFile(file, (flags & O_ACCMODE) == O_WRONLY);
}

int32_t BfsDfs::Stat(const std::string& filename, struct stat* fstat) {
  if (fstat == nullptr) return Fail(BFS_ERR_INVALID_ARGUMENT);
  bfs_file_info info;
  int code = bfs_stat(fs_, filename.c_str(), &info);
  if (code != BFS_OK) return Fail(code);
  memset(fstat, 0, sizeof *fstat);
  fstat->st_size = static_cast<off_t>(info.size);
  fstat->st_mode = static_cast<mode_t>((info.is_dir ? S_IFDIR : S_IFREG) | info.mode);
  fstat->st_mtime = static_cast<time_t>(info.mtime_ns / 1000000000);
  fstat->st_ino = static_cast<ino_t>(info.entry_id);
  fstat->st_nlink = 1;
  return 0;
}

void BfsDfs::SetLockLostHandler(const LockLostHandler& handler) {
  std::lock_guard<std::mutex> l(mu_);
  handler_ = handler;
}

int32_t BfsDfs::LockStatus(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = held_.find(Clean(path));
  if (it == held_.end()) return Fail(BFS_ERR_UNLOCKED);
  return Result(bfs_lock_poll(it->second->lock));
}

uint64_t BfsDfs::LockEpoch(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = held_.find(Clean(path));
  uint64_t epoch = 0;
  if (it != held_.end() && bfs_lock_epoch(it->second->lock, &epoch) != BFS_OK) return 0;
  return epoch;
}

void BfsDfs::OnLost(bfs_lock, int code, const char* message, void* arg) {
  // The handler may unlock the path, which deletes held: copy first.
  const HeldLock* held = static_cast<const HeldLock*>(arg);
  BfsDfs* dfs = held->dfs;
  const std::string path = held->path;
  LockLostHandler handler;
  {
    std::lock_guard<std::mutex> l(dfs->mu_);
    handler = dfs->handler_;
  }
  if (!handler) return;
  try {
    handler(path, -code, message != nullptr ? message : "");
  } catch (...) {
    // Nothing may unwind into the library's thread.
  }
}

}  // namespace bfs

extern "C" bfs::Dfs* NewDfs(const char* conf) {
  bfs::BfsDfsOptions options;
  options.nameservers = conf != nullptr ? conf : "";
  return bfs::BfsDfs::Open(options, nullptr);
}
