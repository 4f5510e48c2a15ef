// The Tera plugin test: libbfs_dfs.so loaded and called exactly as Tera
// loads and calls a DFS plugin, with none of the plugin's headers: through
// Tera's interface as tera_dfs.h declares it. If the plugin's vtable differed
// by one slot, calls would land in the wrong methods and the checks below
// would fail (that is how the adapter without Copy failed here: Tera's
// ListDirectory ran its LockDirectory). If the plugin's classes were not
// leveldb::Dfs and leveldb::DfsFile, UBSan's vptr check fails the first
// call (built with -fsanitize=undefined, as the Go test builds it).
//
// It checks every method, the open flags (Tera's 1 and 2), errno for each
// kind of failure, and the failover of a tablet between tablet-server
// processes: A locks and writes, the master clears the directory's owner,
// B locks and reads every byte A synced, A is fenced (also when B has
// deleted A's log meanwhile, as Tera's leveldb does); then a holder killed
// with SIGKILL, its tablet taken over through the master and through the
// end of its session. The tablet servers are this program run again
// ("server" role), driven through their stdin and stdout.
//
// Run by libbfs's Go test against a running cluster (BFS_NAMESERVER) under
// BFS_TEST_ROOT, with the plugin in BFS_DFS_PLUGIN; prints one "ok" line
// per test and "PASS"; exits non-zero at the first failed check.
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bfs.h"  // the status codes only: this program links nothing of libbfs
#include "check.h"
#include "tera_dfs.h"

extern char** environ;

