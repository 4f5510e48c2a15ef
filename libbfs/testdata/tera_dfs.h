// tera_dfs.h: Tera's DFS plugin interface as Tera's side sees it, for the
// programs that load libbfs_dfs.so as Tera does (tera_plugin_test.cc,
// bench/dfs_bench.cc) and so must not use the plugin's own header.
//
// The classes are Tera's (src/leveldb/include/leveldb/dfs.h in
// github:baidu/tera), declared here from that header's shape: the virtual
// functions in its order with its signatures, Copy between Rename and
// ListDirectory, in namespace leveldb. OpenPlugin opens a plugin as Tera's
// Dfs::NewDfs does (src/leveldb/util/dfs.cc).
#ifndef BFS_TESTDATA_TERA_DFS_H_
#define BFS_TESTDATA_TERA_DFS_H_

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <string>
#include <vector>

namespace leveldb {

// An open file of the DFS.
class DfsFile {
 public:
  DfsFile() {}
  virtual ~DfsFile() {}
  virtual int32_t Write(const char* data, int32_t n) = 0;  // bytes written, or -1
  virtual int32_t Flush() = 0;
  virtual int32_t Sync() = 0;
  virtual int32_t Read(char* into, int32_t n) = 0;  // bytes read, or -1
  virtual int32_t Pread(int64_t at, char* into, int32_t n) = 0;
  virtual int64_t Tell() = 0;
  virtual int32_t Seek(int64_t at) = 0;
  virtual int32_t CloseFile() = 0;

 private:
  DfsFile(const DfsFile&);
  void operator=(const DfsFile&);
};

// Tera's open flags: not the POSIX ones.
enum { kReadOnly = 1, kWriteOnly = 2 };

// The DFS; each call returns 0, or -1 with errno.
class Dfs {
 public:
  Dfs() {}
  virtual ~Dfs() {}
  virtual int32_t CreateDirectory(const std::string& dir) = 0;
  virtual int32_t DeleteDirectory(const std::string& dir) = 0;
  virtual int32_t Exists(const std::string& name) = 0;
  virtual int32_t Delete(const std::string& name) = 0;
  virtual int32_t GetFileSize(const std::string& name, uint64_t* bytes) = 0;
  virtual int32_t Rename(const std::string& src, const std::string& dst) = 0;
  virtual int32_t Copy(const std::string& src, const std::string& dst) = 0;
  virtual int32_t ListDirectory(const std::string& dir, std::vector<std::string>* names) = 0;
  virtual int32_t LockDirectory(const std::string& dir) = 0;
  virtual int32_t UnlockDirectory(const std::string& dir) = 0;
  virtual int32_t ClearDirOwner(const std::string& dir) = 0;
  virtual DfsFile* OpenFile(const std::string& name, int32_t flags) = 0;
  virtual int32_t Stat(const std::string& name, struct stat* st) = 0;

 private:
  Dfs(const Dfs&);
  void operator=(const Dfs&);
};

typedef Dfs* (*Creator)(const char* conf);

}  // namespace leveldb

// OpenPlugin opens the shared object at path with Tera's flags and
// returns its NewDfs, or prints why not and exits 1. ASan refuses
// RTLD_DEEPBIND (the sanitizer's interceptors would be bypassed: see
// google/sanitizers#611), so an ASan build leaves it out; libbfs's Go test
// also runs the plugin test built without ASan, with Tera's flags exactly.
inline leveldb::Creator OpenPlugin(const char* path, void** handle) {
  int flags = RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND;
#if defined(__SANITIZE_ADDRESS__)
  flags &= ~RTLD_DEEPBIND;
#endif
  dlerror();
  void* h = dlopen(path, flags);
  if (h == nullptr) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    exit(1);
  }
  leveldb::Creator create = reinterpret_cast<leveldb::Creator>(dlsym(h, "NewDfs"));
  if (create == nullptr) {
    fprintf(stderr, "%s has no NewDfs: %s\n", path, dlerror());
    exit(1);
  }
  *handle = h;
  return create;
}

#endif  // BFS_TESTDATA_TERA_DFS_H_
