#include "store/dram_tier.h"

#include <gtest/gtest.h>

#include <numeric>

namespace dualpath::store {
namespace {

constexpr uint64_t kBlock = 16;  // bytes of one Full Block here

std::vector<TokenId> tokens(size_t n, TokenId first = 0) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}
std::vector<BlockKey> chain(const std::vector<TokenId>& t) {
  return block_key_chain(fingerprint_of("tier-test"), t, 4);
}
// Block i of a chain holds bytes all equal to `fill + i`.
std::vector<std::byte> bytes_of(size_t blocks, int fill) {
  std::vector<std::byte> b(blocks * kBlock);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(fill + i / kBlock);
  return b;
}
// A session's three-block first turn, and its next turn's tokens (two blocks appended).
std::vector<TokenId> first_turn() { return tokens(4 * 3); }
std::vector<TokenId> next_turn() {
  auto t = first_turn();
  for (TokenId x : tokens(4 * 2, 100)) t.push_back(x);
  return t;
}
DramTier::Options options(uint64_t blocks, bool keep = true) {
  return {blocks * kBlock, std::chrono::seconds(10), kBlock, keep};
}

TEST(DramTier, KeepsAChainAndReadsItsBlocksBack) {
  ManualClock clock;
  DramTier tier(options(8), clock);
  const auto t = tokens(4 * 3);
  const auto k = chain(t);
  ASSERT_TRUE(tier.store(k, bytes_of(3, 10)));
  EXPECT_EQ(tier.resident_prefix(k), 3u);
  std::vector<std::byte> out(kBlock);
  ASSERT_TRUE(tier.read(k[1], out));
  EXPECT_EQ(out[0], std::byte{11});
  EXPECT_EQ(tier.stats().used_bytes, 3 * kBlock);
}

TEST(DramTier, ANextTurnsPromptFindsThePreviousTurnsPrefix) {
  ManualClock clock;
  DramTier tier(options(16), clock);
  ASSERT_TRUE(tier.store(chain(first_turn()), bytes_of(3, 0)));
  EXPECT_EQ(tier.resident_prefix(chain(next_turn())), 3u);  // the two new blocks are not held
  auto other = first_turn();
  other[5] = -1;  // differs in block 1
  EXPECT_EQ(tier.resident_prefix(chain(other)), 1u);
}

TEST(DramTier, AChainReplacesTheOneItExtendsAndSharesItsBlocks) {
  ManualClock clock;
  DramTier tier(options(16), clock);
  ASSERT_TRUE(tier.store(chain(first_turn()), bytes_of(3, 0)));
  ASSERT_TRUE(tier.store(chain(next_turn()), bytes_of(5, 0)));
  const DramTier::Stats s = tier.stats();
  EXPECT_EQ(s.chains, 1);  // the previous turn's chain was replaced
  EXPECT_EQ(s.blocks, 5);
  EXPECT_EQ(s.used_bytes, 5 * kBlock);
  EXPECT_EQ(s.evicted, 0);
}

TEST(DramTier, ANextTurnGivesOnlyItsNewBlocksAndIsNotKeptIfTheOldOnesWentMeanwhile) {
  ManualClock clock;
  DramTier tier(options(16), clock);
  ASSERT_TRUE(tier.store(chain(first_turn()), bytes_of(3, 0)));
  const auto next = chain(next_turn());
  ASSERT_EQ(tier.resident_prefix(next), 3u);
  ASSERT_TRUE(tier.store(next, bytes_of(2, 3), 3));  // blocks 3 and 4 only
  std::vector<std::byte> out(kBlock);
  ASSERT_TRUE(tier.read(next[0], out));
  EXPECT_EQ(out[0], std::byte{0});
  ASSERT_TRUE(tier.read(next[4], out));
  EXPECT_EQ(out[0], std::byte{4});
  tier.clear();
  EXPECT_FALSE(tier.store(next, bytes_of(2, 3), 3)) << "kept blocks it has no bytes for";
  EXPECT_EQ(tier.resident_prefix(next), 0u);
}

TEST(DramTier, ExpiresAfterItsTtlOnTheInjectedClock) {
  ManualClock clock;
  DramTier tier(options(8), clock);
  const auto k = chain(tokens(8));
  ASSERT_TRUE(tier.store(k, bytes_of(2, 0)));
  clock.advance(std::chrono::seconds(9));
  EXPECT_EQ(tier.resident_prefix(k), 2u);
  clock.advance(std::chrono::seconds(2));
  EXPECT_EQ(tier.resident_prefix(k), 0u);
  std::vector<std::byte> out(kBlock);
  EXPECT_FALSE(tier.read(k[0], out));
  EXPECT_EQ(tier.stats().expired, 1);
  EXPECT_EQ(tier.stats().used_bytes, 0u);
}

TEST(DramTier, MakesRoomByDroppingTheLeastRecentlyStoredWholeChains) {
  ManualClock clock;
  DramTier tier(options(6), clock);
  const auto a = chain(tokens(4 * 3, 0));
  const auto b = chain(tokens(4 * 3, 1000));
  const auto c = chain(tokens(4 * 2, 2000));
  ASSERT_TRUE(tier.store(a, bytes_of(3, 0)));
  ASSERT_TRUE(tier.store(b, bytes_of(3, 0)));
  ASSERT_TRUE(tier.store(c, bytes_of(2, 0)));  // 8 blocks > 6: a goes, whole
  EXPECT_EQ(tier.resident_prefix(a), 0u);
  EXPECT_EQ(tier.resident_prefix(b), 3u);
  EXPECT_EQ(tier.resident_prefix(c), 2u);
  EXPECT_EQ(tier.stats().evicted, 1);
  EXPECT_LE(tier.stats().used_bytes, 6 * kBlock);
}

TEST(DramTier, DoesNotKeepAChainLargerThanTheTierAndKeepsWhatItHad) {
  ManualClock clock;
  DramTier tier(options(4), clock);
  const auto small = chain(tokens(8));
  ASSERT_TRUE(tier.store(small, bytes_of(2, 0)));
  EXPECT_FALSE(tier.store(chain(tokens(4 * 5, 500)), bytes_of(5, 0)));
  EXPECT_EQ(tier.resident_prefix(small), 2u);
  EXPECT_EQ(tier.stats().not_kept, 1);
}

TEST(DramTier, OffKeepsNothingAndTheMirrorKeepsNoBytes) {
  ManualClock clock;
  DramTier off(options(0), clock);
  const auto k = chain(tokens(8));
  EXPECT_FALSE(off.store(k, bytes_of(2, 0)));
  EXPECT_EQ(off.resident_prefix(k), 0u);
  DramTier mirror(options(8, /*keep=*/false), clock);
  ASSERT_TRUE(mirror.store(k, {}));
  EXPECT_EQ(mirror.resident_prefix(k), 2u);
  std::vector<std::byte> out(kBlock);
  EXPECT_FALSE(mirror.read(k[0], out));  // bookkeeping only
  mirror.clear();
  EXPECT_EQ(mirror.resident_prefix(k), 0u);
}

}  // namespace
}  // namespace dualpath::store
