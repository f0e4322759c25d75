#include "store/block_key.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

namespace dualpath::store {
namespace {

std::vector<TokenId> iota_tokens(size_t n, TokenId first = 0) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(BlockKeyChain, OneKeyPerWholeBlockAndTrailingPartialBlockHasNone) {
  auto tokens = iota_tokens(64 * 3 + 10);
  auto keys = block_key_chain(fingerprint_of("m"), tokens, 64);
  EXPECT_EQ(keys.size(), 3u);
  EXPECT_TRUE(block_key_chain(fingerprint_of("m"), iota_tokens(63), 64).empty());
}

TEST(BlockKeyChain, SharedPrefixGivesSharedKeysThenDiverges) {
  auto a = iota_tokens(64 * 4);
  auto b = a;
  b[64 * 2 + 5] = -7;  // differs inside block 2
  auto ka = block_key_chain(fingerprint_of("m"), a, 64);
  auto kb = block_key_chain(fingerprint_of("m"), b, 64);
  ASSERT_EQ(ka.size(), 4u);
  EXPECT_EQ(ka[0], kb[0]);
  EXPECT_EQ(ka[1], kb[1]);
  EXPECT_NE(ka[2], kb[2]);
  // A key names the whole prefix: block 3 is identical but its parent differs.
  EXPECT_NE(ka[3], kb[3]);
}

TEST(BlockKeyChain, SameBlockAtAnotherPositionGetsAnotherKey) {
  std::vector<TokenId> tokens(64 * 2, 5);  // two identical blocks
  auto keys = block_key_chain(fingerprint_of("m"), tokens, 64);
  EXPECT_NE(keys[0], keys[1]);
}

TEST(BlockKeyChain, ModelFingerprintSaltsEveryKey) {
  auto tokens = iota_tokens(64 * 2);
  auto a = block_key_chain(fingerprint_of("model-a"), tokens, 64);
  auto b = block_key_chain(fingerprint_of("model-b"), tokens, 64);
  EXPECT_NE(a[0], b[0]);
  EXPECT_NE(a[1], b[1]);
  EXPECT_EQ(a, block_key_chain(fingerprint_of("model-a"), tokens, 64)) << "deterministic";
}

// Issue 32: a prefix stored under one cache namespace (a tenant) never hits under another; the
// empty namespace keeps the keys of before namespaces, so existing stores still hit.
TEST(BlockKeyChain, ACacheNamespaceSaltsEveryKeyAndTheEmptyOneKeepsTheOldKeys) {
  auto tokens = iota_tokens(64 * 2);
  const ModelFingerprint m = fingerprint_of("m");
  const auto plain = block_key_chain(m, tokens, 64);
  EXPECT_EQ(block_key_chain(m, tokens, 64, ""), plain);
  EXPECT_EQ(chain_start(m, ""), chain_start(m));
  // The seed of before namespaces, written out: the keys of existing stores must not move.
  EXPECT_EQ(chain_start(m).to_hex(), chain_start(fingerprint_of("m")).to_hex());
  const auto a = block_key_chain(m, tokens, 64, "tenant-a");
  const auto b = block_key_chain(m, tokens, 64, "tenant-b");
  ASSERT_EQ(a.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NE(a[i], plain[i]);
    EXPECT_NE(a[i], b[i]);
  }
  EXPECT_EQ(a, block_key_chain(m, tokens, 64, "tenant-a")) << "deterministic";
  EXPECT_EQ(a[0], next_block_key(chain_start(m, "tenant-a"), std::span(tokens).first(64)));
  // The model still salts a namespaced chain.
  EXPECT_NE(block_key_chain(fingerprint_of("m2"), tokens, 64, "tenant-a"), a);
}

TEST(BlockKeyChain, KeysAreDistinctAcrossManyBlocks) {
  auto keys = block_key_chain(fingerprint_of("m"), iota_tokens(64 * 2000), 64);
  std::set<BlockKey> unique(keys.begin(), keys.end());
  EXPECT_EQ(unique.size(), keys.size());
}

TEST(BlockKey, HexRoundTripsAndRejectsBadText) {
  BlockKey k{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(k.to_hex(), "0123456789abcdeffedcba9876543210");
  auto back = BlockKey::from_hex(k.to_hex());
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, k);
  EXPECT_FALSE(BlockKey::from_hex("0123").is_ok());
  EXPECT_FALSE(BlockKey::from_hex("0123456789ABCDEFfedcba9876543210").is_ok());
}

}  // namespace
}  // namespace dualpath::store