namespace {

using leveldb::Dfs;
using leveldb::DfsFile;
using leveldb::kReadOnly;
using leveldb::kWriteOnly;

std::string nameserver;
std::string root;

// The plugin, loaded once per process as Tera's Dfs::NewDfs loads it.
struct Plugin {
  leveldb::Creator create = nullptr;
  int (*status)() = nullptr;            // bfs_dfs_last_status
  const char* (*message)() = nullptr;   // bfs_dfs_last_message
} plugin;

// Load opens the plugin as Tera does and finds its symbols.
void Load(const char* path) {
  void* h = nullptr;
  plugin.create = OpenPlugin(path, &h);
  plugin.status = reinterpret_cast<int (*)()>(dlsym(h, "bfs_dfs_last_status"));
  plugin.message = reinterpret_cast<const char* (*)()>(dlsym(h, "bfs_dfs_last_message"));
  CHECK(plugin.status != nullptr && plugin.message != nullptr);
}

// bfs_name is the name of a bfs.h code (bfs_strerror is libbfs's, which
// this program does not link).
const char* bfs_name(int code) {
  static const char* const names[] = {
      "BFS_OK", "INVALID_ARGUMENT", "BAD_HANDLE", "NOT_FOUND", "EXISTS", "NOT_DIRECTORY", "IS_DIRECTORY",
      "NOT_EMPTY", "PERMISSION_DENIED", "LOCKED", "UNLOCKED", "CLEANING", "STALE_EPOCH", "LOCK_LOST",
      "SESSION_EXPIRED", "SEALED", "NOT_OPEN", "NOT_LEADER", "UNAVAILABLE", "TIMEOUT", "CLOSED", "CORRUPT",
      "UNIMPLEMENTED", "INTERNAL", "UNKNOWN", "RESOURCE_EXHAUSTED"};
  return code >= 0 && code < static_cast<int>(sizeof names / sizeof names[0]) ? names[code] : "?";
}

// Failed reports a failed check and exits. status and message are the
// plugin's after the call.
void Failed(const char* file, int line, const std::string& expr, const std::string& want, long long got, int err,
            int status, const char* message) {
  fprintf(stderr, "%s:%d: %s\n  want %s\n  got  %lld, errno %d (%s), plugin status %s\n  message: %s\n", file,
          line, expr.c_str(), want.c_str(), got, err, strerror(err), bfs_name(status), message);
  exit(1);
}

// EXPECT(want, expr): expr returns want.
#define EXPECT(want, expr)                                                                     \
  do {                                                                                         \
    long long w_ = static_cast<long long>(want), g_ = static_cast<long long>(expr);            \
    if (w_ != g_) Failed(__FILE__, __LINE__, #expr, std::to_string(w_), g_, errno, plugin.status(), plugin.message());            \
  } while (0)

// FAILS(err, code, expr): expr returns -1 (or NULL), errno is err and the
// plugin's last status is the bfs.h code. errno is set to something else
// first, so that a plugin leaving it alone fails.
#define FAILS(err, code, expr)                                                                 \
  do {                                                                                         \
    errno = EDOM;                                                                              \
    long long g_ = Ret(expr);                                                                  \
    int e_ = errno;                                                                            \
    if (g_ != -1 || e_ != (err) || plugin.status() != (code))                                  \
      Failed(__FILE__, __LINE__, #expr, std::string("-1, errno ") + strerror(err) + ", " + bfs_name(code), g_, e_, \
             plugin.status(), plugin.message()); \
  } while (0)

long long Ret(long long v) { return v; }
long long Ret(DfsFile* f) {
  delete f;
  return f == nullptr ? -1 : 0;
}
long long Ret(Dfs* d) {
  delete d;
  return d == nullptr ? -1 : 0;
}

// Conf is the conf string of a plugin instance with holder and options.
std::string Conf(const std::string& holder, const std::string& options = ";session_ttl_ms=3000") {
  return nameserver + ";holder=" + holder + options;
}

// MasterConf is the conf string of the master's plugin instance: its
// ClearDirOwner needs an admin certificate.
std::string MasterConf(const std::string& holder) { return Conf(holder, ";session_ttl_ms=3000;user=admin"); }

std::unique_ptr<Dfs> New(const std::string& conf) {
  Dfs* d = plugin.create(conf.c_str());
  if (d == nullptr) {
    fprintf(stderr, "NewDfs(%s) failed: %s\n", conf.c_str(), plugin.message());
    exit(1);
  }
  return std::unique_ptr<Dfs>(d);
}

// Byte i of every test file.
char At(int64_t i) { return static_cast<char>((i * 131 + (i >> 9)) & 0xff); }

std::string Pattern(int64_t from, int64_t n) {
  std::string s(static_cast<size_t>(n), '\0');
  for (int64_t i = 0; i < n; i++) s[static_cast<size_t>(i)] = At(from + i);
  return s;
}

// Put writes n pattern bytes to name in writes of chunk bytes.
void Put(Dfs* dfs, const std::string& name, int64_t n, int32_t chunk) {
  std::unique_ptr<DfsFile> f(dfs->OpenFile(name, kWriteOnly));
  if (f == nullptr) {
    Failed(__FILE__, __LINE__, "OpenFile(\"" + name + "\", 2 (Tera's WRONLY))", "a file open for write", -1, errno,
           plugin.status(), plugin.message());
  }
  for (int64_t off = 0; off < n; off += chunk) {
    int32_t k = static_cast<int32_t>(std::min<int64_t>(chunk, n - off));
    std::string data = Pattern(off, k);
    EXPECT(k, f->Write(data.data(), k));
  }
  EXPECT(n, f->Tell());
  EXPECT(0, f->CloseFile());
}

// Verify reads name to its end and returns its size, or -2 if a byte is
// not the pattern's.
int64_t Verify(Dfs* dfs, const std::string& name) {
  std::unique_ptr<DfsFile> f(dfs->OpenFile(name, kReadOnly));
  if (f == nullptr) return -1;
  std::vector<char> buf(65536 + 7);
  int64_t off = 0;
  for (;;) {
    int32_t n = f->Read(buf.data(), static_cast<int32_t>(buf.size()));
    if (n < 0) return -1;
    if (n == 0) break;
    for (int32_t i = 0; i < n; i++) {
      if (buf[static_cast<size_t>(i)] != At(off + i)) return -2;
    }
    off += n;
  }
  EXPECT(off, f->Tell());
  EXPECT(0, f->CloseFile());
  return off;
}

uint64_t Size(Dfs* dfs, const std::string& name) {
  uint64_t size = 0;
  EXPECT(0, dfs->GetFileSize(name, &size));
  return size;
}

// TestLoad: NewDfs reads its conf strictly and fails with errno.
void TestLoad() {
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, plugin.create(""));
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, plugin.create((nameserver + ";colour=blue").c_str()));
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, plugin.create((nameserver + ";lock_wait_ms=soon").c_str()));
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, plugin.create((nameserver + ";holder=a;holder=b").c_str()));
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, plugin.create((nameserver + ",,").c_str()));
  // Nothing listens on port 1: the nameserver cannot be reached.
  FAILS(EIO, BFS_ERR_UNAVAILABLE, plugin.create("127.0.0.1:1;call_timeout_ms=5000"));
  // Certificates: none where certs_dir points, a user without one, both
  // plaintext and a directory; a secure cluster refuses a plaintext client.
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, plugin.create((nameserver + ";certs_dir=/nonexistent-certs").c_str()));
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, plugin.create((nameserver + ";user=nobody").c_str()));
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, plugin.create((nameserver + ";insecure=1;certs_dir=/tmp").c_str()));
  FAILS(EIO, BFS_ERR_UNAVAILABLE, plugin.create((nameserver + ";insecure=1;call_timeout_ms=5000").c_str()));
  // A list of nameservers is a group: calls find its leader, past a member
  // that does not answer.
  EXPECT(0, Ret(plugin.create(("127.0.0.1:1 , " + nameserver + " ;holder=list").c_str())));
  std::unique_ptr<Dfs> ok = New(" " + nameserver + " ; holder = loader ; lock_wait_ms = 0 ");
  EXPECT(0, ok->Exists("/"));
}

