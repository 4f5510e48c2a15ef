// BFS-Go as a DFS plugin of Tera: the Dfs and DfsFile of bfs_dfs.h over
// libbfs.
#include "bfs_dfs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <set>

namespace bfs {

namespace {

// The calling thread's last failure (LastStatus, LastMessage).
struct Failure {
  int code = BFS_OK;
  std::string message;
};
thread_local Failure last;

// Refuse records a failure the plugin found itself (code and why) and
// returns -1 with errno set. errno is set last: nothing after it may
// clobber it.
int32_t Refuse(int code, const std::string& why) {
  last.code = code;
  last.message = why;
  errno = ErrnoOf(code);
  return -1;
}

// Fail is Refuse for a failure of libbfs, explained by its message.
int32_t Fail(int code) { return Refuse(code, bfs_last_error_message()); }

// Result is 0 for BFS_OK, else Fail(code).
int32_t Result(int code) { return code == BFS_OK ? 0 : Fail(code); }

// Again returns -1 with errno set for the thread's last failure, after
// clean-up calls that may have changed errno.
int32_t Again() {
  errno = ErrnoOf(last.code);
  return -1;
}

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

// Count checks a byte count of Tera's (an int32_t) for a call.
bool Count(int32_t len, const char* call) {
  if (len >= 0) return true;
  Refuse(BFS_ERR_INVALID_ARGUMENT, std::string(call) + ": negative length " + std::to_string(len));
  return false;
}

class BfsFile final : public DfsFile {
 public:
  // covers are the locks of the plugin over a writer's file when it
  // created it: directory and epoch (BfsDfs::LocksOver).
  BfsFile(bfs_fs fs, bfs_file file, bool writer, std::vector<std::pair<std::string, uint64_t> > covers)
      : fs_(fs), file_(file), writer_(writer), covers_(std::move(covers)), closed_(false) {}
  ~BfsFile() override { CloseFile(); }

  int32_t Write(const char* buf, int32_t len) override {
    if (!Count(len, "write")) return -1;
    int code = bfs_write(file_, buf, static_cast<size_t>(len));
    return code == BFS_OK ? len : Failed(code);
  }

  int32_t Flush() override { return writer_ ? Sync() : 0; }

  int32_t Sync() override {
    int code = bfs_sync(file_);
    return code == BFS_OK ? 0 : Failed(code);
  }

  int32_t Read(char* buf, int32_t len) override {
    if (!Count(len, "read")) return -1;
    size_t n = 0;
    int code = bfs_read(file_, buf, static_cast<size_t>(len), &n);
    return code == BFS_OK ? static_cast<int32_t>(n) : Fail(code);
  }

  int32_t Pread(int64_t offset, char* buf, int32_t len) override {
    if (!Count(len, "pread")) return -1;
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
    int code = bfs_close(file_);
    if (code == BFS_OK) return 0;
    // A writer whose file was deleted meanwhile closes fine, as a POSIX
    // file does after its unlink: Tera's leveldb deletes an obsolete log
    // before it closes the log's writer. Unless the writer was fenced.
    if (code == BFS_ERR_NOT_FOUND && writer_) {
      Fail(code);
      return FencedRefusal() ? -1 : 0;
    }
    return Fail(code);
  }

 private:
  // Failed is Fail for a call of the file, but a writer whose file is not
  // found (deleted, its replicas gone) under a lock this plugin lost hears
  // the fence (see FencedRefusal).
  int32_t Failed(int code) {
    Fail(code);
    if (code == BFS_ERR_NOT_FOUND && writer_) FencedRefusal();
    return Again();
  }

