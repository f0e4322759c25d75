#include "compute/kv_filler.h"

#include <algorithm>
#include <cstring>

#include "compute/init_rng.h"

namespace dualpath::compute {

void fill_kv_row(
    std::span<std::byte> row, uint64_t seed, int32_t token, int64_t position, int layer) {
  const uint64_t base = mix64(
      seed ^ mix64(static_cast<uint64_t>(static_cast<uint32_t>(token)) ^
                   mix64(static_cast<uint64_t>(position) * 0x100 + static_cast<uint64_t>(layer))));
  // Word w = base + w * golden: a Weyl sequence through the mixer, the SplitMix64 construction.
  for (size_t off = 0, w = 0; off < row.size(); off += 8, ++w) {
    const uint64_t word = mix64(base + w * 0x9E3779B97F4A7C15ULL);
    std::memcpy(row.data() + off, &word, std::min<size_t>(8, row.size() - off));
  }
}

uint64_t kv_row_digest(std::span<const std::byte> row) {
  uint64_t h = 0x6A09E667F3BCC909ULL ^ row.size();
  size_t off = 0;
  for (; off + 8 <= row.size(); off += 8) {
    uint64_t word;
    std::memcpy(&word, row.data() + off, 8);
    h = (h ^ word) * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 29;
  }
  if (off < row.size()) {
    uint64_t word = 0;
    std::memcpy(&word, row.data() + off, row.size() - off);
    h = (h ^ word) * 0x9E3779B97F4A7C15ULL;
  }
  return mix64(h);
}

}  // namespace dualpath::compute