// TestMethods: every method, as Tera's Env calls them.
void TestMethods() {
  std::unique_ptr<Dfs> dfs = New(Conf("methods"));
  const std::string dir = root + "/methods/a/b";
  EXPECT(0, dfs->CreateDirectory(dir));
  EXPECT(0, dfs->CreateDirectory(dir));  // exists: fine
  EXPECT(0, dfs->Exists(dir));
  // The first slot past Copy: a vtable without Copy runs LockDirectory
  // here, which returns 0 and lists nothing.
  std::vector<std::string> names;
  EXPECT(0, dfs->ListDirectory(root + "/methods/a", &names));
  CHECK(names.size() == 1 && names[0] == "b");
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->Exists(dir + "/missing"));

  const int64_t size = 2 * 1024 * 1024 + 333;
  const std::string data = Pattern(0, size);
  const std::string sst = dir + "/000001.sst";
  {
    std::unique_ptr<DfsFile> f(dfs->OpenFile(sst, kWriteOnly));
    CHECK(f != nullptr);
    EXPECT(1000, f->Write(data.data(), 1000));
    EXPECT(0, f->Flush());
    EXPECT(size - 1000, f->Write(data.data() + 1000, static_cast<int32_t>(size - 1000)));
    EXPECT(0, f->Sync());
    EXPECT(size, f->Tell());
    FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, f->Seek(0));
    FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, f->Write(data.data(), -1));
    char c;
    FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, f->Read(&c, 1));
    EXPECT(0, f->CloseFile());
    EXPECT(0, f->CloseFile());  // twice is fine
  }
  EXPECT(size, Size(dfs.get(), sst));
  struct stat st;
  EXPECT(0, dfs->Stat(sst, &st));
  CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0644);
  EXPECT(size, st.st_size);
  CHECK(st.st_ino != 0 && st.st_nlink == 1 && st.st_blocks == (size + 511) / 512);
  CHECK(st.st_mtime > time(nullptr) - 3600 && st.st_mtime < time(nullptr) + 3600);
  EXPECT(0, dfs->Stat(dir, &st));
  CHECK(S_ISDIR(st.st_mode));
  EXPECT(size, Verify(dfs.get(), sst));

  {
    std::unique_ptr<DfsFile> f(dfs->OpenFile(sst, kReadOnly));
    CHECK(f != nullptr);
    char buf[5000];
    EXPECT(5000, f->Pread(123456, buf, 5000));
    CHECK(memcmp(buf, data.data() + 123456, 5000) == 0);
    EXPECT(7, f->Pread(size - 7, buf, 5000));
    EXPECT(0, f->Pread(size, buf, 5000));
    EXPECT(0, f->Tell());  // Pread leaves the offset alone
    EXPECT(0, f->Seek(777));
    EXPECT(100, f->Read(buf, 100));
    CHECK(memcmp(buf, data.data() + 777, 100) == 0);
    EXPECT(877, f->Tell());
    FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, f->Write(buf, 1));
    FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, f->Read(buf, -1));
    FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, f->Pread(-5, buf, 10));
    FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, f->Sync());
    EXPECT(0, f->Flush());  // nothing to flush on a reader
    EXPECT(0, f->CloseFile());
  }

  Put(dfs.get(), dir + "/000002.sst", 10, 10);
  // Names only, appended after what the vector held (as Tera's plugins do).
  names.assign(1, "kept");
  EXPECT(0, dfs->ListDirectory(dir, &names));
  CHECK(names.size() == 3 && names[0] == "kept" && names[1] == "000001.sst" && names[2] == "000002.sst");

  EXPECT(0, dfs->Rename(dir + "/000002.sst", dir + "/000003.sst"));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->Exists(dir + "/000002.sst"));
  EXPECT(10, Size(dfs.get(), dir + "/000003.sst"));
  // Rename replaces a file (Tera renames CURRENT over CURRENT).
  EXPECT(0, dfs->Rename(dir + "/000003.sst", sst + ".bak"));
  Put(dfs.get(), dir + "/000003.sst", 20, 20);
  EXPECT(0, dfs->Rename(dir + "/000003.sst", sst + ".bak"));
  EXPECT(20, Size(dfs.get(), sst + ".bak"));

  // Copy, also over a file that is there.
  EXPECT(0, dfs->Copy(sst, dir + "/copy.sst"));
  EXPECT(size, Verify(dfs.get(), dir + "/copy.sst"));
  EXPECT(0, dfs->Copy(sst + ".bak", dir + "/copy.sst"));
  EXPECT(20, Verify(dfs.get(), dir + "/copy.sst"));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->Copy(dir + "/missing", dir + "/copy2.sst"));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->Exists(dir + "/copy2.sst"));

  EXPECT(0, dfs->Delete(dir + "/copy.sst"));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->Delete(dir + "/copy.sst"));
  // A writer whose file was deleted closes fine, as after a POSIX unlink
  // (Tera deletes an obsolete log before it closes its writer).
  {
    std::unique_ptr<DfsFile> f(dfs->OpenFile(dir + "/000009.log", kWriteOnly));
    CHECK(f != nullptr);
    EXPECT(5000, f->Write(data.data(), 5000));
    EXPECT(0, f->Sync());
    EXPECT(100, f->Write(data.data(), 100));
    EXPECT(0, dfs->Delete(dir + "/000009.log"));
    EXPECT(0, f->CloseFile());
    FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->Exists(dir + "/000009.log"));
  }
  EXPECT(0, dfs->DeleteDirectory(root + "/methods"));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->Exists(dir));
}

