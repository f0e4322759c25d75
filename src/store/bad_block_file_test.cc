// Acceptance (issue 3): "Bad files are misses, never wrong bytes." Each kind of bad file is
// reported as a miss plus exactly one warning naming the file, and is quarantined, not deleted.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "store/block_file.h"
#include "store/file_store.h"
#include "store/temp_dir.h"
#include "store/test_blocks.h"

namespace dualpath::store {
namespace {

using testkit::read_block;
using testkit::test_key;
using testkit::write_blocks;

constexpr BlockLayout kLayout{2, 64, 100};  // 12,800-byte payload, 16,384 bytes of file

struct BadFile {
  std::string name;
  std::function<void(const std::string& path)> damage;  // applied to a valid block file
  std::string expected_reason;                          // a phrase of the warning
};

void flip_byte_at(const std::string& path, off_t offset) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  unsigned char b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, offset), 1);
  b ^= 0x10;
  ASSERT_EQ(::pwrite(fd, &b, 1, offset), 1);
  ::close(fd);
}

void put_u32_at(const std::string& path, off_t offset, uint32_t v) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::pwrite(fd, &v, sizeof(v), offset), static_cast<ssize_t>(sizeof(v)));
  ::close(fd);
}

const int64_t kFileBytes = block_file_bytes(kLayout);

std::vector<BadFile> bad_files() {
  std::vector<BadFile> v;
  // A byte flipped anywhere: the magic, header fields, header padding, the payload's first,
  // middle and last byte, and the zero padding after the payload.
  for (off_t off : std::vector<off_t>{0, 9, 20, 30, 66, 75, 1000, 4096, 4096 + 6400, 4096 + 12799,
                                      kFileBytes - 1}) {
    std::string reason = off == 0     ? "bad magic"
                         : off == 9   ? "format version"
                         : off < 4096 ? "header checksum"
                                      : "payload checksum";
    v.push_back({"FlippedByteAt" + std::to_string(off),
                 [off](const std::string& p) { flip_byte_at(p, off); }, reason});
  }
  v.push_back({"TruncatedToHalf",
               [](const std::string& p) { std::filesystem::resize_file(p, kFileBytes / 2); },
               "truncated"});
  v.push_back({"TruncatedInsideHeader",
               [](const std::string& p) { std::filesystem::resize_file(p, 100); }, "truncated"});
  v.push_back(
      {"EmptyFile", [](const std::string& p) { std::filesystem::resize_file(p, 0); }, "truncated"});
  v.push_back({"TrailingGarbage",
               [](const std::string& p) { std::ofstream(p, std::ios::app) << "junk"; },
               "trailing garbage"});
  v.push_back({"FutureFormatVersion", [](const std::string& p) { put_u32_at(p, 8, 2); },
               "format version 2"});
  return v;
}

class BadBlockFileTest : public ::testing::TestWithParam<BadFile> {};

FileStoreOptions options(const std::string& dir, const char* model) {
  FileStoreOptions o;
  o.data_paths = {dir};
  o.model = fingerprint_of(model);
  o.layout = kLayout;
  o.queue_depth = 4;
  return o;
}

size_t count_lines_with(const std::string& text, const std::string& needle) {
  size_t n = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (text.substr(start, end - start).find(needle) != std::string::npos) ++n;
    start = end + 1;
  }
  return n;
}