  // FencedRefusal is called after Fail(BFS_ERR_NOT_FOUND) of a writer. If a
  // lock that covered the file when this plugin created it is no longer
  // this plugin's at that epoch (the master's ClearDirOwner, the session's
  // end), the writer was fenced: its file was sealed, and the next holder
  // may well have deleted it since (Tera's leveldb deletes the logs it
  // replayed), so that the writer's next packet finds no replica. Tera
  // must hear EACCES then, as for a sealed file: ENOENT is a plain IOError,
  // on which its DBTable retries with a new log instead of giving the
  // tablet up. It records BFS_ERR_STALE_EPOCH and returns true if so;
  // otherwise it leaves the failure as it is. It asks the nameserver, so
  // it does not depend on when this client hears of its lost lock.
  bool FencedRefusal() {
    if (covers_.empty()) return false;
    const std::string original = last.message;
    std::string why;
    for (const auto& cover : covers_) {
      const std::string& dir = cover.first;
      const uint64_t epoch = cover.second;
      bfs_lock_info info;
      memset(&info, 0, sizeof info);
      int code = bfs_lock_status(fs_, dir.c_str(), &info);
      if (code == BFS_ERR_NOT_FOUND) {
        why = dir + ", which this client held locked at epoch " + std::to_string(epoch) + ", is gone";
      } else if (code == BFS_OK && (info.status != BFS_LOCK_LOCKED || info.epoch != epoch)) {
        why = "this client's lock of " + dir + " at epoch " + std::to_string(epoch) + " was taken away (" + dir +
              " is now " +
              (info.status == BFS_LOCK_LOCKED
                   ? "locked by " + std::string(info.holder != nullptr ? info.holder : "?") + " at epoch " +
                         std::to_string(info.epoch)
                   : info.status == BFS_LOCK_CLEANING ? std::string("cleaning") : std::string("unlocked")) +
              ")";
      }
      if (code == BFS_OK) bfs_lock_info_free(&info);
      if (!why.empty()) break;
    }
    if (why.empty()) {
      last.code = BFS_ERR_NOT_FOUND;
      last.message = original;
      errno = ENOENT;
      return false;
    }
    Refuse(BFS_ERR_STALE_EPOCH, original + "; fenced: " + why);
    return true;
  }

  const bfs_fs fs_;
  const bfs_file file_;
  const bool writer_;
  const std::vector<std::pair<std::string, uint64_t> > covers_;
  std::atomic<bool> closed_;
};

// Paths LockDirectory is locking now, per plugin, so that two threads
// locking one path do not end up with two handles of one lock (releasing
// either would release the lock). Keyed by plugin.
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

// The buffer of Copy: big enough that the calls into libbfs cost nothing
// beside the bytes.
const size_t kCopyBuffer = 1 << 20;

std::string Trim(const std::string& s) {
  const char* blanks = " \t\r\n";
  size_t b = s.find_first_not_of(blanks);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(blanks) - b + 1);
}

// Split splits s at every sep.
std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

// Millis parses a non-negative count of milliseconds.
bool Millis(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 15 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = strtoll(s.c_str(), nullptr, 10);
  return true;
}

}  // namespace

int LastStatus() { return last.code; }

const char* LastMessage() { return last.message.c_str(); }

int ErrnoOf(int code) {
  switch (code) {
    case BFS_OK: return 0;
    case BFS_ERR_NOT_FOUND: return ENOENT;
    case BFS_ERR_EXISTS: return EEXIST;
    case BFS_ERR_NOT_DIRECTORY: return ENOTDIR;
    case BFS_ERR_IS_DIRECTORY: return EISDIR;
    case BFS_ERR_NOT_EMPTY: return ENOTEMPTY;
    case BFS_ERR_INVALID_ARGUMENT: return EINVAL;
    // Whatever stands for "another owns this directory, or this client
    // lost it": Tera's Env reads EACCES as IOPermissionDenied, on which a
    // tablet stops writing, never retries, and is unloaded.
    case BFS_ERR_PERMISSION_DENIED:
    case BFS_ERR_LOCKED:
    case BFS_ERR_STALE_EPOCH:
    case BFS_ERR_LOCK_LOST:
    case BFS_ERR_SEALED:
    case BFS_ERR_SESSION_EXPIRED: return EACCES;
    // Not applied, and the same call may succeed later.
    case BFS_ERR_CLEANING:
    case BFS_ERR_NOT_LEADER: return EAGAIN;
    case BFS_ERR_UNLOCKED: return ENOLCK;
    case BFS_ERR_TIMEOUT: return ETIMEDOUT;
    case BFS_ERR_RESOURCE_EXHAUSTED: return ENOSPC;
    case BFS_ERR_UNIMPLEMENTED: return ENOTSUP;
    case BFS_ERR_BAD_HANDLE:
    case BFS_ERR_NOT_OPEN:
    case BFS_ERR_CLOSED: return EBADF;
  }
  // BFS_ERR_UNAVAILABLE (the outcome is unknown), BFS_ERR_CORRUPT,
  // BFS_ERR_INTERNAL, BFS_ERR_UNKNOWN and any code newer than this table.
  return EIO;
}

