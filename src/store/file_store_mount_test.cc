// Acceptance (issue 3, and issue 19's "a full disk degrades the cache, not the service"): a full
// disk evicts the least recently used blocks and writes go on; space taken by others fails
// writes with a clear error; and "a missing or unwritable data path gives a clear error at open
// that names the path" (the unwritable case, which needs a read-only file system for root).
//
// The tests mount a small tmpfs: directly when root, else inside an unprivileged user and mount
// namespace; they skip, saying why, when neither is allowed.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "store/block_file.h"
#include "store/file_store.h"
#include "store/temp_dir.h"
#include "store/test_blocks.h"

namespace dualpath::store {
namespace {

using testkit::read_block;
using testkit::test_key;
using testkit::write_blocks;

constexpr BlockLayout kLayout{4, 64, 64};  // 16 KiB payload, 20 KiB files

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f);
}

// Becomes root of a new user and mount namespace, so an unprivileged process may mount tmpfs.
// Must run while the process has one thread (every store of earlier tests is closed by then).
bool enter_private_mount_namespace() {
  static int state = 0;  // 0 untried, 1 ok, -1 failed
  if (state != 0) return state == 1;
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  state = -1;
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
  write_file("/proc/self/setgroups", "deny");
  if (!write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n")) return false;
  if (!write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n")) return false;
  state = 1;
  return true;
}

// A tmpfs of `size_bytes` mounted on `dir` for the test's lifetime.
class SmallTmpfs {
 public:
  SmallTmpfs(const std::string& dir, int64_t size_bytes, bool read_only) : dir_(dir) {
    const std::string opts = "size=" + std::to_string(size_bytes) + ",mode=0755";
    const unsigned long flags = read_only ? MS_RDONLY : 0;
    if (::mount("tmpfs", dir.c_str(), "tmpfs", flags, opts.c_str()) == 0) {
      mounted_ = true;
      return;
    }
    const int first = errno;
    if (::geteuid() != 0 && enter_private_mount_namespace() &&
        ::mount("tmpfs", dir.c_str(), "tmpfs", flags, opts.c_str()) == 0) {
      mounted_ = true;
      return;
    }
    why_ = std::string("cannot mount a tmpfs on ") + dir + ": " + std::strerror(first) +
           " (needs root, or unprivileged user namespaces)";
  }
  ~SmallTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& why_not() const { return why_; }
  // Makes the mounted file system read-only (as a failing disk or an ro remount would).
  bool remount_read_only() {
    return ::mount("tmpfs", dir_.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, nullptr) == 0;
  }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string why_;
};

FileStoreOptions options_for(const std::string& dir) {
  FileStoreOptions o;
  o.data_paths = {dir};
  o.model = fingerprint_of("mount-test");
  o.layout = kLayout;
  o.queue_depth = 4;
  return o;
}

size_t count_files(const std::string& dir) { return count_regular_files(dir); }

// A full disk degrades the cache, not the service: the store evicts its least recently used
// blocks to make room, writes go on, the newest blocks stay readable, the index matches the disk.
TEST(DiskFull, AFullDiskEvictsTheLeastRecentlyUsedBlocksAndWritesGoOn) {
  TempDir tmp;
  const std::string dir = tmp.sub("small");
  SmallTmpfs fs(dir, 256 * 1024, /*read_only=*/false);
  if (!fs.mounted()) GTEST_SKIP() << fs.why_not();
  auto store = FileStore::open(options_for(dir));  // no capacity set: only the disk limits it
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  constexpr uint64_t kBlocks = 64;  // 1.25 MiB of files on a 256 KiB disk
  for (uint64_t i = 0; i < kBlocks; ++i) {
    auto results = write_blocks(**store, {test_key(i)});
    ASSERT_EQ(results.size(), 1u);
    ASSERT_TRUE(results[0].is_ok()) << i << ": " << results[0].to_string();
  }
  auto st = (*store)->stats();
  EXPECT_GT(st.index.evicted_blocks, 0);
  EXPECT_LT(st.index.blocks, static_cast<int64_t>(kBlocks));
  EXPECT_EQ(st.index.reserved_bytes, 0);
  EXPECT_EQ(count_files(dir + "/blocks"), static_cast<size_t>(st.index.blocks));
  EXPECT_EQ(count_files(dir + "/tmp"), 0u);
  EXPECT_FALSE((*store)->contains(test_key(0)));  // the oldest went first
  // The newest blocks read back whole, in this store and in a freshly opened one.
  for (uint64_t i = kBlocks - 4; i < kBlocks; ++i) {
    auto r = read_block(**store, test_key(i));
    EXPECT_TRUE(r.status.is_ok() && r.bytes_match) << i << ": " << r.status.to_string();
  }
  auto reopened = FileStore::open(options_for(dir));
  ASSERT_TRUE(reopened.is_ok()) << reopened.status().to_string();
  EXPECT_EQ((*reopened)->stats().index.blocks, st.index.blocks);
  auto r = read_block(**reopened, test_key(kBlocks - 1));
  EXPECT_TRUE(r.status.is_ok() && r.bytes_match) << r.status.to_string();
}

// When the space is taken by files that are not the store's, evicting cannot help: writes fail
// with a clear error naming the data path, and nothing is left behind.
TEST(DiskFull, SpaceTakenByOtherFilesIsAClearErrorAndNothingIsLeftBehind) {
  TempDir tmp;
  const std::string dir = tmp.sub("small");
  SmallTmpfs fs(dir, 256 * 1024, /*read_only=*/false);
  if (!fs.mounted()) GTEST_SKIP() << fs.why_not();
  auto store = FileStore::open(options_for(dir));
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  {
    std::ofstream filler(dir + "/other-tenant.bin", std::ios::binary);
    const std::string chunk(4096, 'x');
    for (int i = 0; i < 128 && filler; ++i) filler.write(chunk.data(), chunk.size());
  }
  auto results = write_blocks(**store, {test_key(1), test_key(2), test_key(3)});
  ASSERT_EQ(results.size(), 3u);
  for (const Status& s : results) {
    EXPECT_TRUE(s.is_resource_exhausted()) << s.to_string();
    EXPECT_NE(s.message().find("data path '" + dir + "'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("free space"), std::string::npos) << s.message();
  }
  auto st = (*store)->stats();
  EXPECT_EQ(st.index.blocks, 0);
  EXPECT_EQ(st.index.reserved_bytes, 0);
  EXPECT_EQ(count_files(dir + "/blocks"), 0u);
  EXPECT_EQ(count_files(dir + "/tmp"), 0u);
  EXPECT_TRUE(read_block(**store, test_key(1)).status.is_not_found());
}

TEST(DiskFull, CapacityBelowTheDiskSizeKeepsWritesWorkingByEvicting) {
  TempDir tmp;
  const std::string dir = tmp.sub("small");
  SmallTmpfs fs(dir, 256 * 1024, /*read_only=*/false);
  if (!fs.mounted()) GTEST_SKIP() << fs.why_not();
  auto opts = options_for(dir);
  opts.capacity_bytes = 8 * block_file_bytes(kLayout);  // 160 KiB of a 256 KiB disk
  auto store = FileStore::open(opts);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  for (uint64_t i = 0; i < 40; ++i) {
    for (const Status& s : write_blocks(**store, {test_key(i)})) {
      ASSERT_TRUE(s.is_ok()) << i << ": " << s.to_string();
    }
  }
  EXPECT_EQ(count_files(dir + "/blocks"), 8u);
}

TEST(BadDataPath, ReadOnlyFileSystemIsAClearErrorAtOpenNamingThePath) {
  TempDir tmp;
  const std::string dir = tmp.sub("ro");
  SmallTmpfs fs(dir, 64 * 1024, /*read_only=*/true);
  if (!fs.mounted()) GTEST_SKIP() << fs.why_not();
  auto store = FileStore::open(options_for(dir));
  ASSERT_FALSE(store.is_ok());
  EXPECT_NE(store.status().message().find("data path '" + dir + "' is not writable"),
            std::string::npos)
      << store.status().message();
  EXPECT_NE(store.status().message().find("Read-only file system"), std::string::npos)
      << store.status().message();
}

TEST(BadDataPath, DataPathThatBecameReadOnlyIsAClearErrorAtOpen) {
  TempDir tmp;
  const std::string dir = tmp.sub("was_rw");
  SmallTmpfs fs(dir, 256 * 1024, /*read_only=*/false);
  if (!fs.mounted()) GTEST_SKIP() << fs.why_not();
  {
    auto store = FileStore::open(options_for(dir));  // makes blocks/, tmp/, quarantine/
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    write_blocks(**store, {test_key(1)});
  }
  if (!fs.remount_read_only()) GTEST_SKIP() << "cannot remount read-only: " << std::strerror(errno);
  auto store = FileStore::open(options_for(dir));
  ASSERT_FALSE(store.is_ok());
  EXPECT_NE(store.status().message().find("data path '" + dir + "' is not writable"),
            std::string::npos)
      << store.status().message();
}

}  // namespace
}  // namespace dualpath::store