// Reads `key` twice from a store whose file for it is bad; checks miss, one warning, quarantine.
void expect_miss_warning_and_quarantine(FileStore& store,
                                        const BlockKey& key,
                                        const std::string& dir,
                                        const std::string& reason) {
  const std::string path = store.block_path(key);
  ::testing::internal::CaptureStderr();
  auto first = read_block(store, key);
  auto second = read_block(store, key);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(first.status.is_not_found()) << first.status.to_string();
  EXPECT_TRUE(second.status.is_not_found()) << second.status.to_string();
  EXPECT_FALSE(first.bytes_match || second.bytes_match);
  EXPECT_EQ(count_lines_with(err, "warning"), 1u) << err;
  EXPECT_EQ(count_lines_with(err, "'" + path + "'"), 1u) << "the warning names the file:\n" << err;
  EXPECT_NE(err.find(reason), std::string::npos) << "expected '" << reason << "' in:\n" << err;
  EXPECT_FALSE(std::filesystem::exists(path));
  size_t quarantined = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/quarantine")) {
    quarantined += e.path().filename().string().starts_with(key.to_hex()) ? 1 : 0;
  }
  EXPECT_EQ(quarantined, 1u) << "the bad file is kept in quarantine/, not deleted";
  EXPECT_EQ(store.stats().quarantined_files, 1);
  EXPECT_FALSE(store.contains(key));
}

TEST_P(BadBlockFileTest, IsAMissWithOneWarningNamingTheFileAndIsQuarantined) {
  TempDir tmp;
  auto store = FileStore::open(options(tmp.path(), "model-a"));
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  const BlockKey key = test_key(5);
  ASSERT_TRUE(write_blocks(**store, {key, test_key(6)})[0].is_ok());
  ASSERT_TRUE(read_block(**store, key).bytes_match);
  GetParam().damage((*store)->block_path(key));
  expect_miss_warning_and_quarantine(**store, key, tmp.path(), GetParam().expected_reason);
  // The store keeps working: other blocks read, and the bad one can be written again.
  EXPECT_TRUE(read_block(**store, test_key(6)).bytes_match);
  ASSERT_TRUE(write_blocks(**store, {key})[0].is_ok());
  EXPECT_TRUE(read_block(**store, key).bytes_match);
}

INSTANTIATE_TEST_SUITE_P(Kinds,
                         BadBlockFileTest,
                         ::testing::ValuesIn(bad_files()),
                         [](const auto& p) { return p.param.name; });

TEST(BadBlockFile, HeaderOfAnotherModelIsAMissWithOneWarningAndIsQuarantined) {
  TempDir tmp;
  auto a = FileStore::open(options(tmp.path(), "model-a"));
  auto b = FileStore::open(options(tmp.path(), "model-b"));
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  // Model b writes a valid block under a key model a asks for (a forged or colliding name).
  const BlockKey key = test_key(9);
  ASSERT_TRUE(write_blocks(**b, {key})[0].is_ok());
  ASSERT_TRUE(read_block(**b, key).bytes_match);
  expect_miss_warning_and_quarantine(**a, key, tmp.path(), "model fingerprint");
}

TEST(BadBlockFile, HeaderOfAnotherLayoutIsAMiss) {
  TempDir tmp;
  auto a = FileStore::open(options(tmp.path(), "model-a"));
  auto o = options(tmp.path(), "model-a");
  o.layout = BlockLayout{4, 32, 100};  // same payload size, another shape
  auto b = FileStore::open(o);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  const BlockKey key = test_key(3);
  ASSERT_TRUE(write_blocks(**b, {key})[0].is_ok());
  expect_miss_warning_and_quarantine(**a, key, tmp.path(), "layout");
}

TEST(BadBlockFile, StrayFilesInTheBlockTreeAreIgnoredAtScan) {
  TempDir tmp;
  {
    auto s = FileStore::open(options(tmp.path(), "model-a"));
    ASSERT_TRUE(s.is_ok());
  }
  std::filesystem::create_directories(tmp.path() + "/blocks/00");
  std::ofstream(tmp.path() + "/blocks/00/notes.txt") << "hello";
  std::ofstream(tmp.path() + "/blocks/00/zz23456789abcdef0123456789abcdef.blk") << "bad name";
  auto s = FileStore::open(options(tmp.path(), "model-a"));
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ((*s)->stats().index.blocks, 0);
}

}  // namespace
}  // namespace dualpath::store
