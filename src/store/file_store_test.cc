#include "store/file_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include "store/block_file.h"
#include "store/temp_dir.h"
#include "store/test_blocks.h"

namespace dualpath::store {
namespace {

using testkit::holds_block;
using testkit::kTestDeadline;
using testkit::read_block;
using testkit::test_key;
using testkit::write_blocks;

// A layout whose Full Block is not a multiple of 4096, so every read has an unaligned tail.
constexpr BlockLayout kLayout{3, 64, 100};  // 19,200-byte Full Blocks

FileStoreOptions options_for(std::vector<std::string> paths, bool direct) {
  FileStoreOptions o;
  o.data_paths = std::move(paths);
  o.model = fingerprint_of("test-model");
  o.layout = kLayout;
  o.direct_io = direct;
  o.queue_depth = 8;
  return o;
}

size_t count_files(const std::string& dir) { return count_regular_files(dir); }

// Stores `keys` with no NIC limit, then opens the same store again behind `nic`.
Result<std::unique_ptr<FileStore>> stored_then_behind(FileStoreOptions opts,
                                                      const std::vector<BlockKey>& keys,
                                                      StorageNic& nic) {
  {
    auto fast = FileStore::open(opts);
    if (!fast.is_ok()) return fast.status();
    for (const Status& st : write_blocks(**fast, keys)) {
      if (!st.is_ok()) return st;
    }
  }
  opts.storage_nic = &nic;
  return FileStore::open(opts);
}

class FileStoreTest : public ::testing::TestWithParam<bool> {
 protected:
  bool direct() const { return GetParam(); }
  std::unique_ptr<FileStore> open(std::vector<std::string> paths) {
    auto s = FileStore::open(options_for(std::move(paths), direct()));
    if (!s.is_ok() && direct() && s.status().message().find("O_DIRECT") != std::string::npos) {
      return nullptr;
    }
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    return s.is_ok() ? std::move(s).value() : nullptr;
  }
  TempDir tmp_;
};

#define OPEN_OR_SKIP(var, paths)                                             \
  auto var = open(paths);                                                    \
  if (!var && direct()) GTEST_SKIP() << "this file system refuses O_DIRECT"; \
  ASSERT_TRUE(var)

TEST_P(FileStoreTest, WrittenBlocksReadBackByteForByteAcrossSeveralDataPaths) {
  OPEN_OR_SKIP(store, (std::vector<std::string>{tmp_.sub("a"), tmp_.sub("b")}));
  std::vector<BlockKey> keys;
  for (uint64_t i = 0; i < 20; ++i) keys.push_back(test_key(i));
  for (const Status& s : write_blocks(*store, keys)) EXPECT_TRUE(s.is_ok()) << s.to_string();
  for (const auto& k : keys) {
    auto r = read_block(*store, k);
    ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
    EXPECT_TRUE(r.bytes_match);
  }
  EXPECT_GT(count_files(tmp_.path() + "/a/blocks"), 0u) << "keys spread over both roots";
  EXPECT_GT(count_files(tmp_.path() + "/b/blocks"), 0u);
  EXPECT_EQ(count_files(tmp_.path() + "/a/tmp") + count_files(tmp_.path() + "/b/tmp"), 0u);
  EXPECT_EQ(std::filesystem::file_size(store->block_path(keys[0])),
            static_cast<uintmax_t>(block_file_bytes(kLayout)));
}

TEST_P(FileStoreTest, AbsentBlockIsAMissNotAnError) {
  OPEN_OR_SKIP(store, (std::vector<std::string>{tmp_.path()}));
  auto r = read_block(*store, test_key(99));
  EXPECT_TRUE(r.status.is_not_found()) << r.status.to_string();
  EXPECT_FALSE(store->contains(test_key(99)));
}

TEST_P(FileStoreTest, LongestCachedPrefixStopsAtTheFirstMissingBlock) {
  OPEN_OR_SKIP(store, (std::vector<std::string>{tmp_.path()}));
  std::vector<TokenId> prompt(64 * 5 + 17);
  std::iota(prompt.begin(), prompt.end(), 1000);
  auto chain = block_key_chain(store->options().model, prompt, 64);
  ASSERT_EQ(chain.size(), 5u);
  // Blocks 0, 1, 2 and 4 stored: the hit stops at 3 even though 4 is there.
  write_blocks(*store, {chain[0], chain[1], chain[2], chain[4]});
  PrefixMatch m = store->longest_cached_prefix(prompt);
  EXPECT_EQ(m.keys, chain);
  EXPECT_EQ(m.hit_blocks, 3u);
  EXPECT_EQ(m.hit_tokens(kLayout), 192);
}

TEST_P(FileStoreTest, APrefixStoredInOneCacheNamespaceDoesNotHitInAnother) {
  OPEN_OR_SKIP(store, (std::vector<std::string>{tmp_.path()}));
  std::vector<TokenId> prompt(64 * 2);
  std::iota(prompt.begin(), prompt.end(), 7);
  auto chain = block_key_chain(store->options().model, prompt, 64, "tenant-a");
  write_blocks(*store, {chain[0], chain[1]});
  EXPECT_EQ(store->longest_cached_prefix(prompt, "tenant-a").hit_blocks, 2u);
  EXPECT_EQ(store->longest_cached_prefix(prompt, "tenant-b").hit_blocks, 0u);
  EXPECT_EQ(store->longest_cached_prefix(prompt).hit_blocks, 0u);
}

// Block files hold other tenants' prompts (as KV): only the store's user may read them.
TEST_P(FileStoreTest, BlockFilesAndDirectoriesAreOwnerOnly) {
  OPEN_OR_SKIP(store, (std::vector<std::string>{tmp_.path()}));
  write_blocks(*store, {test_key(1)});
  auto mode = [](const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 0777;
  };
  for (const char* dir : {"/blocks", "/tmp", "/quarantine"}) {
    EXPECT_EQ(mode(tmp_.path() + dir), 0700u) << dir;
  }
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(tmp_.path() + "/blocks")) {
    if (e.is_directory()) {
      EXPECT_EQ(mode(e.path().string()), 0700u) << e.path();
    } else {
      EXPECT_EQ(mode(e.path().string()), 0600u) << e.path();
      ++files;
    }
  }
  EXPECT_EQ(files, 1);
}

TEST_P(FileStoreTest, ReopenRebuildsTheIndexByScanning) {
  {
    OPEN_OR_SKIP(store, (std::vector<std::string>{tmp_.path()}));
    write_blocks(*store, {test_key(1), test_key(2), test_key(3)});
  }
  auto opts = options_for({tmp_.path()}, direct());
  opts.probe_disk_on_miss = false;  // only the scan can know the blocks
  auto reopened = FileStore::open(opts);
  ASSERT_TRUE(reopened.is_ok()) << reopened.status().to_string();
  EXPECT_EQ((*reopened)->stats().index.blocks, 3);
  EXPECT_TRUE((*reopened)->contains(test_key(2)));
  auto r = read_block(**reopened, test_key(3));
  EXPECT_TRUE(r.status.is_ok() && r.bytes_match) << r.status.to_string();
}

TEST_P(FileStoreTest, AStoreSeesBlocksAnotherStoreWroteIntoTheSameDirectory) {
  OPEN_OR_SKIP(a, (std::vector<std::string>{tmp_.path()}));
  OPEN_OR_SKIP(b, (std::vector<std::string>{tmp_.path()}));
  write_blocks(*a, {test_key(7)});
  auto r = read_block(*b, test_key(7));
  EXPECT_TRUE(r.status.is_ok() && r.bytes_match) << r.status.to_string();
}

TEST_P(FileStoreTest, WritingAStoredKeyAgainIsOkAndLeavesOneFile) {
  OPEN_OR_SKIP(store, (std::vector<std::string>{tmp_.path()}));
  write_blocks(*store, {test_key(1)});
  for (const Status& s : write_blocks(*store, {test_key(1), test_key(1)})) {
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  EXPECT_EQ(count_files(tmp_.path() + "/blocks"), 1u);
}

TEST_P(FileStoreTest, ConcurrentReadersAndWritersNeverSeeWrongBytes) {
  OPEN_OR_SKIP(store, (std::vector<std::string>{tmp_.path()}));
  OPEN_OR_SKIP(other, (std::vector<std::string>{tmp_.path()}));  // a second "process" view
  constexpr int kBlocks = 64;
  std::atomic<int> wrong{0};
  std::atomic<int> hits{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      FileStore& s = w == 0 ? *store : *other;
      for (int i = w; i < kBlocks; i += 2) write_blocks(s, {test_key(static_cast<uint64_t>(i))});
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      FileStore& s = r == 0 ? *store : *other;
      for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < kBlocks; ++i) {
          auto out = read_block(s, test_key(static_cast<uint64_t>(i)));
          if (out.status.is_ok()) {
            hits.fetch_add(1);
            if (!out.bytes_match) wrong.fetch_add(1);
          } else if (!out.status.is_not_found()) {
            wrong.fetch_add(1);
            ADD_FAILURE() << out.status.to_string();
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(store->stats().quarantined_files, 0);
  for (int i = 0; i < kBlocks; ++i) {
    auto out = read_block(*store, test_key(static_cast<uint64_t>(i)));
    EXPECT_TRUE(out.status.is_ok() && out.bytes_match) << i << ": " << out.status.to_string();
  }
}

TEST_P(FileStoreTest, UnsyncedWritesStillPublishWholeVerifiedBlocks) {
  auto opts = options_for({tmp_.path()}, direct());
  opts.sync_writes = false;
  auto store = FileStore::open(opts);
  if (!store.is_ok() && direct()) GTEST_SKIP() << store.status().to_string();
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  for (const Status& s : write_blocks(**store, {test_key(1), test_key(2)})) {
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  auto r = read_block(**store, test_key(2));
  EXPECT_TRUE(r.status.is_ok() && r.bytes_match) << r.status.to_string();
}

TEST_P(FileStoreTest, RejectsBuffersOfTheWrongSize) {
  OPEN_OR_SKIP(store, (std::vector<std::string>{tmp_.path()}));
  auto buf = AlignedBuffer::allocate(100000).value();
  ReadRequest req{test_key(1), buf.first(100)};
  auto batch = store->read(std::span(&req, 1));
  ASSERT_FALSE(batch.is_ok());
  EXPECT_TRUE(batch.status().is_invalid_argument());
  EXPECT_NE(batch.status().message().find("19200"), std::string::npos) << batch.status().message();
}

INSTANTIATE_TEST_SUITE_P(Modes, FileStoreTest, ::testing::Values(false, true), [](const auto& p) {
  return p.param ? "Direct" : "Buffered";
});

TEST(FileStoreDirect, RejectsUnalignedBuffers) {
  TempDir tmp;
  auto store = FileStore::open(options_for({tmp.path()}, true));
  if (!store.is_ok()) GTEST_SKIP() << store.status().to_string();
  auto buf = AlignedBuffer::allocate(static_cast<size_t>(kLayout.full_block_bytes()) + 8).value();
  ReadRequest req{test_key(1),
                  buf.span().subspan(8, static_cast<size_t>(kLayout.full_block_bytes()))};
  auto batch = (*store)->read(std::span(&req, 1));
  ASSERT_FALSE(batch.is_ok());
  EXPECT_NE(batch.status().message().find("aligned"), std::string::npos);
}

// --- The storage NIC: rate limit, read-queue gauge, cancellation --------------------------------

// 0.0001 Gb/s = 12.5 kB/s: a 23 kB block file takes about 1.8 s, so reads stay queued long
// enough to observe without any timing assertion (the limiter guarantees the delay).
constexpr double kSlowGbps = 0.0001;

TEST(FileStoreNic, ReadQueueGaugeCountsQueuedTokensAndBytesUntilReadsFinish) {
  TempDir tmp;
  auto opts = options_for({tmp.path()}, false);
  auto fast = FileStore::open(opts);
  ASSERT_TRUE(fast.is_ok());
  write_blocks(**fast, {test_key(1), test_key(2), test_key(3)});

  SteadyClock clock;
  StorageNic nic(kSlowGbps, clock, /*burst_bytes=*/1);
  opts.storage_nic = &nic;
  auto store = FileStore::open(opts);
  ASSERT_TRUE(store.is_ok());
  std::vector<AlignedBuffer> bufs;
  std::vector<ReadRequest> reqs;
  for (uint64_t i = 1; i <= 4; ++i) {  // key 4 is a miss: never queued
    bufs.push_back(
        AlignedBuffer::allocate(static_cast<size_t>(kLayout.full_block_bytes())).value());
    reqs.push_back(
        {test_key(i), bufs.back().first(static_cast<size_t>(kLayout.full_block_bytes()))});
  }
  auto batch = (*store)->read(reqs);
  ASSERT_TRUE(batch.is_ok());
  auto queued = nic.read_queue.snapshot();
  EXPECT_GT(queued.tokens, 0);
  EXPECT_LE(queued.tokens, 3 * kLayout.block_tokens);
  EXPECT_LE(queued.bytes, 3 * kLayout.full_block_bytes());
  EXPECT_TRUE(batch->poll().is_in_progress());
  Status early = batch->wait_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(early.is_timed_out()) << early.to_string();
  // Destroying the batch cancels the queued reads and returns once nothing is in flight.
  *batch = IoBatch();
  EXPECT_EQ(nic.read_queue.snapshot().tokens, 0);
  EXPECT_EQ(nic.read_queue.snapshot().bytes, 0);
}

TEST(FileStoreNic, CancelledReadsEndAbortedOrCompleteButNeverWrong) {
  TempDir tmp;
  auto opts = options_for({tmp.path()}, false);
  SteadyClock clock;
  StorageNic nic(kSlowGbps, clock, /*burst_bytes=*/1);
  auto store = stored_then_behind(opts, {test_key(1), test_key(2)}, nic);
  ASSERT_TRUE(store.is_ok());
  const auto n = static_cast<size_t>(kLayout.full_block_bytes());
  auto b1 = AlignedBuffer::allocate(n).value();
  auto b2 = AlignedBuffer::allocate(n).value();
  std::vector<ReadRequest> reqs{{test_key(1), b1.first(n)}, {test_key(2), b2.first(n)}};
  auto batch = (*store)->read(reqs);
  ASSERT_TRUE(batch.is_ok());
  batch->cancel_and_wait();
  ASSERT_TRUE(batch->poll().is_ok());
  for (size_t i = 0; i < 2; ++i) {
    const Status& s = batch->results()[i];
    EXPECT_TRUE(s.is_ok() || s.code() == StatusCode::kAborted) << s.to_string();
    if (s.is_ok()) {
      EXPECT_TRUE(holds_block(reqs[i].key, reqs[i].buffer));
    }
  }
  EXPECT_EQ(batch->results()[1].code(), StatusCode::kAborted) << "the second was still queued";
}

// Full duplex, as the simulator's storage NIC: a write is limited by the write direction alone,
// and goes while a read waits for the read direction (and the read stays queued meanwhile).
TEST(FileStoreNic, WritesAndReadsEachHaveTheirOwnDirectionOfTheNic) {
  TempDir tmp;
  auto opts = options_for({tmp.path()}, false);
  SteadyClock clock;
  StorageNic nic(kSlowGbps, clock, /*burst_bytes=*/1);
  auto store = stored_then_behind(opts, {test_key(1)}, nic);
  ASSERT_TRUE(store.is_ok());
  const auto n = static_cast<size_t>(kLayout.full_block_bytes());
  // Another read holds the read direction for about 2 s.
  (void)nic.limiter.reserve(25'000, nic.clock.now());
  auto buf = AlignedBuffer::allocate(n).value();
  ReadRequest req{test_key(1), buf.first(n)};
  auto read = (*store)->read(std::span(&req, 1));
  ASSERT_TRUE(read.is_ok());
  auto payload = AlignedBuffer::allocate(n).value();
  WriteRequest w{test_key(2), payload.first(n)};
  auto write = (*store)->write(std::span(&w, 1));
  ASSERT_TRUE(write.is_ok());
  ASSERT_TRUE(write->wait_for(kTestDeadline).is_ok());  // the write direction was idle
  EXPECT_TRUE(read->poll().is_in_progress()) << "the read went before its direction let it";
  ASSERT_TRUE(read->wait_for(kTestDeadline).is_ok());
  EXPECT_TRUE((*store)->contains(test_key(2)));
}

TEST(FileStoreNic, ConcurrentBatchesShareTheNicInsteadOfQueueingBehindEachOther) {
  TempDir tmp;
  auto opts = options_for({tmp.path()}, false);
  constexpr uint64_t kBig = 40;
  std::vector<BlockKey> keys;
  for (uint64_t i = 1; i <= kBig + 1; ++i) keys.push_back(test_key(i));
  // ~5 ms per block: the big batch needs ~200 ms of NIC time, the small one ~5 ms.
  SteadyClock clock;
  StorageNic nic(0.03, clock, /*burst_bytes=*/1);
  auto store = stored_then_behind(opts, keys, nic);
  ASSERT_TRUE(store.is_ok());
  const auto n = static_cast<size_t>(kLayout.full_block_bytes());
  std::vector<AlignedBuffer> bufs;
  std::vector<ReadRequest> big;
  for (uint64_t i = 1; i <= kBig; ++i) {
    bufs.push_back(AlignedBuffer::allocate(n).value());
    big.push_back({test_key(i), bufs.back().first(n)});
  }
  auto small_buf = AlignedBuffer::allocate(n).value();
  std::vector<ReadRequest> small{{test_key(kBig + 1), small_buf.first(n)}};
  auto big_batch = (*store)->read(big);
  ASSERT_TRUE(big_batch.is_ok());
  auto small_batch = (*store)->read(small);
  ASSERT_TRUE(small_batch.is_ok());
  ASSERT_TRUE(small_batch->wait_for(kTestDeadline).is_ok());
  EXPECT_TRUE(holds_block(small[0].key, small[0].buffer));
  // Round robin: the one-block batch went next, not after the 40 blocks that came first.
  EXPECT_TRUE(big_batch->poll().is_in_progress());
  ASSERT_TRUE(big_batch->wait_for(kTestDeadline).is_ok());
  for (const ReadRequest& r : big) EXPECT_TRUE(holds_block(r.key, r.buffer));
}

// --- Eviction ----------------------------------------------------------------------------------

TEST(FileStoreEviction, StaysUnderCapacityEvictingLeastRecentlyUsed) {
  TempDir tmp;
  auto opts = options_for({tmp.path()}, false);
  opts.capacity_bytes = 5 * block_file_bytes(kLayout);
  auto store = FileStore::open(opts);
  ASSERT_TRUE(store.is_ok());
  for (uint64_t i = 0; i < 20; ++i) {
    for (const Status& s : write_blocks(**store, {test_key(i)})) ASSERT_TRUE(s.is_ok());
    if (i == 2) {  // keep block 0 warm
      ASSERT_TRUE(read_block(**store, test_key(0)).status.is_ok());
    }
    auto st = (*store)->stats();
    EXPECT_LE(st.index.used_bytes + st.index.reserved_bytes, opts.capacity_bytes);
    EXPECT_LE(count_files(tmp.path() + "/blocks"), 5u);
  }
  EXPECT_EQ((*store)->stats().index.blocks, 5);
  EXPECT_EQ((*store)->stats().index.evicted_blocks, 15);
  EXPECT_TRUE((*store)->contains(test_key(19)));
  EXPECT_FALSE((*store)->contains(test_key(1)));
  // Reopening with a lower capacity evicts down to it.
  store->reset();
  opts.capacity_bytes = 2 * block_file_bytes(kLayout);
  auto smaller = FileStore::open(opts);
  ASSERT_TRUE(smaller.is_ok());
  EXPECT_EQ(count_files(tmp.path() + "/blocks"), 2u);
}

TEST(FileStoreEviction, NeverEvictsABlockWhileItIsBeingRead) {
  TempDir tmp;
  auto opts = options_for({tmp.path()}, false);
  opts.capacity_bytes = 3 * block_file_bytes(kLayout);
  SteadyClock clock;
  StorageNic nic(kSlowGbps, clock, /*burst_bytes=*/1);
  // Block 0 is the LRU block.
  auto store = stored_then_behind(opts, {test_key(0), test_key(1), test_key(2)}, nic);
  ASSERT_TRUE(store.is_ok());
  const auto n = static_cast<size_t>(kLayout.full_block_bytes());
  auto buf = AlignedBuffer::allocate(n).value();
  ReadRequest req{test_key(0), buf.first(n)};
  // Another transfer holds the storage NIC for about 2 s, so the read stays queued (and block 0
  // pinned) while the writes below choose their victims.
  (void)nic.limiter.reserve(25'000, nic.clock.now());
  auto read = (*store)->read(std::span(&req, 1));  // pins block 0 until it finishes
  ASSERT_TRUE(read.is_ok());

  // Three new blocks need three evictions; only 1 and 2 may go.
  std::vector<AlignedBuffer> payloads;
  std::vector<WriteRequest> writes;
  for (uint64_t i = 10; i < 13; ++i) {
    payloads.push_back(AlignedBuffer::allocate(n).value());
    writes.push_back({test_key(i), payloads.back().first(n)});
  }
  auto write = (*store)->write(writes);
  ASSERT_TRUE(write.is_ok());
  EXPECT_TRUE(std::filesystem::exists((*store)->block_path(test_key(0))));
  EXPECT_FALSE(std::filesystem::exists((*store)->block_path(test_key(1))));
  EXPECT_FALSE(std::filesystem::exists((*store)->block_path(test_key(2))));
  auto st = (*store)->stats();
  EXPECT_LE(st.index.used_bytes + st.index.reserved_bytes, opts.capacity_bytes);

  ASSERT_TRUE(read->wait_for(kTestDeadline).is_ok());
  EXPECT_TRUE(read->results()[0].is_ok()) << read->results()[0].to_string();
  EXPECT_TRUE(holds_block(test_key(0), buf.first(n)));
  write->cancel_and_wait();
  size_t exhausted = 0;
  for (const Status& s : write->results()) exhausted += s.is_resource_exhausted() ? 1 : 0;
  EXPECT_EQ(exhausted, 1u) << "the third write found only pinned blocks to evict";
}

// --- Bad data paths ----------------------------------------------------------------------------

TEST(FileStoreOpen, MissingDataPathIsAClearErrorNamingThePath) {
  TempDir tmp;
  const std::string missing = tmp.path() + "/no/such/dir";
  auto store = FileStore::open(options_for({tmp.path(), missing}, false));
  ASSERT_FALSE(store.is_ok());
  EXPECT_TRUE(store.status().is_not_found()) << store.status().to_string();
  EXPECT_NE(store.status().message().find("'" + missing + "'"), std::string::npos)
      << store.status().message();
  EXPECT_NE(store.status().message().find("mkdir -p"), std::string::npos);
}

TEST(FileStoreOpen, DataPathThatIsAFileIsAClearErrorNamingThePath) {
  TempDir tmp;
  const std::string file = tmp.path() + "/plain";
  { std::ofstream(file) << "x"; }
  auto store = FileStore::open(options_for({file}, false));
  ASSERT_FALSE(store.is_ok());
  EXPECT_NE(store.status().message().find("'" + file + "' is not a directory"), std::string::npos)
      << store.status().message();
}

TEST(FileStoreOpen, UnwritableDataPathIsAClearErrorNamingThePath) {
  if (::geteuid() == 0) {
    GTEST_SKIP() << "root ignores permission bits; dp_store_mount_test covers a read-only mount";
  }
  TempDir tmp;
  const std::string ro = tmp.sub("ro");
  ASSERT_EQ(::chmod(ro.c_str(), 0555), 0);
  auto store = FileStore::open(options_for({ro}, false));
  ::chmod(ro.c_str(), 0755);
  ASSERT_FALSE(store.is_ok());
  EXPECT_NE(store.status().message().find("'" + ro + "' is not writable"), std::string::npos)
      << store.status().message();
}

TEST(FileStoreOpen, RejectsDuplicateAndEmptyDataPathsAndBadLayouts) {
  TempDir tmp;
  EXPECT_TRUE(FileStore::open(options_for({}, false)).status().is_invalid_argument());
  EXPECT_TRUE(
      FileStore::open(options_for({tmp.path(), tmp.path()}, false)).status().is_invalid_argument());
  auto bad = options_for({tmp.path()}, false);
  bad.layout.layers = 0;
  EXPECT_TRUE(FileStore::open(bad).status().is_invalid_argument());
}

}  // namespace
}  // namespace dualpath::store
