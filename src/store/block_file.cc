#include "store/block_file.h"

#include <fmt/format.h>
// XXH3_state_t on the stack needs the static-linking-only declarations.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <cstring>

namespace dualpath::store {
namespace {

// Field offsets; see the table in block_file.h.
constexpr size_t kOffMagic = 0;
constexpr size_t kOffVersion = 8;
constexpr size_t kOffHeaderBytes = 12;
constexpr size_t kOffModel = 16;
constexpr size_t kOffKeyHigh = 24;
constexpr size_t kOffKeyLow = 32;
constexpr size_t kOffLayers = 40;
constexpr size_t kOffBlockTokens = 44;
constexpr size_t kOffBytesPerToken = 48;
constexpr size_t kOffPayloadBytes = 56;
constexpr size_t kOffPayloadXxh3 = 64;
constexpr size_t kOffHeaderXxh3 = 72;

template <typename T>
void put(std::span<std::byte, kBlockHeaderBytes> h, size_t off, T v) {
  std::memcpy(h.data() + off, &v, sizeof(T));
}
template <typename T>
T get(std::span<const std::byte, kBlockHeaderBytes> h, size_t off) {
  T v;
  std::memcpy(&v, h.data() + off, sizeof(T));
  return v;
}

uint64_t header_checksum(std::span<const std::byte, kBlockHeaderBytes> h) {
  // The checksum field counts as zero, so the sum can live inside what it covers.
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, h.data(), kOffHeaderXxh3);
  static constexpr uint64_t kZero = 0;
  XXH3_64bits_update(&state, &kZero, sizeof(kZero));
  const size_t rest = kOffHeaderXxh3 + sizeof(uint64_t);
  XXH3_64bits_update(&state, h.data() + rest, kBlockHeaderBytes - rest);
  return XXH3_64bits_digest(&state);
}

}  // namespace

void encode_block_header(const BlockIdentity& id,
                         uint64_t payload_xxh3,
                         std::span<std::byte, kBlockHeaderBytes> header) {
  std::memset(header.data(), 0, header.size());
  std::memcpy(header.data() + kOffMagic, kBlockMagic, sizeof(kBlockMagic));
  put<uint32_t>(header, kOffVersion, kBlockFormatVersion);
  put<uint32_t>(header, kOffHeaderBytes, static_cast<uint32_t>(kBlockHeaderBytes));
  put<uint64_t>(header, kOffModel, id.model.value);
  put<uint64_t>(header, kOffKeyHigh, id.key.high);
  put<uint64_t>(header, kOffKeyLow, id.key.low);
  put<uint32_t>(header, kOffLayers, static_cast<uint32_t>(id.layout.layers));
  put<uint32_t>(header, kOffBlockTokens, static_cast<uint32_t>(id.layout.block_tokens));
  put<uint64_t>(header, kOffBytesPerToken,
                static_cast<uint64_t>(id.layout.bytes_per_token_per_layer));
  put<uint64_t>(header, kOffPayloadBytes, static_cast<uint64_t>(id.layout.full_block_bytes()));
  put<uint64_t>(header, kOffPayloadXxh3, payload_xxh3);
  put<uint64_t>(header, kOffHeaderXxh3, header_checksum(header));
}

Result<uint64_t> check_block_header(std::span<const std::byte, kBlockHeaderBytes> header,
                                    const BlockIdentity& expected,
                                    const std::string& path) {
  if (std::memcmp(header.data() + kOffMagic, kBlockMagic, sizeof(kBlockMagic)) != 0) {
    return Status::corruption(fmt::format("'{}' is not a dualpath block file (bad magic)", path));
  }
  const auto version = get<uint32_t>(header, kOffVersion);
  if (version != kBlockFormatVersion) {
    return Status::corruption(fmt::format(
        "'{}' has block format version {}, this build reads version {}{}", path, version,
        kBlockFormatVersion,
        version > kBlockFormatVersion ? " (written by a newer dualpath; upgrade to read it)" : ""));
  }
  if (get<uint64_t>(header, kOffHeaderXxh3) != header_checksum(header)) {
    return Status::corruption(fmt::format("'{}' fails its header checksum", path));
  }
  const auto model = get<uint64_t>(header, kOffModel);
  if (model != expected.model.value) {
    return Status::corruption(
        fmt::format("'{}' holds KV of model fingerprint {:016x}, this store serves {:016x}", path,
                    model, expected.model.value));
  }
  const BlockKey key{get<uint64_t>(header, kOffKeyHigh), get<uint64_t>(header, kOffKeyLow)};
  if (key != expected.key) {
    return Status::corruption(fmt::format("'{}' holds block {}, its name says {}", path,
                                          key.to_hex(), expected.key.to_hex()));
  }
  const BlockLayout layout{get<uint32_t>(header, kOffLayers),
                           get<uint32_t>(header, kOffBlockTokens),
                           static_cast<int64_t>(get<uint64_t>(header, kOffBytesPerToken))};
  const auto payload_bytes = static_cast<int64_t>(get<uint64_t>(header, kOffPayloadBytes));
  if (layout != expected.layout || payload_bytes != expected.layout.full_block_bytes() ||
      get<uint32_t>(header, kOffHeaderBytes) != kBlockHeaderBytes) {
    return Status::corruption(
        fmt::format("'{}' has layout layers={} block_tokens={} bytes_per_token_per_layer={} "
                    "payload_bytes={}, this store expects layers={} block_tokens={} "
                    "bytes_per_token_per_layer={}",
                    path, layout.layers, layout.block_tokens, layout.bytes_per_token_per_layer,
                    payload_bytes, expected.layout.layers, expected.layout.block_tokens,
                    expected.layout.bytes_per_token_per_layer));
  }
  return get<uint64_t>(header, kOffPayloadXxh3);
}

uint64_t payload_checksum(std::span<const std::span<const std::byte>> pieces) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  for (const auto& p : pieces) XXH3_64bits_update(&state, p.data(), p.size());
  return XXH3_64bits_digest(&state);
}

}  // namespace dualpath::store
