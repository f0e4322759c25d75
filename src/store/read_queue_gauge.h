#pragma once
// ReadQueueGauge: the tokens and bytes queued for reading from storage on one node, the read_q
// signal of the scheduler (PAPER.md §8, §12 item 3: we count tokens and bytes of reads that are
// submitted and not yet finished; writes do not count). Thread-safe and lock-free.

#include <atomic>
#include <cstdint>

namespace dualpath::store {

class ReadQueueGauge {
 public:
  struct Snapshot {
    int64_t tokens = 0;
    int64_t bytes = 0;
  };

  void add(int64_t tokens, int64_t bytes) {
    // Relaxed: the gauge is a load signal, read without ordering against the reads it counts.
    tokens_.fetch_add(tokens, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void remove(int64_t tokens, int64_t bytes) { add(-tokens, -bytes); }

  // The two fields are read separately, so under load they may be one block apart.
  Snapshot snapshot() const {
    return {tokens_.load(std::memory_order_relaxed), bytes_.load(std::memory_order_relaxed)};
  }

 private:
  std::atomic<int64_t> tokens_{0};
  std::atomic<int64_t> bytes_{0};
};

}  // namespace dualpath::store
