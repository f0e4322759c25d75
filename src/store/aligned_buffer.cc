#include "store/aligned_buffer.h"

#include <fmt/format.h>

#include <cstring>

namespace dualpath::store {

Result<AlignedBuffer> AlignedBuffer::allocate(size_t bytes, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return Status::invalid_argument(
        fmt::format("buffer alignment {} is not a power of two", alignment));
  }
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  AlignedBuffer buf;
  if (rounded == 0) return buf;
  void* p = std::aligned_alloc(alignment, rounded);
  if (p == nullptr) {
    return Status::resource_exhausted(
        fmt::format("cannot allocate {} bytes aligned to {}", rounded, alignment));
  }
  std::memset(p, 0, rounded);
  buf.data_.reset(static_cast<std::byte*>(p));
  buf.size_ = rounded;
  return buf;
}

}  // namespace dualpath::store
