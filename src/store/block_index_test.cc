#include "store/block_index.h"

#include <gtest/gtest.h>

namespace dualpath::store {
namespace {

BlockKey key(uint64_t i) { return BlockKey{i, i * 7 + 1}; }

TEST(BlockIndex, EvictsLeastRecentlyUsedToStayUnderCapacity) {
  BlockIndex index(300);
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(index.reserve(100).is_ok());
    index.commit(key(i), 0, 100);
  }
  ASSERT_TRUE(index.pin(key(0)));  // reading key 0 makes it recent
  index.unpin(key(0));
  auto victims = index.reserve(100);
  ASSERT_TRUE(victims.is_ok());
  ASSERT_EQ(victims->size(), 1u);
  EXPECT_EQ((*victims)[0].key, key(1));
  index.commit(key(3), 0, 100);
  EXPECT_EQ(index.stats().used_bytes, 300);
  EXPECT_FALSE(index.contains(key(1)));
}

TEST(BlockIndex, NeverEvictsAPinnedBlock) {
  BlockIndex index(200);
  for (uint64_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(index.reserve(100).is_ok());
    index.commit(key(i), 0, 100);
  }
  ASSERT_TRUE(index.pin(key(0)));
  ASSERT_TRUE(index.pin(key(1)));
  auto full = index.reserve(100);
  ASSERT_FALSE(full.is_ok());
  EXPECT_TRUE(full.status().is_resource_exhausted());
  EXPECT_EQ(index.stats().blocks, 2) << "a failed reservation evicts nothing";
  index.unpin(key(1));
  auto ok = index.reserve(100);
  ASSERT_TRUE(ok.is_ok());
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].key, key(1)) << "the pinned, older block stays";
}

TEST(BlockIndex, ReservationsCountAgainstCapacityUntilReleased) {
  BlockIndex index(200);
  ASSERT_TRUE(index.reserve(100).is_ok());
  ASSERT_TRUE(index.reserve(100).is_ok());
  EXPECT_FALSE(index.reserve(100).is_ok());
  index.release(100);
  EXPECT_TRUE(index.reserve(100).is_ok());
  EXPECT_EQ(index.stats().reserved_bytes, 200);
}

TEST(BlockIndex, EraseOfPinnedKeyMakesLaterUnpinHarmless) {
  BlockIndex index(0);
  index.insert(key(1), 0, 10);
  ASSERT_TRUE(index.pin(key(1)));
  index.erase(key(1));
  index.unpin(key(1));
  EXPECT_EQ(index.stats().pinned_blocks, 0);
  EXPECT_EQ(index.stats().used_bytes, 0);
}

}  // namespace
}  // namespace dualpath::store
