#include "store/block_key.h"

#include <fmt/format.h>
// XXH3_state_t on the stack needs the static-linking-only declarations.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <array>
#include <cstring>

namespace dualpath::store {

ModelFingerprint fingerprint_of(std::string_view model_description) {
  return ModelFingerprint{XXH3_64bits(model_description.data(), model_description.size())};
}

std::string BlockKey::to_hex() const { return fmt::format("{:016x}{:016x}", high, low); }

Result<BlockKey> BlockKey::from_hex(std::string_view hex) {
  if (hex.size() != 32) {
    return Status::invalid_argument(
        fmt::format("block key '{}' has {} characters; a key is 32 hex digits", hex, hex.size()));
  }
  uint64_t halves[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    char c = hex[i];
    uint64_t digit = 0;
    if (c >= '0' && c <= '9') {
      digit = static_cast<uint64_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<uint64_t>(c - 'a' + 10);
    } else {
      return Status::invalid_argument(fmt::format(
          "block key '{}' has '{}' at position {}; keys are lower-case hex", hex, c, i));
    }
    halves[i / 16] = (halves[i / 16] << 4) | digit;
  }
  return BlockKey{halves[0], halves[1]};
}

BlockKey next_block_key(const BlockKey& previous, std::span<const TokenId> block_tokens) {
  // Streaming keeps the hash allocation-free: the parent key, then the block's token ids as
  // little-endian int32 (the host order; block_file.h pins the host to little-endian).
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  std::array<uint64_t, 2> parent = {previous.high, previous.low};
  XXH3_128bits_update(&state, parent.data(), sizeof(parent));
  XXH3_128bits_update(&state, block_tokens.data(), block_tokens.size_bytes());
  XXH128_hash_t h = XXH3_128bits_digest(&state);
  return BlockKey{h.high64, h.low64};
}

BlockKey chain_start(ModelFingerprint model, std::string_view cache_namespace) {
  // A domain tag keeps the seed apart from any key computed over tokens.
  static constexpr char kTag[] = "dualpath.block_key.v1";
  std::array<char, sizeof(kTag) - 1 + sizeof(uint64_t)> seed{};
  std::memcpy(seed.data(), kTag, sizeof(kTag) - 1);
  std::memcpy(seed.data() + sizeof(kTag) - 1, &model.value, sizeof(uint64_t));
  if (cache_namespace.empty()) {
    XXH128_hash_t h = XXH3_128bits(seed.data(), seed.size());
    return BlockKey{h.high64, h.low64};
  }
  // A namespaced seed: another tag (so no namespace collides with the empty one's seed), the
  // model, the namespace's length and its bytes.
  static constexpr char kNsTag[] = "dualpath.block_key.v1.namespace";
  const uint64_t ns_bytes = cache_namespace.size();
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, kNsTag, sizeof(kNsTag) - 1);
  XXH3_128bits_update(&state, &model.value, sizeof(model.value));
  XXH3_128bits_update(&state, &ns_bytes, sizeof(ns_bytes));
  XXH3_128bits_update(&state, cache_namespace.data(), cache_namespace.size());
  XXH128_hash_t h = XXH3_128bits_digest(&state);
  return BlockKey{h.high64, h.low64};
}

std::vector<BlockKey> block_key_chain(ModelFingerprint model,
                                      std::span<const TokenId> tokens,
                                      int64_t block_tokens,
                                      std::string_view cache_namespace) {
  std::vector<BlockKey> keys;
  if (block_tokens <= 0) return keys;
  const size_t per_block = static_cast<size_t>(block_tokens);
  keys.reserve(tokens.size() / per_block);
  BlockKey key = chain_start(model, cache_namespace);
  for (size_t begin = 0; begin + per_block <= tokens.size(); begin += per_block) {
    key = next_block_key(key, tokens.subspan(begin, per_block));
    keys.push_back(key);
  }
  return keys;
}

}  // namespace dualpath::store