// TestFlags: Tera opens with 1 (read) and 2 (write), never O_RDONLY (0)
// and O_WRONLY (1). A read must never truncate.
void TestFlags() {
  std::unique_ptr<Dfs> dfs = New(Conf("flags"));
  const std::string dir = root + "/flags";
  EXPECT(0, dfs->CreateDirectory(dir));
  const std::string f = dir + "/300k";
  Put(dfs.get(), f, 300000, 65536);
  for (int round = 0; round < 2; round++) {
    std::unique_ptr<DfsFile> r(dfs->OpenFile(f, kReadOnly));
    CHECK(r != nullptr);
    char buf[100];
    EXPECT(100, r->Read(buf, 100));
    CHECK(memcmp(buf, Pattern(0, 100).data(), 100) == 0);
    EXPECT(0, r->CloseFile());
    EXPECT(300000, Size(dfs.get(), f));
  }
  EXPECT(300000, Verify(dfs.get(), f));
  // Flags that are not Tera's are refused, and touch nothing.
  for (int32_t bad : {0, 3, 4, 0100 | kWriteOnly, -1}) {
    FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, dfs->OpenFile(f, bad));
    FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, dfs->OpenFile(dir + "/new", bad));
  }
  EXPECT(300000, Size(dfs.get(), f));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->Exists(dir + "/new"));
  // 2 creates, and replaces a file that is there.
  Put(dfs.get(), dir + "/new", 10, 10);
  Put(dfs.get(), f, 5, 5);
  EXPECT(5, Verify(dfs.get(), f));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->OpenFile(dir + "/missing", kReadOnly));
}

// TestErrno: each kind of failure, with errno and the plugin's status.
void TestErrno() {
  std::unique_ptr<Dfs> dfs = New(Conf("errno"));
  const std::string dir = root + "/errno";
  const std::string file = dir + "/file", missing = dir + "/missing";
  EXPECT(0, dfs->CreateDirectory(dir + "/sub"));
  Put(dfs.get(), file, 100, 100);
  Put(dfs.get(), dir + "/sub/inner", 1, 1);

  // ENOENT: nothing there.
  uint64_t size;
  struct stat st;
  std::vector<std::string> names;
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->Exists(missing));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->GetFileSize(missing, &size));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->Stat(missing, &st));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->Delete(missing));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->DeleteDirectory(missing));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->Rename(missing, dir + "/x"));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->ListDirectory(missing, &names));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->OpenFile(missing, kReadOnly));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->OpenFile(missing + "/below", kWriteOnly));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, dfs->Copy(missing, dir + "/x"));
  // EEXIST, ENOTDIR, EISDIR: the wrong kind of entry.
  FAILS(EEXIST, BFS_ERR_EXISTS, dfs->CreateDirectory(file));
  FAILS(ENOTDIR, BFS_ERR_NOT_DIRECTORY, dfs->ListDirectory(file, &names));
  FAILS(ENOTDIR, BFS_ERR_NOT_DIRECTORY, dfs->CreateDirectory(file + "/sub"));
  FAILS(ENOTDIR, BFS_ERR_NOT_DIRECTORY, dfs->DeleteDirectory(file));
  FAILS(EISDIR, BFS_ERR_IS_DIRECTORY, dfs->Delete(dir + "/sub"));
  FAILS(EISDIR, BFS_ERR_IS_DIRECTORY, dfs->OpenFile(dir + "/sub", kReadOnly));
  FAILS(EISDIR, BFS_ERR_IS_DIRECTORY, dfs->OpenFile(dir + "/sub", kWriteOnly));
  FAILS(EEXIST, BFS_ERR_EXISTS, dfs->Rename(file, dir + "/sub"));
  CHECK(names.empty());
  // EINVAL: bad paths and arguments.
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, dfs->Exists("relative"));
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, dfs->CreateDirectory(dir + "/../up"));
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, dfs->OpenFile("", kWriteOnly));
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, dfs->GetFileSize(file, nullptr));
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, dfs->Stat(file, nullptr));
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, dfs->ListDirectory(dir, nullptr));
  FAILS(EINVAL, BFS_ERR_INVALID_ARGUMENT, dfs->Rename(dir, dir + "/sub/into-itself"));
  EXPECT(0, dfs->DeleteDirectory(dir));
}

