// The C++ test of the adapter (cpp/bfs_dfs.h) linked into a program, as
// opposed to loaded as Tera's plugin (tera_plugin_test.cc): its conf
// parsing, what it offers beyond Tera's interface (the lost-lock handler,
// LockStatus, LockEpoch), and many threads sharing it, also against the
// race-checked library. Run by libbfs's Go test against a running cluster
// (BFS_NAMESERVER), under BFS_TEST_ROOT; prints one "ok" line per test
// and "PASS"; exits non-zero at the first failed check.
#include <errno.h>

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
// it prints both, errno, the thread's last status and its message.
#define CHECK_EQ(want, expr)                                                                    \
  do {                                                                                          \
    long long w_ = static_cast<long long>(want), g_ = static_cast<long long>(expr);             \
    if (w_ != g_) {                                                                             \
      fprintf(stderr, "%s:%d: %s\n  want %lld\n  got  %lld (errno %d, last status %s)\n  message: %s\n", \
              __FILE__, __LINE__, #expr, w_, g_, errno, bfs_strerror(bfs::LastStatus()), bfs::LastMessage()); \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

// CHECK_FAILS: expr returned -1 with the status code (and its errno).
#define CHECK_FAILS(code, expr)                                        \
  do {                                                                 \
    errno = 0;                                                         \
    CHECK_EQ(-1, expr);                                                \
    CHECK_EQ(bfs::ErrnoOf(code), errno);                               \
    CHECK_EQ(code, bfs::LastStatus());                                 \
  } while (0)

// Connect opens an adapter as holder with the client certificate of user
// ("": the default) from $BFS_CERTS_DIR.
std::unique_ptr<BfsDfs> Connect(const std::string& holder, const std::string& user = "") {
  BfsDfsOptions o;
  o.nameservers = nameserver;
  o.holder = holder;
  o.user = user;
  o.session_ttl_ms = 3000;
  BfsDfs* dfs = BfsDfs::Open(o);
  CHECK_EQ(BFS_OK, dfs != nullptr ? BFS_OK : bfs::LastStatus());
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
  std::unique_ptr<DfsFile> f(dfs->OpenFile(path, bfs::kOpenWrite));
  CHECK(f != nullptr);
  for (size_t off = 0; off < data.size(); off += chunk) {
    int32_t k = static_cast<int32_t>(std::min(chunk, data.size() - off));
    CHECK_EQ(k, f->Write(data.data() + off, k));
  }
  CHECK_EQ(static_cast<int64_t>(data.size()), f->Tell());
  CHECK_EQ(0, f->CloseFile());
}

std::string ReadFile(BfsDfs* dfs, const std::string& path) {
  std::unique_ptr<DfsFile> f(dfs->OpenFile(path, bfs::kOpenRead));
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

// TestConf: BfsDfsOptions::Parse, the conf string of NewDfs.
void TestConf() {
  BfsDfsOptions o;
  std::string why;
  CHECK(BfsDfsOptions::Parse("127.0.0.1:8828", &o, &why));
  CHECK(o.nameservers == "127.0.0.1:8828" && o.holder.empty() && o.lock_wait_ms == 0 && o.clear_wait_ms == 30000);
  CHECK(BfsDfsOptions::Parse(" a:1 , b:2,c:3 ; holder = 10.0.0.7:2200 ;session_ttl_ms=7000;call_timeout_ms=5;"
                             "lock_wait_ms=250;clear_wait_ms=0",
                             &o, &why));
  CHECK(o.nameservers == "a:1,b:2,c:3" && o.holder == "10.0.0.7:2200");
  CHECK(o.session_ttl_ms == 7000 && o.call_timeout_ms == 5 && o.lock_wait_ms == 250 && o.clear_wait_ms == 0);
  CHECK(o.certs_dir.empty() && o.user.empty() && !o.insecure);
  CHECK(BfsDfsOptions::Parse("a:1;certs_dir=/etc/bfs/certs;user=master;insecure=0", &o, &why));
  CHECK(o.certs_dir == "/etc/bfs/certs" && o.user == "master" && !o.insecure);
  CHECK(BfsDfsOptions::Parse("a:1;insecure=1", &o, &why));
  CHECK(o.insecure && o.certs_dir.empty());
  const char* bad[] = {"",          "  ",           "a:1,,b:2",          "a:1;holder",       "a:1;ttl=5",
                       "a:1;lock_wait_ms=-1", "a:1;lock_wait_ms=1s", "a:1;lock_wait_ms=", "a:1;holder=x;holder=y",
                       "holder=x",  "a:1;;",        "a:1;session_ttl_ms=99999999999999999999", "a:1;insecure=yes"};
  for (const char* conf : bad) {
    BfsDfsOptions kept = o;
    why.clear();
    CHECK(!BfsDfsOptions::Parse(conf, &kept, &why));
    CHECK(!why.empty() && kept.nameservers == o.nameservers);  // said why, changed nothing
  }
  CHECK(!BfsDfsOptions::Parse("a:1;colour=blue", &o, nullptr));

  // NewDfs with a conf: the options reach the session.
  std::string conf = nameserver + ";holder=conf-holder;lock_wait_ms=0";
  bfs::Dfs* loaded = NewDfs(conf.c_str());
  CHECK(loaded != nullptr);
  CHECK_EQ(0, loaded->CreateDirectory(root + "/conf"));
  CHECK_EQ(0, loaded->LockDirectory(root + "/conf"));
  std::unique_ptr<BfsDfs> other = Connect("conf-other");
  CHECK_FAILS(BFS_ERR_LOCKED, other->LockDirectory(root + "/conf"));
  CHECK(strstr(bfs::LastMessage(), "conf-holder") != nullptr);  // the holder names itself
  delete loaded;  // releases the lock
  CHECK_EQ(0, other->LockDirectory(root + "/conf"));
  CHECK(NewDfs(nullptr) == nullptr);
  CHECK_EQ(EINVAL, errno);
  CHECK_EQ(BFS_ERR_INVALID_ARGUMENT, bfs::LastStatus());
}

// Losses records what a LockLostHandler was told.
struct Losses {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> paths;

  bfs::LockLostHandler Handler() {
    return [this](const std::string& path, const std::string& why) {
      CHECK(!why.empty());
      std::lock_guard<std::mutex> l(mu);
      paths.push_back(path);
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

// TestLossReported: a tablet server's locks (a tablet and a locality
// group below it) cleared by the master: its handler hears of both,
// LockStatus says lost, and locking again replaces the lost lock.
void TestLossReported() {
  std::unique_ptr<BfsDfs> master = Connect("master", "admin");
  std::unique_ptr<BfsDfs> a = Connect("tablet-server-a");
  const std::string tablet = root + "/loss/tablet1";
  const std::string lg = tablet + "/lg0";
  CHECK_EQ(0, master->CreateDirectory(lg));

  Losses losses;
  a->SetLockLostHandler(losses.Handler());
  CHECK_FAILS(BFS_ERR_UNLOCKED, a->LockStatus(tablet));
  CHECK_EQ(0, a->LockDirectory(tablet));
  CHECK_EQ(0, a->LockDirectory(lg));  // nested
  CHECK_EQ(0, a->LockDirectory(tablet + "//"));  // held already
  CHECK(a->LockEpoch(lg) > a->LockEpoch(tablet) && a->LockEpoch(tablet) > 0);
  CHECK_EQ(0, a->LockStatus(tablet + "/"));
  WriteFile(a.get(), lg + "/000001.sst", Pattern(5000, 1), 1000);

  CHECK_EQ(0, master->ClearDirOwner(tablet));
  std::vector<std::string> lost = losses.Wait(2);
  CHECK(lost.size() == 2 && lost[0] == tablet && lost[1] == lg);
  CHECK_FAILS(BFS_ERR_LOCK_LOST, a->LockStatus(tablet));
  CHECK_FAILS(BFS_ERR_LOCK_LOST, a->LockStatus(lg));
  CHECK_FAILS(BFS_ERR_STALE_EPOCH, a->Delete(lg + "/000001.sst"));

  // Locking again replaces the lost lock and lifts the fence.
  uint64_t old = a->LockEpoch(tablet);
  CHECK_EQ(0, a->LockDirectory(tablet));
  CHECK(a->LockEpoch(tablet) > old);
  CHECK_EQ(0, a->LockStatus(tablet));
  CHECK(ReadFile(a.get(), lg + "/000001.sst") == Pattern(5000, 1));
  CHECK_EQ(0, a->Delete(lg + "/000001.sst"));
  CHECK_EQ(0, a->UnlockDirectory(tablet));
  CHECK_FAILS(BFS_ERR_UNLOCKED, a->LockStatus(lg));  // the lost nested lock went too
  CHECK(losses.Wait(2).size() == 2);  // no other loss was reported
}

// TestUnlockInHandler: a handler that unloads the tablet it lost, from the
// library's thread, does not deadlock.
void TestUnlockInHandler() {
  std::unique_ptr<BfsDfs> master = Connect("master-2", "admin");
  std::unique_ptr<BfsDfs> a = Connect("tablet-server-c");
  const std::string tablet = root + "/handler/tablet";
  CHECK_EQ(0, master->CreateDirectory(tablet));
  Losses losses;
  BfsDfs* ap = a.get();
  bfs::LockLostHandler record = losses.Handler();
  a->SetLockLostHandler([ap, record](const std::string& path, const std::string& why) {
    CHECK_EQ(0, ap->UnlockDirectory(path));
    record(path, why);
  });
  CHECK_EQ(0, a->LockDirectory(tablet));
  CHECK_EQ(0, master->ClearDirOwner(tablet));
  CHECK(losses.Wait(1).size() == 1);
  CHECK_FAILS(BFS_ERR_UNLOCKED, a->LockStatus(tablet));
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
  std::unique_ptr<DfsFile> sf(dfs->OpenFile(shared, bfs::kOpenRead));
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
        CHECK_FAILS(BFS_ERR_UNLOCKED, dfs->LockStatus(lg));
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
  Run("conf", TestConf);
  Run("loss_reported", TestLossReported);
  Run("unlock_in_handler", TestUnlockInHandler);
  Run("threads", TestThreads);
  printf("PASS\n");
  return 0;
}
