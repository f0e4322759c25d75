#pragma once
// Block keys: the content address of a Full Block (PAPER.md §4, "Storage index").
//
// key_0 = H(fingerprint, tokens of block 0); key_i = H(key_{i-1}, tokens of block i), with H the
// 128-bit xxh3. One key therefore names a whole prefix, so the set of stored keys is the paper's
// trie in effect: the deepest stored key along a prompt's chain gives its hit length. The model
// fingerprint salts the chain, so two models never share a key even for the same tokens.
// Only whole blocks get keys; a trailing partial block is never stored (PAPER.md §12 item 9).

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::store {

using TokenId = int32_t;

// Identifies the model (and KV format) a block was computed with. Blocks from another model are
// never returned: the fingerprint is in the key chain and in every block file's header.
struct ModelFingerprint {
  uint64_t value = 0;
  friend bool operator==(const ModelFingerprint&, const ModelFingerprint&) = default;
};

// A fingerprint from a free-form description of the model and its KV format, e.g.
// "ds660b/fp8-mla/layers=61". Stable across runs and machines (xxh3-64 of the text).
ModelFingerprint fingerprint_of(std::string_view model_description);

// 128-bit key of one Full Block. Value type; ordered and hashable.
struct BlockKey {
  uint64_t high = 0;
  uint64_t low = 0;

  friend bool operator==(const BlockKey&, const BlockKey&) = default;
  friend auto operator<=>(const BlockKey&, const BlockKey&) = default;

  // 32 lower-case hex digits, high half first; the block file's name stem.
  std::string to_hex() const;
  static Result<BlockKey> from_hex(std::string_view hex);
};

struct BlockKeyHash {
  // The key is already a uniform hash; its low half is a fine bucket index.
  size_t operator()(const BlockKey& k) const { return static_cast<size_t>(k.low); }
};

// The key of the block that follows `previous` (the first block uses chain_start()).
BlockKey next_block_key(const BlockKey& previous, std::span<const TokenId> block_tokens);
// The chain's seed for a model: the "parent" of every prompt's first block.
//
// `cache_namespace` separates tenants (issue 32): a prefix stored under one namespace never hits
// under another, because the namespace is hashed into the seed and so into every key after it.
// The empty namespace gives exactly the keys of before namespaces existed, so existing stores keep
// hitting. The caller makes namespaces unambiguous (serve's HTTP layer length-prefixes its parts).
BlockKey chain_start(ModelFingerprint model, std::string_view cache_namespace = {});

// Keys of every whole block of `tokens` (tokens.size() / block_tokens of them), in order, from
// chain_start(model, cache_namespace). O(tokens). block_tokens must be positive.
std::vector<BlockKey> block_key_chain(ModelFingerprint model,
                                      std::span<const TokenId> tokens,
                                      int64_t block_tokens,
                                      std::string_view cache_namespace = {});

}  // namespace dualpath::store