bool BfsDfsOptions::Parse(const std::string& conf, BfsDfsOptions* options, std::string* error) {
  std::string why;
  std::vector<std::string> fields = Split(conf, ';');
  BfsDfsOptions o;
  for (const std::string& a : Split(fields[0], ',')) {
    std::string addr = Trim(a);
    if (addr.empty() || addr.find('=') != std::string::npos) {
      why = "the nameserver list \"" + Trim(fields[0]) + "\" is not host:port[,host:port...]";
      break;
    }
    o.nameservers += (o.nameservers.empty() ? "" : ",") + addr;
  }
  std::set<std::string> seen;
  for (size_t i = 1; i < fields.size() && why.empty(); i++) {
    std::string field = Trim(fields[i]);
    size_t eq = field.find('=');
    std::string key = Trim(field.substr(0, eq)), value = eq == std::string::npos ? "" : Trim(field.substr(eq + 1));
    int64_t* millis = key == "session_ttl_ms" ? &o.session_ttl_ms
                      : key == "call_timeout_ms" ? &o.call_timeout_ms
                      : key == "lock_wait_ms" ? &o.lock_wait_ms
                      : key == "clear_wait_ms" ? &o.clear_wait_ms
                                               : nullptr;
    if (eq == std::string::npos) {
      why = "option \"" + field + "\" is not key=value";
    } else if (!seen.insert(key).second) {
      why = "option " + key + " is given twice";
    } else if (key == "holder") {
      o.holder = value;
    } else if (key == "certs_dir") {
      o.certs_dir = value;
    } else if (key == "user") {
      o.user = value;
    } else if (key == "insecure") {
      if (value != "0" && value != "1") why = "option insecure=" + value + ": want 0 or 1";
      o.insecure = value == "1";
    } else if (millis == nullptr) {
      why = "unknown option \"" + key +
            "\" (holder, certs_dir, user, insecure, session_ttl_ms, call_timeout_ms, lock_wait_ms, clear_wait_ms)";
    } else if (!Millis(value, millis)) {
      why = "option " + key + "=" + value + ": want milliseconds, a non-negative integer";
    }
  }
  if (!why.empty()) {
    if (error != nullptr) *error = "conf \"" + conf + "\": " + why;
    return false;
  }
  *options = o;
  return true;
}

// HeldLock is a lock LockDirectory took: the argument of its lost-lock
// callback. It is deleted only after bfs_unlock (or bfs_fs_close)
// returned, when its callback is not running and will not start.
struct BfsDfs::HeldLock {
  BfsDfs* dfs;
  std::string path;
  bfs_lock lock;
};

BfsDfs* BfsDfs::Open(const BfsDfsOptions& options) {
  bfs_options o;
  memset(&o, 0, sizeof o);
  o.nameservers = options.nameservers.c_str();
  o.holder = options.holder.empty() ? nullptr : options.holder.c_str();
  o.session_ttl_ms = options.session_ttl_ms;
  o.call_timeout_ms = options.call_timeout_ms;
  o.certs_dir = options.certs_dir.empty() ? nullptr : options.certs_dir.c_str();
  o.user = options.user.empty() ? nullptr : options.user.c_str();
  o.insecure = options.insecure ? 1 : 0;
  bfs_fs fs = 0;
  int code = bfs_fs_open(&o, &fs);
  if (code != BFS_OK) {
    Fail(code);
    return nullptr;
  }
  return new BfsDfs(fs, options);
}

BfsDfs::BfsDfs(bfs_fs fs, const BfsDfsOptions& options) : fs_(fs), options_(options) {}

BfsDfs::~BfsDfs() {
  bfs_fs_close(fs_);  // releases the locks: no callback runs after it
  for (auto& kv : held_) delete kv.second;
}

