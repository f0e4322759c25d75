#include "transport/wire_format.h"

#include <fmt/format.h>

#include <cstring>

namespace dualpath::transport {

uint64_t fnv1a64(std::span<const std::byte> bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (std::byte b : bytes) {
    h ^= static_cast<uint64_t>(b);
    h *= 1099511628211ULL;
  }
  return h;
}

void WireWriter::put(const void* p, size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  out_.insert(out_.end(), b, b + n);
}

void WireWriter::bytes(std::span<const std::byte> b) {
  u32(static_cast<uint32_t>(b.size()));
  put(b.data(), b.size());
}

void WireWriter::text(std::string_view s) {
  u32(static_cast<uint32_t>(s.size()));
  put(s.data(), s.size());
}

std::vector<std::byte> WireWriter::finish() {
  u64(fnv1a64(out_));
  return std::move(out_);
}

Result<WireReader> WireReader::open(std::span<const std::byte> blob, std::string_view what) {
  if (blob.size() < sizeof(uint64_t)) {
    return Status::invalid_argument(
        fmt::format("{} is {} bytes, too short to be one", what, blob.size()));
  }
  auto body = blob.first(blob.size() - sizeof(uint64_t));
  uint64_t stored = 0;
  std::memcpy(&stored, blob.data() + body.size(), sizeof stored);
  if (stored != fnv1a64(body)) {
    return Status::invalid_argument(fmt::format(
        "{} ({} bytes) fails its checksum: it is corrupted or not a dualpath {}; pass the bytes "
        "the peer produced, unchanged",
        what, blob.size(), what));
  }
  return WireReader(body, what);
}

Status WireReader::take(void* p, size_t n) {
  if (body_.size() - pos_ < n) {
    return Status::invalid_argument(fmt::format("{} is truncated at byte {}", what_, pos_));
  }
  std::memcpy(p, body_.data() + pos_, n);
  pos_ += n;
  return Status::ok();
}

Result<uint16_t> WireReader::u16() {
  uint16_t v = 0;
  DP_RETURN_IF_ERROR(take(&v, sizeof v));
  return v;
}

Result<uint32_t> WireReader::u32() {
  uint32_t v = 0;
  DP_RETURN_IF_ERROR(take(&v, sizeof v));
  return v;
}

Result<uint64_t> WireReader::u64() {
  uint64_t v = 0;
  DP_RETURN_IF_ERROR(take(&v, sizeof v));
  return v;
}

Result<std::span<const std::byte>> WireReader::bytes() {
  DP_ASSIGN_OR_RETURN(uint32_t n, u32());
  if (body_.size() - pos_ < n) {
    return Status::invalid_argument(fmt::format("{} is truncated at byte {}", what_, pos_));
  }
  auto out = body_.subspan(pos_, n);
  pos_ += n;
  return out;
}

Result<std::string> WireReader::text() {
  DP_ASSIGN_OR_RETURN(auto b, bytes());
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

}  // namespace dualpath::transport
