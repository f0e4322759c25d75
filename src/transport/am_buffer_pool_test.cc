#include "transport/am_buffer_pool.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>

namespace dualpath::transport {
namespace {

// Hands out heap buffers and counts what the pool allocates and releases.
struct FakeAllocator {
  std::map<std::byte*, std::unique_ptr<std::byte[]>> live;
  int allocations = 0;
  int releases = 0;

  AmBufferPool make_pool(uint64_t max_cached_bytes) {
    return AmBufferPool(
        max_cached_bytes,
        [this](size_t capacity) -> std::optional<AmBufferPool::Buffer> {
          auto bytes = std::make_unique<std::byte[]>(capacity);
          std::byte* data = bytes.get();
          live[data] = std::move(bytes);
          ++allocations;
          return AmBufferPool::Buffer{data, capacity, 0, nullptr};
        },
        [this](const AmBufferPool::Buffer& b) {
          live.erase(b.data);
          ++releases;
        });
  }
};

TEST(AmBufferPool, AStreamOfEqualMessagesReusesOneBuffer) {
  FakeAllocator alloc;
  AmBufferPool pool = alloc.make_pool(32u << 20);
  std::byte* first = nullptr;
  for (int i = 0; i < 100; ++i) {
    auto b = pool.take(4u << 20);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->size, 4u << 20);
    if (i == 0) first = b->data;
    EXPECT_EQ(b->data, first);
    pool.give_back(*b);
  }
  EXPECT_EQ(alloc.allocations, 1);
  EXPECT_EQ(pool.cached_buffers(), 1u);
}

TEST(AmBufferPool, TakesTheSmallestCachedBufferThatFits) {
  FakeAllocator alloc;
  AmBufferPool pool = alloc.make_pool(32u << 20);
  auto big = pool.take(8u << 20);
  auto small = pool.take(1u << 20);
  ASSERT_TRUE(big && small);
  pool.give_back(*big);
  pool.give_back(*small);
  auto b = pool.take(512u << 10);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->data, small->data);
  EXPECT_EQ(b->size, 512u << 10);
  EXPECT_EQ(b->capacity, 1u << 20);
  auto c = pool.take(2u << 20);  // only the 8 MiB one holds it
  ASSERT_TRUE(c);
  EXPECT_EQ(c->data, big->data);
  auto d = pool.take(16u << 20);  // nothing cached holds it: a new buffer
  ASSERT_TRUE(d);
  EXPECT_EQ(alloc.allocations, 3);
}

TEST(AmBufferPool, KeepsAtMostTheBoundAndReleasesTheOldestFirst) {
  FakeAllocator alloc;
  AmBufferPool pool = alloc.make_pool(8u << 20);
  auto a = pool.take(4u << 20);
  auto b = pool.take(4u << 20);
  auto c = pool.take(4u << 20);
  auto huge = pool.take(16u << 20);
  ASSERT_TRUE(a && b && c && huge);
  pool.give_back(*a);
  pool.give_back(*b);
  pool.give_back(*c);  // 12 MiB > 8 MiB: `a` goes
  EXPECT_EQ(pool.cached_bytes(), 8u << 20);
  EXPECT_EQ(alloc.live.count(a->data), 0u);
  pool.give_back(*huge);  // larger than the bound: released at once
  EXPECT_EQ(alloc.live.count(huge->data), 0u);
  EXPECT_EQ(alloc.releases, 2);
  pool.clear();
  EXPECT_EQ(alloc.releases, 4);
  EXPECT_TRUE(alloc.live.empty());
}

TEST(AmBufferPool, AFailedAllocationIsReported) {
  AmBufferPool pool(
      1u << 20, [](size_t) { return std::optional<AmBufferPool::Buffer>(); },
      [](const AmBufferPool::Buffer&) {});
  EXPECT_FALSE(pool.take(4096));
}

}  // namespace
}  // namespace dualpath::transport