int32_t BfsDfs::CreateDirectory(const std::string& path) {
  int code = bfs_mkdir(fs_, path.c_str(), 0, BFS_MKDIR_PARENTS);
  if (code != BFS_ERR_LOCKED && code != BFS_ERR_STALE_EPOCH && code != BFS_ERR_CLEANING) return Result(code);
  // The nameserver refuses a mkdir under a lock it does not let pass even
  // when the directory is there already; for Tera that is success: it
  // creates a tablet's directory before it locks it, every time it opens
  // the tablet (and asserts that this worked), so a second tablet server
  // must fail at the lock, not here.
  const std::string why = bfs_last_error_message();
  bfs_file_info info;
  if (bfs_stat(fs_, path.c_str(), &info) == BFS_OK && info.is_dir) return 0;
  return Refuse(code, why);
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
  if (size == nullptr) return Refuse(BFS_ERR_INVALID_ARGUMENT, "GetFileSize: size is NULL");
  bfs_file_info info;
  int code = bfs_stat(fs_, filename.c_str(), &info);
  if (code != BFS_OK) return Fail(code);
  *size = static_cast<uint64_t>(info.size);
  return 0;
}

int32_t BfsDfs::Rename(const std::string& from, const std::string& to) {
  return Result(bfs_rename(fs_, from.c_str(), to.c_str()));
}

int32_t BfsDfs::Copy(const std::string& from, const std::string& to) {
  bfs_file in = 0, out = 0;
  int code = bfs_open(fs_, from.c_str(), &in);
  if (code != BFS_OK) return Fail(code);
  // The create passes the same lock check as every create.
  code = bfs_create(fs_, to.c_str(), BFS_CREATE_OVERWRITE, 0, 0, &out);
  if (code != BFS_OK) {
    Fail(code);
    bfs_close(in);
    return Again();
  }
  std::vector<char> buf(kCopyBuffer);
  for (;;) {
    size_t n = 0;
    code = bfs_read(in, buf.data(), buf.size(), &n);
    if (code != BFS_OK || n == 0) break;
    code = bfs_write(out, buf.data(), n);
    if (code != BFS_OK) break;
  }
  if (code != BFS_OK) Fail(code);
  bfs_close(in);
  int closed = bfs_close(out);
  if (code == BFS_OK && closed == BFS_OK) return 0;
  if (code == BFS_OK) Fail(closed);
  bfs_remove(fs_, to.c_str());  // never leave a partial copy behind
  return Again();
}

