#include "transport/am_buffer_pool.h"

#include <utility>

namespace dualpath::transport {

AmBufferPool::AmBufferPool(uint64_t max_cached_bytes, Allocate allocate, Release release)
    : max_cached_bytes_(max_cached_bytes),
      allocate_(std::move(allocate)),
      release_(std::move(release)) {}

AmBufferPool::~AmBufferPool() { clear(); }

std::optional<AmBufferPool::Buffer> AmBufferPool::take(size_t size) {
  // Best fit; among equal fits the most recently returned, whose pages are likeliest to be in
  // cache (a stream of equal messages then cycles through as few buffers as it can).
  auto best = cached_.end();
  for (auto it = cached_.begin(); it != cached_.end(); ++it) {
    if (it->capacity >= size && (best == cached_.end() || it->capacity <= best->capacity)) {
      best = it;
    }
  }
  std::optional<Buffer> b;
  if (best != cached_.end()) {
    b = *best;
    cached_.erase(best);
    cached_bytes_ -= b->capacity;
  } else {
    b = allocate_(size);
    if (!b) return std::nullopt;
  }
  b->size = size;
  return b;
}

void AmBufferPool::give_back(const Buffer& buffer) {
  if (buffer.capacity > max_cached_bytes_) {
    release_(buffer);
    return;
  }
  cached_bytes_ += buffer.capacity;
  cached_.push_back(buffer);
  while (cached_bytes_ > max_cached_bytes_) {
    cached_bytes_ -= cached_.front().capacity;
    release_(cached_.front());
    cached_.pop_front();
  }
}

void AmBufferPool::clear() {
  for (const Buffer& b : cached_) release_(b);
  cached_.clear();
  cached_bytes_ = 0;
}

}  // namespace dualpath::transport
