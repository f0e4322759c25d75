// Injected file-operation failures (io_faults.h): EIO on a read, EIO on a write, ENOSPC, a short
// read, a short write, fsync and rename failing, an open failing. Each ends in a miss or a clean
// error for that block, never a wrong byte or a partial file, and the store goes on serving.

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <memory>

#include "store/block_file.h"
#include "store/file_store.h"
#include "store/temp_dir.h"
#include "store/test_blocks.h"

namespace dualpath::store {
namespace {

using testkit::read_block;
using testkit::test_key;
using testkit::write_blocks;

constexpr BlockLayout kFaultLayout{3, 64, 100};  // 19,200-byte Full Blocks: an unaligned tail

class IoFaultTest : public ::testing::Test {
 protected:
  std::unique_ptr<FileStore> open_with(std::shared_ptr<IoFaults> faults) {
    FileStoreOptions o;
    o.data_paths = {tmp_.path()};
    o.model = fingerprint_of("test-model");
    o.layout = kFaultLayout;
    o.queue_depth = 8;
    o.faults = std::move(faults);
    auto s = FileStore::open(o);
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    return s.is_ok() ? std::move(s).value() : nullptr;
  }
  // Files under blocks/ and tmp/ of the data path.
  size_t files_in(const std::string& sub) const {
    size_t n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(tmp_.path() + "/" + sub)) {
      n += e.is_regular_file() ? 1 : 0;
    }
    return n;
  }
  // After a failed write: nothing published, nothing left in tmp/, the key a miss; and the
  // store still writes and reads the next block.
  void expect_clean_failed_write(FileStore& store, const Status& s, uint64_t key) {
    EXPECT_FALSE(s.is_ok());
    EXPECT_EQ(files_in("blocks"), 0u);
    EXPECT_EQ(files_in("tmp"), 0u);
    EXPECT_FALSE(store.contains(test_key(key)));
    EXPECT_TRUE(read_block(store, test_key(key)).status.is_not_found());
  }
  TempDir tmp_;
};

struct WriteCase {
  const char* name;
  FileOp op;
  Fault fault;
  bool disk_full;  // resource_exhausted (the cache is full) rather than io_error
};

TEST_F(IoFaultTest, EveryFailedWriteIsACleanErrorAndTheNextWriteSucceeds) {
  const WriteCase cases[] = {
      {"EIO on the write", FileOp::kWrite, {EIO, -1}, false},
      {"ENOSPC on the write", FileOp::kWrite, {ENOSPC, -1}, true},
      {"a short write", FileOp::kWrite, {0, 4096}, true},
      {"ENOSPC creating the file", FileOp::kCreate, {ENOSPC, -1}, true},
      {"EACCES creating the file", FileOp::kCreate, {EACCES, -1}, false},
      {"ENOSPC allocating its space", FileOp::kAllocate, {ENOSPC, -1}, true},
      {"fsync failing", FileOp::kFsync, {EIO, -1}, false},
      {"rename failing", FileOp::kRename, {EIO, -1}, false},
  };
  for (const WriteCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::filesystem::remove_all(tmp_.path() + "/blocks");
    auto faults = std::make_shared<FixedFaults>(c.op, c.fault, 1);
    auto store = open_with(faults);
    ASSERT_TRUE(store);
    auto results = write_blocks(*store, {test_key(1)});
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(faults->injected(), 1);
    EXPECT_EQ(results[0].is_resource_exhausted(), c.disk_full) << results[0].to_string();
    EXPECT_EQ(results[0].is_io_error(), !c.disk_full) << results[0].to_string();
    expect_clean_failed_write(*store, results[0], 1);
    // The fault was one-off: the store goes on.
    results = write_blocks(*store, {test_key(2)});
    ASSERT_EQ(results.size(), 1u);
    EXPECT_TRUE(results[0].is_ok()) << results[0].to_string();
    auto r = read_block(*store, test_key(2));
    EXPECT_TRUE(r.status.is_ok()) << r.status.to_string();
    EXPECT_TRUE(r.bytes_match);
  }
}

TEST_F(IoFaultTest, AFailedReadIsAMissAndNeverWrongBytes) {
  struct ReadCase {
    const char* name;
    FileOp op;
    Fault fault;
    bool quarantined;  // the file was judged invalid (short), moved aside: a miss (kNotFound)
  };
  const ReadCase cases[] = {
      {"EIO on the read", FileOp::kRead, {EIO, -1}, false},
      {"a short read", FileOp::kRead, {0, 5000}, true},
      {"EIO opening the file", FileOp::kOpenRead, {EIO, -1}, false},
  };
  for (const ReadCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::filesystem::remove_all(tmp_.path() + "/blocks");
    std::filesystem::remove_all(tmp_.path() + "/quarantine");
    auto faults = std::make_shared<FixedFaults>(c.op, c.fault, 1);
    auto store = open_with(faults);
    ASSERT_TRUE(store);
    auto written = write_blocks(*store, {test_key(1), test_key(2)});
    ASSERT_EQ(written.size(), 2u);
    ASSERT_TRUE(written[0].is_ok() && written[1].is_ok());
    auto r = read_block(*store, test_key(1));
    EXPECT_EQ(faults->injected(), 1);
    EXPECT_FALSE(r.status.is_ok());
    EXPECT_TRUE(c.quarantined ? r.status.is_not_found() : r.status.is_io_error())
        << r.status.to_string();
    EXPECT_EQ(store->stats().quarantined_files, c.quarantined ? 1 : 0);
    // The other block, and (unless quarantined) the same one, read back whole afterwards.
    auto other = read_block(*store, test_key(2));
    EXPECT_TRUE(other.status.is_ok() && other.bytes_match) << other.status.to_string();
    auto again = read_block(*store, test_key(1));
    if (c.quarantined) {
      EXPECT_TRUE(again.status.is_not_found()) << again.status.to_string();
    } else {
      EXPECT_TRUE(again.status.is_ok() && again.bytes_match) << again.status.to_string();
    }
  }
}

TEST_F(IoFaultTest, RandomFaultsNeverGiveAWrongByteOrLeaveAPartialFile) {
  auto faults = std::make_shared<RandomFaults>(0.1, 42);
  auto store = open_with(faults);
  ASSERT_TRUE(store);
  int ok_reads = 0;
  for (uint64_t round = 0; round < 20; ++round) {
    std::vector<BlockKey> keys;
    for (uint64_t i = 0; i < 8; ++i) keys.push_back(test_key(round * 8 + i));
    (void)write_blocks(*store, keys);
    for (const BlockKey& k : keys) {
      auto r = read_block(*store, k);
      if (r.status.is_ok()) {
        EXPECT_TRUE(r.bytes_match) << "a read reported success with wrong bytes";
        ++ok_reads;
      }
    }
  }
  EXPECT_GT(faults->injected(), 10);
  EXPECT_GT(ok_reads, 80);
  EXPECT_EQ(files_in("tmp"), 0u);  // every failed write cleaned up its temp file
  // Every published file is a whole block of the layout.
  for (const auto& e : std::filesystem::recursive_directory_iterator(tmp_.path() + "/blocks")) {
    if (e.is_regular_file()) {
      EXPECT_EQ(e.file_size(), static_cast<uintmax_t>(block_file_bytes(kFaultLayout)));
    }
  }
}

}  // namespace
}  // namespace dualpath::store
