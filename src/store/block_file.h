#pragma once
// The block file format: one Full Block per file, content-addressed by its BlockKey.
//
//   [header: 4096 bytes][payload: full_block_bytes][zero padding to a multiple of 4096]
//
// The header is padded to 4096 bytes and the payload to a multiple of 4096 so that the same file
// can be read with O_DIRECT (aligned offsets and lengths) or buffered. Header fields, all
// little-endian:
//
//   off size field
//     0    8 magic "DPKVBLK\0"
//     8    4 format_version (kBlockFormatVersion)
//    12    4 header_bytes (4096)
//    16    8 model fingerprint
//    24   16 block key (high, low)
//    40    4 layers
//    44    4 block_tokens
//    48    8 bytes_per_token_per_layer
//    56    8 payload_bytes
//    64    8 payload_xxh3: xxh3-64 of the payload and its zero padding (every byte after the
//    header) 72    8 header_xxh3: xxh3-64 of the 4096 header bytes with this field zeroed 80 4016
//    zero
//
// Together the two checksums cover every byte of the file, so a flipped byte anywhere is caught.
// A reader checks magic, then version (a future version may move the other fields), then the
// header checksum, then that the fields match what it expects, then the payload checksum.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "dualpath/status.h"
#include "store/block_key.h"
#include "store/block_layout.h"

namespace dualpath::store {

static_assert(std::endian::native == std::endian::little,
              "block files and keys are little-endian; a big-endian port must byte-swap here");

inline constexpr uint32_t kBlockFormatVersion = 1;
// The O_DIRECT alignment of offsets, lengths and buffers: the largest logical block size of the
// devices we target (NVMe and 3FS use 4096; 512-byte devices accept it too).
inline constexpr int64_t kIoAlignBytes = 4096;
inline constexpr int64_t kBlockHeaderBytes = 4096;
inline constexpr char kBlockMagic[8] = {'D', 'P', 'K', 'V', 'B', 'L', 'K', '\0'};
inline constexpr std::string_view kBlockFileSuffix = ".blk";

constexpr int64_t round_up_to_io_align(int64_t bytes) {
  return (bytes + kIoAlignBytes - 1) / kIoAlignBytes * kIoAlignBytes;
}

// Bytes a block file of this layout occupies: header plus padded payload.
constexpr int64_t block_file_bytes(const BlockLayout& layout) {
  return kBlockHeaderBytes + round_up_to_io_align(layout.full_block_bytes());
}

// What a reader expects a block file to hold.
struct BlockIdentity {
  ModelFingerprint model;
  BlockKey key;
  BlockLayout layout;
};

// Fills `header` (kBlockHeaderBytes, zeroed by the caller or not) for a block whose payload and
// padding hash to `payload_xxh3`.
void encode_block_header(const BlockIdentity& id,
                         uint64_t payload_xxh3,
                         std::span<std::byte, kBlockHeaderBytes> header);

// Checks a header read from `path` against `expected`. Returns the stored payload checksum, or
// kCorruption with a message that names the file and what is wrong (bad magic, future version,
// header checksum, another model, another key, another layout).
Result<uint64_t> check_block_header(std::span<const std::byte, kBlockHeaderBytes> header,
                                    const BlockIdentity& expected,
                                    const std::string& path);

// xxh3-64 over the padded payload, given as the pieces in which it was read or will be written.
uint64_t payload_checksum(std::span<const std::span<const std::byte>> pieces);

}  // namespace dualpath::store
