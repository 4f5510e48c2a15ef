// The plugin side of bfsbench's tera benchmark: sequential writes and
// reads through libbfs_dfs.so, loaded and called as Tera loads and calls
// its DFS plugin (dlopen with Tera's flags, dlsym("NewDfs"), calls through
// Tera's leveldb::Dfs as testdata/tera_dfs.h declares it), with the same
// arguments and output as the Go SDK side (bfsbench's sdkLoop).
//
//   dfs_bench write NAMESERVER PATH BYTES CHUNK
//     OpenFile(PATH, 2), BYTES in Write calls of CHUNK bytes, CloseFile.
//   dfs_bench read NAMESERVER PATH BYTES CHUNK
//     OpenFile(PATH, 1), Read calls of CHUNK bytes until the end, CloseFile;
//     the count must be BYTES.
//
// Byte i of every chunk is (i * 7 + 3) mod 256; a reader checks the first
// and last byte of each chunk it reads. Prints "bytes B elapsed_ns E", timed
// from before OpenFile to after CloseFile (the session opened before).
// The plugin is $BFS_DFS_PLUGIN. Exits 1 with the reason on any failure.
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <string>
#include <vector>

#include "tera_dfs.h"

namespace {

int64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void Die(const char* what, const std::string& path) {
  fprintf(stderr, "dfs_bench: %s %s: %s\n", what, path.c_str(), strerror(errno));
  exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 || (strcmp(argv[1], "write") != 0 && strcmp(argv[1], "read") != 0)) {
    fprintf(stderr, "usage: dfs_bench write|read NAMESERVER PATH BYTES CHUNK (plugin in $BFS_DFS_PLUGIN)\n");
    return 2;
  }
  const char* so = getenv("BFS_DFS_PLUGIN");
  const bool write = strcmp(argv[1], "write") == 0;
  const std::string path = argv[3];
  const int64_t bytes = atoll(argv[4]);
  const int32_t chunk = atoi(argv[5]);
  if (so == nullptr || bytes < 0 || chunk <= 0) {
    fprintf(stderr, "dfs_bench: need $BFS_DFS_PLUGIN, BYTES >= 0 and CHUNK > 0\n");
    return 2;
  }
  void* h = nullptr;
  leveldb::Creator create = OpenPlugin(so, &h);
  // The client certificate of $BFS_CERTS_DIR, or plaintext with
  // $BFS_INSECURE (as bfsbench runs the cluster).
  const std::string conf =
      std::string(argv[2]) + ";holder=bfsbench-tera" + (getenv("BFS_INSECURE") != nullptr ? ";insecure=1" : "");
  leveldb::Dfs* dfs = create(conf.c_str());
  if (dfs == nullptr) Die("NewDfs", conf);

  std::vector<char> buf(static_cast<size_t>(chunk));
  for (int32_t i = 0; i < chunk; i++) buf[static_cast<size_t>(i)] = static_cast<char>(i * 7 + 3);
  const int64_t start = NowNs();
  leveldb::DfsFile* f = dfs->OpenFile(path, write ? 2 : 1);
  if (f == nullptr) Die("open", path);
  int64_t done = 0;
  if (write) {
    for (; done < bytes; done += chunk) {
      int32_t k = static_cast<int32_t>(bytes - done < chunk ? bytes - done : chunk);
      if (f->Write(buf.data(), k) != k) Die("write", path);
    }
  } else {
    for (;;) {
      int32_t n = f->Read(buf.data(), chunk);
      if (n < 0) Die("read", path);
      if (n == 0) break;
      // Each read starts at a multiple of chunk: a full chunk, or the end.
      if (buf[0] != 3 || buf[static_cast<size_t>(n - 1)] != static_cast<char>((n - 1) * 7 + 3)) {
        fprintf(stderr, "dfs_bench: %s: wrong bytes at %lld\n", path.c_str(), static_cast<long long>(done));
        return 1;
      }
      buf[0] = 0;
      done += n;
    }
    if (done != bytes) {
      fprintf(stderr, "dfs_bench: %s: read %lld bytes, want %lld\n", path.c_str(), static_cast<long long>(done),
              static_cast<long long>(bytes));
      return 1;
    }
  }
  if (f->CloseFile() != 0) Die("close", path);
  const int64_t elapsed = NowNs() - start;
  delete f;
  printf("bytes %lld elapsed_ns %lld\n", static_cast<long long>(bytes), static_cast<long long>(elapsed));
  delete dfs;
  return 0;
}
