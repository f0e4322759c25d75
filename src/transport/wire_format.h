#pragma once
// Little-endian framing of the small blobs peers exchange (worker addresses, region descriptors):
// a writer, a bounds-checked reader, and an FNV-1a checksum so that a corrupted or foreign blob is
// rejected with a clear error instead of being handed to UCX. Thread-compatible.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::transport {

uint64_t fnv1a64(std::span<const std::byte> bytes);

class WireWriter {
 public:
  void u16(uint16_t v) { put(&v, sizeof v); }
  void u32(uint32_t v) { put(&v, sizeof v); }
  void u64(uint64_t v) { put(&v, sizeof v); }
  void bytes(std::span<const std::byte> b);  // u32 length, then the bytes
  void text(std::string_view s);             // u32 length, then the characters
  // Appends the checksum of everything written so far and returns the blob.
  std::vector<std::byte> finish();

 private:
  void put(const void* p, size_t n);
  std::vector<std::byte> out_;
};

// Reads what WireWriter wrote. `what` names the blob in errors ("region descriptor").
class WireReader {
 public:
  // Verifies the trailing checksum; kInvalidArgument when the blob is short or corrupted.
  static Result<WireReader> open(std::span<const std::byte> blob, std::string_view what);
  Result<uint16_t> u16();
  Result<uint32_t> u32();
  Result<uint64_t> u64();
  Result<std::span<const std::byte>> bytes();
  Result<std::string> text();

 private:
  WireReader(std::span<const std::byte> body, std::string_view what) : body_(body), what_(what) {}
  Status take(void* p, size_t n);
  std::span<const std::byte> body_;
  size_t pos_ = 0;
  std::string what_;
};

}  // namespace dualpath::transport