// TestLocks: LockDirectory, UnlockDirectory and ClearDirOwner between two
// tablet servers and a master (three plugin instances, three sessions),
// and every mutation refused in a directory another holds: EACCES.
void TestLocks() {
  std::unique_ptr<Dfs> master = New(MasterConf("master"));
  std::unique_ptr<Dfs> a = New(Conf("server-a"));
  std::unique_ptr<Dfs> b = New(Conf("server-b"));
  const std::string tablet = root + "/locks/tablet", lg = tablet + "/lg0", outside = root + "/locks/outside";
  EXPECT(0, master->CreateDirectory(lg));
  EXPECT(0, master->CreateDirectory(outside));
  Put(master.get(), lg + "/old.sst", 1000, 1000);
  Put(master.get(), outside + "/in.sst", 2000, 2000);

  EXPECT(0, a->LockDirectory(tablet));
  EXPECT(0, a->LockDirectory(lg));  // nested
  EXPECT(0, a->LockDirectory(tablet + "/"));  // held already
  Put(a.get(), lg + "/a.sst", 3000, 1000);

  // Only the master (an admin identity) clears a directory's owner.
  FAILS(EACCES, BFS_ERR_PERMISSION_DENIED, b->ClearDirOwner(tablet));
  // b fails at once (Tera's master decides when a holder is dead).
  FAILS(EACCES, BFS_ERR_LOCKED, b->LockDirectory(tablet));
  FAILS(EACCES, BFS_ERR_LOCKED, b->LockDirectory(lg));
  FAILS(EACCES, BFS_ERR_LOCKED, b->LockDirectory(root + "/locks"));  // over a's lock
  FAILS(EACCES, BFS_ERR_LOCKED, b->CreateDirectory(tablet + "/lg1"));
  EXPECT(0, b->CreateDirectory(lg));  // there already: fine (Tera makes it before it locks)
  FAILS(EACCES, BFS_ERR_LOCKED, b->OpenFile(lg + "/b.sst", kWriteOnly));
  FAILS(EACCES, BFS_ERR_LOCKED, b->Delete(lg + "/old.sst"));
  FAILS(EACCES, BFS_ERR_LOCKED, b->Rename(lg + "/old.sst", lg + "/moved.sst"));
  FAILS(EACCES, BFS_ERR_LOCKED, b->Rename(outside + "/in.sst", lg + "/in.sst"));
  FAILS(EACCES, BFS_ERR_LOCKED, b->DeleteDirectory(lg));
  // Copy creates its target as every create does: refused, and nothing
  // is left behind; copying out of the directory is a read, allowed.
  FAILS(EACCES, BFS_ERR_LOCKED, b->Copy(outside + "/in.sst", lg + "/copied.sst"));
  FAILS(ENOENT, BFS_ERR_NOT_FOUND, b->Exists(lg + "/copied.sst"));
  FAILS(EACCES, BFS_ERR_LOCKED, b->Copy(lg + "/old.sst", lg + "/old.sst.copy"));
  EXPECT(0, b->Copy(lg + "/a.sst", outside + "/a.sst"));
  EXPECT(3000, Verify(b.get(), outside + "/a.sst"));
  EXPECT(0, a->Copy(outside + "/in.sst", lg + "/copied.sst"));  // the holder may
  EXPECT(2000, Verify(a.get(), lg + "/copied.sst"));
  // Reads are never refused.
  EXPECT(3000, Verify(b.get(), lg + "/a.sst"));
  // With lock_wait_ms, LockDirectory waits that long, then ETIMEDOUT.
  std::unique_ptr<Dfs> patient = New(Conf("server-c", ";lock_wait_ms=300"));
  FAILS(ETIMEDOUT, BFS_ERR_TIMEOUT, patient->LockDirectory(tablet));

  // a unloads: its locks go, deepest first, and b may lock at once.
  EXPECT(0, a->UnlockDirectory(tablet));
  EXPECT(0, b->LockDirectory(lg));
  EXPECT(0, b->UnlockDirectory(lg));
  EXPECT(0, b->UnlockDirectory(lg));  // not locked: a retry, fine

  // The master clears a's ownership; b locks at once; a is fenced.
  EXPECT(0, a->LockDirectory(tablet));
  EXPECT(0, master->ClearDirOwner(tablet));
  EXPECT(0, b->LockDirectory(tablet));
  FAILS(EACCES, BFS_ERR_STALE_EPOCH, a->Delete(lg + "/a.sst"));
  FAILS(EACCES, BFS_ERR_STALE_EPOCH, a->OpenFile(lg + "/late.sst", kWriteOnly));
  FAILS(EACCES, BFS_ERR_STALE_EPOCH, a->Copy(outside + "/in.sst", lg + "/late.sst"));
  EXPECT(0, master->ClearDirOwner(tablet));
  EXPECT(0, master->ClearDirOwner(tablet));  // unlocked already: fine
  EXPECT(0, master->DeleteDirectory(root + "/locks"));
}

