#include "store/aligned_buffer.h"

#include <fmt/format.h>

#include <sys/mman.h>

#include <algorithm>
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
  // Large buffers start on a huge-page boundary and ask for transparent huge pages: a 2.5 MB
  // O_DIRECT read into 4 KiB pages needs ~630 scatter-gather segments, more than a virtio disk
  // takes in one request (max_segments 254), so the kernel splits it; huge pages make it a
  // handful of segments and one request.
  const bool huge = rounded >= kHugePageBytes;
  void* p = nullptr;
  if (::posix_memalign(&p, huge ? std::max(alignment, kHugePageBytes) : alignment, rounded) != 0) {
    return Status::resource_exhausted(
        fmt::format("cannot allocate {} bytes aligned to {}", rounded, alignment));
  }
  if (huge) ::madvise(p, rounded, MADV_HUGEPAGE);  // a hint: without THP it stays 4 KiB pages
  std::memset(p, 0, rounded);
  buf.data_.reset(static_cast<std::byte*>(p));
  buf.size_ = rounded;
  return buf;
}

}  // namespace dualpath::store
