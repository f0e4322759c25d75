#pragma once
// AlignedBuffer: an owned, zeroed, 4096-aligned byte buffer, as O_DIRECT reads and writes need.
// Buffers of 2 MiB or more are 2 MiB-aligned and backed by transparent huge pages when the
// kernel allows (see aligned_buffer.cc for why). Allocate one large buffer and slice it for a
// pool of blocks. Move-only. Thread-compatible.

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <span>

#include "dualpath/result.h"

namespace dualpath::store {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // `bytes` is rounded up to a multiple of `alignment` (a power of two). kResourceExhausted when
  // the allocation fails.
  static Result<AlignedBuffer> allocate(size_t bytes, size_t alignment = 4096);

  std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }
  std::span<std::byte> span() const { return {data_.get(), size_}; }
  // The first `bytes` bytes (bytes <= size()).
  std::span<std::byte> first(size_t bytes) const { return span().first(bytes); }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
  size_t size_ = 0;
};

}  // namespace dualpath::store