// Server is a tablet server: this program run again in the "server" role,
// with a plugin instance of its own, taking one command a line.
class Server {
 public:
  Server(const std::string& name, const std::string& conf) : name_(name) {
    int in[2], out[2];
    CHECK(pipe(in) == 0 && pipe(out) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    std::string self = "/proc/self/exe", role = "server";
    char* argv[] = {&self[0], &role[0], const_cast<char*>(conf.c_str()), nullptr};
    CHECK(posix_spawn(&pid_, "/proc/self/exe", &fa, nullptr, argv, environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    to_ = fdopen(in[1], "w");
    from_ = fdopen(out[0], "r");
    CHECK(to_ != nullptr && from_ != nullptr);
  }

  ~Server() {
    if (pid_ > 0) {
      Call("exit");
      Reap(0);
    }
    fclose(to_);
    fclose(from_);
  }

  // Reply is what a command returned, and errno and the plugin's status
  // after it.
  struct Reply {
    long long ret;
    int err, status;
  };

  Reply Call(const std::string& command) {
    fprintf(to_, "%s\n", command.c_str());
    fflush(to_);
    char line[256];
    Reply r = {0, 0, 0};
    if (fgets(line, sizeof line, from_) == nullptr || sscanf(line, "%lld %d %d", &r.ret, &r.err, &r.status) != 3) {
      fprintf(stderr, "server %s: no answer to \"%s\"\n", name_.c_str(), command.c_str());
      exit(1);
    }
    return r;
  }

  // Kill kills the server with SIGKILL.
  void Kill() {
    CHECK(kill(pid_, SIGKILL) == 0);
    Reap(SIGKILL);
  }

 private:
  void Reap(int signal) {
    int st = 0;
    CHECK(waitpid(pid_, &st, 0) == pid_);
    CHECK(signal == 0 ? WIFEXITED(st) && WEXITSTATUS(st) == 0 : WIFSIGNALED(st) && WTERMSIG(st) == signal);
    pid_ = 0;
  }

  std::string name_;
  pid_t pid_ = 0;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

// ON(server, want, command): the server's command returned want.
#define ON(server, want, command)                                                             \
  do {                                                                                        \
    Server::Reply r_ = (server).Call(command);                                                \
    if (r_.ret != static_cast<long long>(want))                                               \
      Failed(__FILE__, __LINE__, std::string(#server ": ") + (command),                       \
             std::to_string(static_cast<long long>(want)), r_.ret, r_.err, r_.status, "(see the server's stderr)"); \
  } while (0)

// REFUSED(server, err, code, command): the server's command failed with
// errno err and the plugin's status code.
#define REFUSED(server, want_errno, want_code, command)                                                   \
  do {                                                                                        \
    Server::Reply r_ = (server).Call(command);                                                \
    if (r_.ret != -1 || r_.err != (want_errno) || r_.status != (want_code))                   \
      Failed(__FILE__, __LINE__, std::string(#server ": ") + (command),                       \
             std::string("-1, errno ") + strerror(want_errno) + ", " + bfs_name(want_code), r_.ret, r_.err, \
             r_.status, "(see the server's stderr)");                                         \
  } while (0)

// Serve is the server role: commands on stdin, one reply a line on stdout
// ("RET ERRNO STATUS"). One file open for write at a time, written with
// the pattern bytes from its offset on.
int Serve(const char* conf) {
  std::unique_ptr<Dfs> dfs = New(conf);
  std::unique_ptr<DfsFile> w;
  char line[4096];
  while (fgets(line, sizeof line, stdin) != nullptr) {
    char cmd[32] = "", a[2048] = "", b[2048] = "";
    sscanf(line, "%31s %2047s %2047s", cmd, a, b);
    std::string c = cmd;
    errno = 0;
    long long ret = -3;
    if (c == "lock") ret = dfs->LockDirectory(a);
    if (c == "unlock") ret = dfs->UnlockDirectory(a);
    if (c == "clear") ret = dfs->ClearDirOwner(a);
    if (c == "mkdir") ret = dfs->CreateDirectory(a);
    if (c == "delete") ret = dfs->Delete(a);
    if (c == "rename") ret = dfs->Rename(a, b);
    if (c == "verify") ret = Verify(dfs.get(), a);
    if (c == "create") {
      w.reset(dfs->OpenFile(a, kWriteOnly));
      ret = w ? 0 : -1;
    }
    if (c == "write" && w) {
      int64_t n = atoll(a);
      std::string data = Pattern(w->Tell(), n);
      ret = w->Write(data.data(), static_cast<int32_t>(n));
    }
    if (c == "sync" && w) ret = w->Sync();
    if (c == "close" && w) ret = w->CloseFile();
    if (c == "exit") ret = 0;
    int err = errno;
    printf("%lld %d %d\n", ret, ret < 0 ? err : 0, ret < 0 ? plugin.status() : 0);
    fflush(stdout);
    if (c == "exit") break;
  }
  return 0;
}

// TestFailover: tablet server A locks its tablet and a locality group
// below it, writes, syncs part of it; the master decides A is dead and
// clears the tablet's owner; A's writer and namespace changes are refused
// from then on; B locks the tablet and reads every byte A synced.
void TestFailover() {
  std::unique_ptr<Dfs> master = New(MasterConf("master"));
  const std::string tablet = root + "/failover/tablet1", lg = tablet + "/lg0", log = lg + "/000001.log";
  EXPECT(0, master->CreateDirectory(lg));
  Server a("A", Conf("tablet-server-a:2200")), b("B", Conf("tablet-server-b:2200"));

  ON(a, 0, "lock " + tablet);
  ON(a, 0, "lock " + lg);
  ON(a, 0, "create " + log);
  ON(a, 100 * 1024, "write 102400");
  ON(a, 0, "sync");
  ON(a, 300 * 1024, "write 307200");  // never synced
  REFUSED(b, EACCES, BFS_ERR_LOCKED, "lock " + tablet);
  REFUSED(b, EACCES, BFS_ERR_LOCKED, "mkdir " + tablet + "/lg1");

  EXPECT(0, master->ClearDirOwner(tablet));
  // A is fenced: its writer's next write or sync, its close, and every
  // namespace change under the tablet.
  Server::Reply wrote = a.Call("write 1000");
  Server::Reply synced = wrote.ret < 0 ? wrote : a.Call("sync");
  CHECK(synced.ret == -1 && synced.err == EACCES &&
        (synced.status == BFS_ERR_SEALED || synced.status == BFS_ERR_STALE_EPOCH));
  printf("     A's %s after the clear: errno EACCES, %s\n", wrote.ret < 0 ? "write" : "sync", bfs_name(synced.status));
  CHECK(a.Call("close").ret == -1);
  REFUSED(a, EACCES, BFS_ERR_STALE_EPOCH, "create " + lg + "/000002.log");
  REFUSED(a, EACCES, BFS_ERR_STALE_EPOCH, "delete " + log);
  REFUSED(a, EACCES, BFS_ERR_STALE_EPOCH, "mkdir " + tablet + "/lg1");
  REFUSED(a, EACCES, BFS_ERR_STALE_EPOCH, "rename " + log + " " + lg + "/moved.log");

  // B takes the tablet over: every byte A synced is there.
  ON(b, 0, "lock " + tablet);
  ON(b, 0, "lock " + lg);
  Server::Reply got = b.Call("verify " + log);
  CHECK(got.ret >= 100 * 1024 && got.ret <= 400 * 1024);
  printf("     B read %lld bytes of A's log, all of them A's (A synced 102400, wrote 409600)\n", got.ret);
  ON(b, 0, "create " + lg + "/000002.log");
  ON(b, 5000, "write 5000");
  ON(b, 0, "close");
  REFUSED(a, EACCES, BFS_ERR_LOCKED, "lock " + tablet);  // B holds it now
  ON(b, 0, "unlock " + tablet);
  // A loads the tablet again: the new lock lifts its fence.
  ON(a, 0, "lock " + tablet);
  ON(a, 0, "delete " + lg + "/000002.log");
  ON(a, 0, "unlock " + tablet);
}

// TestFencedAfterDelete: the failover as Tera's own leveldb runs it. B,
// once it has replayed A's log, deletes it (DBTable::Init deletes the logs
// it recovered), and the chunkservers drop the log's replicas. A's writer,
// fenced by the master's ClearDirOwner, must still hear EACCES (Tera's Env
// makes it IOPermissionDenied: the tablet stops writing and is unloaded),
// not ENOENT (a plain IOError, after which Tera retries with a new log).
// A holder that deletes its own log before it closes the writer, as Tera
// does with an obsolete log, still closes fine.
void TestFencedAfterDelete() {
  std::unique_ptr<Dfs> master = New(MasterConf("master"));
  const std::string base = root + "/fenced-delete", tablet = base + "/tablet1", lg = tablet + "/0",
                    old_log = tablet + "/H0000000000000001.log", log = tablet + "/H0000000000004106.log";
  EXPECT(0, master->CreateDirectory(lg));
  Server a("A", Conf("tablet-server-a:2200")), b("B", Conf("tablet-server-b:2200"));
  ON(a, 0, "lock " + tablet);
  ON(a, 0, "lock " + lg);
  ON(a, 0, "create " + old_log);
  ON(a, 1000, "write 1000");
  ON(a, 0, "sync");
  ON(a, 0, "delete " + old_log);
  ON(a, 0, "close");  // its own delete: no fence
  ON(a, 0, "create " + log);
  ON(a, 64 * 1024, "write 65536");
  ON(a, 0, "sync");

  EXPECT(0, master->ClearDirOwner(tablet));
  ON(b, 0, "lock " + tablet);
  ON(b, 0, "lock " + lg);
  Server::Reply got = b.Call("verify " + log);
  CHECK(got.ret >= 64 * 1024);
  ON(b, 0, "delete " + log);
  // The nameserver sends the replicas' DeleteBlocks as it applies the
  // delete; A's next packet then finds no replica at all.
  usleep(1500 * 1000);
  ON(a, 1000, "write 1000");  // buffered
  Server::Reply synced = a.Call("sync");
  if (synced.ret != -1 || synced.err != EACCES ||
      (synced.status != BFS_ERR_STALE_EPOCH && synced.status != BFS_ERR_SEALED))
    Failed(__FILE__, __LINE__, "A: sync of its log, deleted by B", "-1, errno EACCES, STALE_EPOCH or SEALED",
           synced.ret, synced.err, synced.status, "(see the server's stderr)");
  printf("     A's sync after B deleted its log: errno EACCES, %s\n", bfs_name(synced.status));
  Server::Reply closed = a.Call("close");
  if (closed.ret != -1 || closed.err != EACCES)
    Failed(__FILE__, __LINE__, "A: close of its log, deleted by B", "-1, errno EACCES", closed.ret, closed.err,
           closed.status, "(see the server's stderr)");
  ON(b, 0, "unlock " + tablet);
  EXPECT(0, master->DeleteDirectory(base));
}

// TestKilledHolder: a tablet server killed with SIGKILL while it holds
// its tablet with a log open for write. Its session lives on until its
// TTL: the master's ClearDirOwner hands the tablet over at once; and with
// no master, a server waiting for the lock gets it when the session ends.
void TestKilledHolder() {
  std::unique_ptr<Dfs> master = New(MasterConf("master"));
  const std::string base = root + "/killed";
  for (int round = 0; round < 2; round++) {
    const std::string tablet = base + "/tablet" + std::to_string(round), log = tablet + "/000001.log";
    EXPECT(0, master->CreateDirectory(tablet));
    Server holder("holder", Conf("killed-" + std::to_string(round), ";session_ttl_ms=2000"));
    ON(holder, 0, "lock " + tablet);
    ON(holder, 0, "create " + log);
    ON(holder, 65536, "write 65536");
    ON(holder, 0, "sync");
    ON(holder, 1000, "write 1000");
    holder.Kill();

    Server next("next", Conf("next-" + std::to_string(round), round == 0 ? "" : ";lock_wait_ms=20000"));
    if (round == 0) {
      REFUSED(next, EACCES, BFS_ERR_LOCKED, "lock " + tablet);  // its session lives on
      EXPECT(0, master->ClearDirOwner(tablet));
    }
    ON(next, 0, "lock " + tablet);  // round 1: once the dead session expired
    Server::Reply got = next.Call("verify " + log);
    CHECK(got.ret >= 65536 && got.ret <= 65536 + 1000);
    printf("     %s: the next server read %lld bytes (65536 synced)\n",
           round == 0 ? "after ClearDirOwner" : "after the session's end", got.ret);
    ON(next, 0, "unlock " + tablet);
  }
  EXPECT(0, master->DeleteDirectory(base));
}

// only names the tests to run (all when empty).
std::vector<std::string> only;

void Run(const char* name, void (*test)()) {
  if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) return;
  double t0 = now_seconds();
  test();
  printf("ok   %-16s %6.0f ms\n", name, (now_seconds() - t0) * 1000);
  fflush(stdout);
}

}  // namespace

// Usage: tera_plugin_test [TEST...] runs the tests named (all by default);
// tera_plugin_test server CONF is a tablet server of the failover tests.
int main(int argc, char** argv) {
  Load(env_or_die("BFS_DFS_PLUGIN"));
  if (argc == 3 && strcmp(argv[1], "server") == 0) return Serve(argv[2]);
  nameserver = env_or_die("BFS_NAMESERVER");
  root = env_or_die("BFS_TEST_ROOT");
  only.assign(argv + 1, argv + argc);
  EXPECT(0, New(Conf("setup"))->CreateDirectory(root));
  Run("load", TestLoad);
  Run("methods", TestMethods);
  Run("flags", TestFlags);
  Run("errno", TestErrno);
  Run("locks", TestLocks);
  Run("failover", TestFailover);
  Run("fenced_delete", TestFencedAfterDelete);
  Run("killed_holder", TestKilledHolder);
  printf("PASS\n");
  return 0;
}