int32_t BfsDfs::ListDirectory(const std::string& path, std::vector<std::string>* result) {
  if (result == nullptr) return Refuse(BFS_ERR_INVALID_ARGUMENT, "ListDirectory: result is NULL");
  bfs_dirent* entries = nullptr;
  size_t count = 0;
  int code = bfs_list(fs_, path.c_str(), &entries, &count);
  if (code != BFS_OK) return Fail(code);
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
  int ignored = BFS_OK;
  Release(&lost, &ignored);  // a lost lock: only its handle is freed
  bfs_lock lock = 0;
  int code = bfs_lock_dir(fs_, p.c_str(), options_.lock_wait_ms, &lock);
  if (code != BFS_OK) return Fail(code);
  HeldLock* held = new HeldLock{this, p, lock};
  code = bfs_lock_on_lost(lock, &BfsDfs::OnLost, held);
  if (code != BFS_OK) {
    Fail(code);
    bfs_unlock(lock);
    delete held;
    return Again();
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
  int failure = BFS_OK;
  Release(&release, &failure);
  return failure == BFS_OK ? 0 : Again();
}

// Release unlocks and deletes every lock of held; the first failure is
// recorded (Fail) and its code left in *first_failure.
void BfsDfs::Release(std::vector<HeldLock*>* held, int* first_failure) {
  for (HeldLock* h : *held) {
    int code = bfs_unlock(h->lock);
    if (code != BFS_OK && *first_failure == BFS_OK) {
      Fail(code);
      *first_failure = code;
    }
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
  switch (flags) {
    case kOpenRead:
      code = bfs_open(fs_, filename.c_str(), &file);
      break;
    case kOpenWrite:
      code = bfs_create(fs_, filename.c_str(), BFS_CREATE_OVERWRITE, 0, 0, &file);
      break;
    default:
      Refuse(BFS_ERR_INVALID_ARGUMENT, "OpenFile " + filename + ": flags " + std::to_string(flags) +
                                           " are neither 1 (read) nor 2 (write)");
      return nullptr;
  }
  if (code != BFS_OK) {
    Fail(code);
    return nullptr;
  }
  return new BfsFile(fs_, file, flags == kOpenWrite,
                     flags == kOpenWrite ? LocksOver(filename) : std::vector<std::pair<std::string, uint64_t> >());
}

std::vector<std::pair<std::string, uint64_t> > BfsDfs::LocksOver(const std::string& path) {
  std::vector<std::pair<std::string, uint64_t> > out;
  std::lock_guard<std::mutex> l(mu_);
  if (held_.empty()) return out;
  for (std::string p = Clean(path);;) {
    auto it = held_.find(p);
    uint64_t epoch = 0;
    if (it != held_.end() && bfs_lock_epoch(it->second->lock, &epoch) == BFS_OK) out.emplace_back(p, epoch);
    size_t slash = p.find_last_of('/');
    if (slash == std::string::npos || p == "/") break;
    p = slash == 0 ? "/" : p.substr(0, slash);
  }
  return out;
}

int32_t BfsDfs::Stat(const std::string& filename, struct stat* fstat) {
  if (fstat == nullptr) return Refuse(BFS_ERR_INVALID_ARGUMENT, "Stat: fstat is NULL");
  bfs_file_info info;
  int code = bfs_stat(fs_, filename.c_str(), &info);
  if (code != BFS_OK) return Fail(code);
  memset(fstat, 0, sizeof *fstat);
  fstat->st_size = static_cast<off_t>(info.size);
  fstat->st_mode = static_cast<mode_t>((info.is_dir ? S_IFDIR : S_IFREG) | info.mode);
  fstat->st_ino = static_cast<ino_t>(info.entry_id);
  fstat->st_nlink = 1;
  fstat->st_blksize = 1 << 20;
  fstat->st_blocks = static_cast<blkcnt_t>((info.size + 511) / 512);
  struct timespec mtime;
  mtime.tv_sec = static_cast<time_t>(info.mtime_ns / 1000000000);
  mtime.tv_nsec = static_cast<long>(info.mtime_ns % 1000000000);
  fstat->st_mtim = fstat->st_atim = fstat->st_ctim = mtime;
  return 0;
}

void BfsDfs::SetLockLostHandler(const LockLostHandler& handler) {
  std::lock_guard<std::mutex> l(mu_);
  handler_ = handler;
}

int32_t BfsDfs::LockStatus(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = held_.find(Clean(path));
  if (it == held_.end()) return Refuse(BFS_ERR_UNLOCKED, "this plugin holds no lock of " + path);
  return Result(bfs_lock_poll(it->second->lock));
}

uint64_t BfsDfs::LockEpoch(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = held_.find(Clean(path));
  uint64_t epoch = 0;
  if (it != held_.end() && bfs_lock_epoch(it->second->lock, &epoch) != BFS_OK) return 0;
  return epoch;
}

void BfsDfs::OnLost(bfs_lock, int, const char* message, void* arg) {
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
    handler(path, message != nullptr ? message : "");
  } catch (...) {
    // Nothing may unwind into the library's thread.
  }
}

}  // namespace bfs

extern "C" leveldb::Dfs* NewDfs(const char* conf) {
  bfs::BfsDfsOptions options;
  std::string why;
  if (conf == nullptr || !bfs::BfsDfsOptions::Parse(conf, &options, &why)) {
    bfs::Refuse(BFS_ERR_INVALID_ARGUMENT, conf == nullptr ? "conf is NULL" : why);
  } else if (leveldb::Dfs* dfs = bfs::BfsDfs::Open(options)) {
    return dfs;
  }
  fprintf(stderr, "bfs_dfs: NewDfs: %s\n", bfs::LastMessage());
  bfs::Again();  // errno again, after the print
  return nullptr;
}

extern "C" int bfs_dfs_last_status(void) { return bfs::LastStatus(); }

extern "C" const char* bfs_dfs_last_message(void) { return bfs::LastMessage(); }
