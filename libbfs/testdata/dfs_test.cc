// The C++ test of libbfs: the Dfs adapter (cpp/bfs_dfs.h) as a Tera-style
// table store uses it, and the failover of a tablet from one tablet server
// to another by the master. Run by libbfs's Go test against a running
// cluster (BFS_NAMESERVER), under BFS_TEST_ROOT; prints one "ok" line per
// test and "PASS"; exits non-zero at the first failed check.
#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bfs_dfs.h"
#include "check.h"

using bfs::BfsDfs;
using bfs::BfsDfsOptions;
using bfs::DfsFile;

namespace {

std::string nameserver;
std::string root;

// CHECK_EQ compares an adapter result with what it should be; on failure
// it prints both, the thread's last status and the library's message.
#define CHECK_EQ(want, expr)                                                               \
  do {                                                                                     \
    long long w_ = static_cast<long long>(want), g_ = static_cast<long long>(expr);        \
    if (w_ != g_) {                                                                        \
      fprintf(stderr, "%s:%d: %s\n  want %lld\n  got  %lld (last status %d)\n  message: %s\n", \
              __FILE__, __LINE__, #expr, w_, g_, bfs::LastStatus(), bfs_last_error_message()); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

std::unique_ptr<BfsDfs> Connect(const std::string& holder, int64_t lock_wait_ms = 10000) {
  BfsDfsOptions o;
  o.nameservers = nameserver;
  o.holder = holder;
  o.session_ttl_ms = 3000;
  o.lock_wait_ms = lock_wait_ms;
  int32_t status = 1;
  BfsDfs* dfs = BfsDfs::Open(o, &status);
  CHECK_EQ(0, status);
  CHECK(dfs != nullptr);
  return std::unique_ptr<BfsDfs>(dfs);
}

std::string Pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i++) s[i] = static_cast<char>((i * 131 + seed) >> 2);
  return s;
}

// WriteFile writes data to path through the adapter, in writes of chunk
// bytes, and closes it.
void WriteFile(BfsDfs* dfs, const std::string& path, const std::string& data, size_t chunk) {
  std::unique_ptr<DfsFile> f(dfs->OpenFile(path, O_WRONLY));
  CHECK(f != nullptr);
  for (size_t off = 0; off < data.size(); off += chunk) {
    int32_t k = static_cast<int32_t>(std::min(chunk, data.size() - off));
    CHECK_EQ(k, f->Write(data.data() + off, k));
  }
  CHECK_EQ(static_cast<int64_t>(data.size()), f->Tell());
  CHECK_EQ(0, f->CloseFile());
}

std::string ReadFile(BfsDfs* dfs, const std::string& path) {
  std::unique_ptr<DfsFile> f(dfs->OpenFile(path, O_RDONLY));
  CHECK(f != nullptr);
  std::string out;
  char buf[65536 + 7];
  for (;;) {
    int32_t n = f->Read(buf, sizeof buf);
    CHECK(n >= 0);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  CHECK_EQ(0, f->CloseFile());
  return out;
}

void TestFiles() {
  std::unique_ptr<BfsDfs> dfs = Connect("cpp-files");
  const std::string dir = root + "/files/a/b";
  CHECK_EQ(0, dfs->CreateDirectory(dir));
  CHECK_EQ(0, dfs->CreateDirectory(dir));  // exists: fine
  CHECK_EQ(0, dfs->Exists(dir));
  CHECK_EQ(-BFS_ERR_NOT_FOUND, dfs->Exists(dir + "/missing"));

  const std::string data = Pattern(2 * 1024 * 1024 + 333, 5);
  const std::string path = dir + "/000001.sst";
  {
    std::unique_ptr<DfsFile> f(dfs->OpenFile(path, O_WRONLY));
    CHECK(f != nullptr);
    CHECK_EQ(1000, f->Write(data.data(), 1000));
    CHECK_EQ(0, f->Flush());
    CHECK_EQ(static_cast<int32_t>(data.size() - 1000), f->Write(data.data() + 1000, static_cast<int32_t>(data.size() - 1000)));
    CHECK_EQ(0, f->Sync());
    CHECK_EQ(static_cast<int64_t>(data.size()), f->Tell());
    CHECK_EQ(-BFS_ERR_INVALID_ARGUMENT, f->Seek(0));
    CHECK_EQ(-BFS_ERR_INVALID_ARGUMENT, f->Write(data.data(), -1));
    CHECK_EQ(0, f->CloseFile());
    CHECK_EQ(0, f->CloseFile());  // twice is fine
  }
  uint64_t size = 0;
  CHECK_EQ(0, dfs->GetFileSize(path, &size));
  CHECK_EQ(data.size(), size);
  struct stat st;
  CHECK_EQ(0, dfs->Stat(path, &st));
  CHECK(S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0644);
  CHECK_EQ(static_cast<off_t>(data.size()), st.st_size);
  CHECK_EQ(0, dfs->Stat(dir, &st));
  CHECK(S_ISDIR(st.st_mode));
  CHECK(ReadFile(dfs.get(), path) == data);

  {
    std::unique_ptr<DfsFile> f(dfs->OpenFile(path, O_RDONLY));
    CHECK(f != nullptr);
    char buf[5000];
    CHECK_EQ(5000, f->Pread(123456, buf, 5000));
    CHECK(memcmp(buf, data.data() + 123456, 5000) == 0);
    CHECK_EQ(7, f->Pread(static_cast<int64_t>(data.size()) - 7, buf, 5000));
    CHECK_EQ(0, f->Seek(777));
    CHECK_EQ(100, f->Read(buf, 100));
    CHECK(memcmp(buf, data.data() + 777, 100) == 0);
    CHECK_EQ(877, f->Tell());
    CHECK_EQ(-BFS_ERR_INVALID_ARGUMENT, f->Write(buf, 1));
    CHECK_EQ(0, f->Flush());  // nothing to flush on a reader
  }

  WriteFile(dfs.get(), dir + "/000002.sst", Pattern(10, 1), 10);
  std::vector<std::string> names;
  CHECK_EQ(0, dfs->ListDirectory(dir, &names));
  CHECK(names.size() == 2 && names[0] == "000001.sst" && names[1] == "000002.sst");
  CHECK_EQ(0, dfs->Rename(dir + "/000002.sst", dir + "/000003.sst"));
  CHECK_EQ(-BFS_ERR_NOT_FOUND, dfs->Exists(dir + "/000002.sst"));
  CHECK_EQ(0, dfs->Delete(dir + "/000003.sst"));
  CHECK_EQ(-BFS_ERR_NOT_FOUND, dfs->Delete(dir + "/000003.sst"));
  CHECK_EQ(-BFS_ERR_IS_DIRECTORY, dfs->Delete(dir));

  // Bad calls fail with a code, never a crash.
  CHECK(dfs->OpenFile(path, O_RDWR) == nullptr);
  CHECK_EQ(-BFS_ERR_INVALID_ARGUMENT, bfs::LastStatus());
  CHECK(dfs->OpenFile(dir + "/nothing", O_RDONLY) == nullptr);
  CHECK_EQ(-BFS_ERR_NOT_FOUND, bfs::LastStatus());
  CHECK(dfs->OpenFile("relative", O_RDONLY) == nullptr);
  CHECK_EQ(-BFS_ERR_INVALID_ARGUMENT, bfs::LastStatus());
  CHECK_EQ(-BFS_ERR_INVALID_ARGUMENT, dfs->GetFileSize(path, nullptr));
  CHECK_EQ(-BFS_ERR_INVALID_ARGUMENT, dfs->ListDirectory(dir, nullptr));
  CHECK_EQ(-BFS_ERR_INVALID_ARGUMENT, dfs->Stat("", &st));

  CHECK_EQ(0, dfs->DeleteDirectory(root + "/files"));
  CHECK_EQ(-BFS_ERR_NOT_FOUND, dfs->Exists(dir));

  // The entry point for loaders that dlopen the adapter.
  bfs::Dfs* loaded = NewDfs(nameserver.c_str());
  CHECK(loaded != nullptr);
  CHECK_EQ(0, loaded->Exists("/"));
  delete loaded;
  CHECK(NewDfs(nullptr) == nullptr);
  CHECK_EQ(-BFS_ERR_INVALID_ARGUMENT, bfs::LastStatus());
}

// Losses records what a LockLostHandler was told.
struct Losses {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> paths;
  std::vector<int32_t> codes;

  bfs::LockLostHandler Handler() {
    return [this](const std::string& path, int32_t code, const std::string& why) {
      CHECK(!why.empty());
      std::lock_guard<std::mutex> l(mu);
      paths.push_back(path);
      codes.push_back(code);
      cv.notify_all();
    };
  }

  // Wait waits up to 10 s for n losses and returns the paths, sorted.
  std::vector<std::string> Wait(size_t n) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait_for(l, std::chrono::seconds(10), [&] { return paths.size() >= n; });
    std::vector<std::string> out = paths;
    std::sort(out.begin(), out.end());
    return out;
  }
};

// TestFailover: tablet server A locks its tablet and a locality group
// below it and writes; the master decides A is dead and clears the
// directory's owner; A learns it lost both locks, and its next write and
// every namespace change there are refused; B locks the tablet and reads
// every byte A synced.
void TestFailover() {
  std::unique_ptr<BfsDfs> master = Connect("master");
  std::unique_ptr<BfsDfs> a = Connect("tablet-server-a");
  std::unique_ptr<BfsDfs> b = Connect("tablet-server-b", 300);
  const std::string tablet = root + "/failover/tablet1";
  const std::string lg = tablet + "/lg0";
  const std::string sst = lg + "/000001.sst";
  CHECK_EQ(0, master->CreateDirectory(lg));

  Losses losses;
  a->SetLockLostHandler(losses.Handler());
  CHECK_EQ(0, a->LockDirectory(tablet));
  CHECK_EQ(0, a->LockDirectory(lg));  // nested
  CHECK_EQ(0, a->LockDirectory(tablet + "/"));  // held already
  CHECK(a->LockEpoch(lg) > a->LockEpoch(tablet) && a->LockEpoch(tablet) > 0);
  CHECK_EQ(0, a->LockStatus(tablet));
  CHECK_EQ(-BFS_ERR_TIMEOUT, b->LockDirectory(tablet));  // A has it
  CHECK_EQ(-BFS_ERR_LOCKED, b->CreateDirectory(tablet + "/lg1"));

  // A writes: 100 KiB synced, then 300 KiB more that it never syncs.
  const std::string data = Pattern(400 * 1024, 9);
  const size_t synced = 100 * 1024;
  std::unique_ptr<DfsFile> w(a->OpenFile(sst, O_WRONLY));
  CHECK(w != nullptr);
  CHECK_EQ(static_cast<int32_t>(synced), w->Write(data.data(), static_cast<int32_t>(synced)));
  CHECK_EQ(0, w->Sync());
  CHECK_EQ(static_cast<int32_t>(data.size() - synced),
           w->Write(data.data() + synced, static_cast<int32_t>(data.size() - synced)));

  // The master fails A over.
  CHECK_EQ(0, master->ClearDirOwner(tablet));
  std::vector<std::string> lost = losses.Wait(2);
  CHECK(lost.size() == 2 && lost[0] == tablet && lost[1] == lg);
  CHECK(losses.codes[0] == -BFS_ERR_LOCK_LOST && losses.codes[1] == -BFS_ERR_LOCK_LOST);
  CHECK_EQ(-BFS_ERR_LOCK_LOST, a->LockStatus(tablet));
  CHECK_EQ(-BFS_ERR_LOCK_LOST, a->LockStatus(lg));

  // A's next write is refused: its block was sealed, and its lock fences
  // the file's other calls.
  int32_t wrote = w->Write(data.data(), 1000);
  int32_t status = wrote < 0 ? wrote : w->Sync();
  CHECK(status == -BFS_ERR_SEALED || status == -BFS_ERR_STALE_EPOCH);
  printf("     A's %s after the loss: %s\n", wrote < 0 ? "write" : "sync", bfs_strerror(-status));
  CHECK(w->CloseFile() < 0);
  // And every namespace change A tries there.
  CHECK(a->OpenFile(lg + "/000002.sst", O_WRONLY) == nullptr);
  CHECK_EQ(-BFS_ERR_STALE_EPOCH, bfs::LastStatus());
  CHECK_EQ(-BFS_ERR_STALE_EPOCH, a->Delete(sst));
  CHECK_EQ(-BFS_ERR_STALE_EPOCH, a->CreateDirectory(tablet + "/lg1"));
  CHECK_EQ(-BFS_ERR_STALE_EPOCH, a->Rename(sst, lg + "/moved.sst"));

  // B takes the tablet over and finds every byte A synced.
  CHECK_EQ(0, b->LockDirectory(tablet));
  CHECK_EQ(0, b->LockDirectory(lg));
  CHECK(b->LockEpoch(tablet) > a->LockEpoch(lg));
  struct stat st;
  CHECK_EQ(0, b->Stat(sst, &st));
  CHECK(static_cast<size_t>(st.st_size) >= synced && static_cast<size_t>(st.st_size) <= data.size());
  const std::string got = ReadFile(b.get(), sst);
  CHECK(got.size() == static_cast<size_t>(st.st_size));
  CHECK(got == data.substr(0, got.size()));
  printf("     B read %zu bytes of A's file (A synced %zu, wrote %zu)\n", got.size(), synced, data.size());
  {
    std::unique_ptr<DfsFile> r(b->OpenFile(sst, O_RDONLY));
    CHECK(r != nullptr);
    char buf[4096];
    CHECK_EQ(4096, r->Pread(synced - 4096, buf, 4096));
    CHECK(memcmp(buf, data.data() + synced - 4096, 4096) == 0);
  }
  // B owns the tablet now; A stays refused.
  WriteFile(b.get(), lg + "/000002.sst", Pattern(5000, 2), 1000);
  CHECK_EQ(-BFS_ERR_STALE_EPOCH, a->Delete(sst));

  // B unloads the tablet: both locks go, deepest first.
  CHECK_EQ(0, b->UnlockDirectory(tablet));
  CHECK_EQ(-BFS_ERR_UNLOCKED, b->LockStatus(lg));
  // A loads it again: its new lock lifts its fence.
  CHECK_EQ(0, a->LockDirectory(tablet));
  CHECK_EQ(0, a->LockStatus(tablet));
  CHECK_EQ(0, a->Delete(lg + "/000002.sst"));
  CHECK_EQ(0, a->UnlockDirectory(tablet));
  CHECK(losses.Wait(2).size() == 2);  // no other loss was reported
}

// TestUnlockInHandler: a handler that unloads the tablet it lost, from the
// library's thread, does not deadlock.
void TestUnlockInHandler() {
  std::unique_ptr<BfsDfs> master = Connect("master-2");
  std::unique_ptr<BfsDfs> a = Connect("tablet-server-c");
  const std::string tablet = root + "/handler/tablet";
  CHECK_EQ(0, master->CreateDirectory(tablet));
  Losses losses;
  BfsDfs* ap = a.get();
  bfs::LockLostHandler record = losses.Handler();
  a->SetLockLostHandler([ap, record](const std::string& path, int32_t code, const std::string& why) {
    CHECK_EQ(0, ap->UnlockDirectory(path));
    record(path, code, why);
  });
  CHECK_EQ(0, a->LockDirectory(tablet));
  CHECK_EQ(0, master->ClearDirOwner(tablet));
  CHECK(losses.Wait(1).size() == 1);
  CHECK_EQ(-BFS_ERR_UNLOCKED, a->LockStatus(tablet));
}

// TestThreads: many threads share one adapter, each loading its own
// tablet (nested locks), writing and reading it back, and all reading one
// shared file at once.
void TestThreads() {
  std::unique_ptr<BfsDfs> dfs = Connect("cpp-threads");
  const std::string shared = root + "/threads/shared.sst";
  CHECK_EQ(0, dfs->CreateDirectory(root + "/threads"));
  const std::string data = Pattern(300000, 3);
  WriteFile(dfs.get(), shared, data, 70000);
  std::unique_ptr<DfsFile> sf(dfs->OpenFile(shared, O_RDONLY));
  CHECK(sf != nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; i++) {
    threads.emplace_back([&, i] {
      const std::string tablet = root + "/threads/t" + std::to_string(i);
      const std::string lg = tablet + "/lg";
      CHECK_EQ(0, dfs->CreateDirectory(lg));
      for (int round = 0; round < 4; round++) {
        CHECK_EQ(0, dfs->LockDirectory(tablet));
        CHECK_EQ(0, dfs->LockDirectory(lg));
        const std::string mine = Pattern(50000 + static_cast<size_t>(i), static_cast<unsigned>(i));
        WriteFile(dfs.get(), lg + "/f", mine, 8192);
        CHECK(ReadFile(dfs.get(), lg + "/f") == mine);
        char buf[3000];
        int64_t off = i * 20000 + round * 1000;
        CHECK_EQ(3000, sf->Pread(off, buf, 3000));
        CHECK(memcmp(buf, data.data() + off, 3000) == 0);
        CHECK_EQ(0, dfs->UnlockDirectory(tablet));
        CHECK_EQ(-BFS_ERR_UNLOCKED, dfs->LockStatus(lg));
      }
    });
  }
  for (auto& t : threads) t.join();
}

void Run(const char* name, void (*test)()) {
  double t0 = now_seconds();
  test();
  printf("ok   %-22s %6.0f ms\n", name, (now_seconds() - t0) * 1000);
  fflush(stdout);
}

}  // namespace

int main() {
  nameserver = env_or_die("BFS_NAMESERVER");
  root = env_or_die("BFS_TEST_ROOT");
  CHECK_EQ(0, Connect("cpp-setup")->CreateDirectory(root));
  Run("files", TestFiles);
  Run("failover", TestFailover);
  Run("unlock_in_handler", TestUnlockInHandler);
  Run("threads", TestThreads);
  printf("PASS\n");
  return 0;
}
