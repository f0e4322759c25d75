#pragma once
// DaryHeap: a min-heap with four children per node, for the simulator's event queue and its
// processor-sharing servers. Half the depth of a binary heap, and a node's children share a
// cache line or two, so a pop touches fewer lines: the simulator pops ~50 million events a run
// at 48P96D. Elements are ordered by `KeyOf{}(x)`, an unsigned integer key that must be unique
// (the callers put a sequence number in its low bits), so the order of pops is the same as any
// other heap's over the same keys, element for element. Owned by the simulation thread.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace dualpath::sim {

// (t, seq) as one unsigned integer that orders as the pair does, for t >= 0 (non-negative
// doubles order as their bit patterns do; -0.0 is made +0.0). One integer compare per child
// instead of two dependent floating-point ones, which the compiler turns into conditional moves.
__extension__ using OrderKey = unsigned __int128;
inline OrderKey order_key(double t, uint64_t seq) {
  const auto bits = std::bit_cast<uint64_t>(t + 0.0);
  return (static_cast<OrderKey>(bits) << 64) | seq;
}
inline double order_key_time(OrderKey k) {
  return std::bit_cast<double>(static_cast<uint64_t>(k >> 64));
}
inline uint64_t order_key_seq(OrderKey k) { return static_cast<uint64_t>(k); }

template <typename T, typename KeyOf>
class DaryHeap {
 public:
  bool empty() const { return v_.empty(); }
  size_t size() const { return v_.size(); }
  const T& top() const { return v_.front(); }

  void push(const T& x) {
    const auto k = key_(x);
    size_t i = v_.size();
    v_.push_back(x);
    while (i > 0) {
      const size_t parent = (i - 1) / kArity;
      if (!(k < key_(v_[parent]))) break;
      v_[i] = std::move(v_[parent]);
      i = parent;
    }
    v_[i] = x;
  }

  void pop() {
    T last = std::move(v_.back());
    v_.pop_back();
    if (v_.empty()) return;
    const auto last_key = key_(last);
    // Move the hole at the root down to where `last` belongs.
    const size_t n = v_.size();
    size_t i = 0;
    for (;;) {
      const size_t first = kArity * i + 1;
      if (first >= n) break;
      size_t best = first;
      auto best_key = key_(v_[first]);
      const size_t end = first + kArity < n ? first + kArity : n;
      for (size_t c = first + 1; c < end; ++c) {
        const auto k = key_(v_[c]);
        const bool lower = k < best_key;
        best = lower ? c : best;
        best_key = lower ? k : best_key;
      }
      if (!(best_key < last_key)) break;
      v_[i] = std::move(v_[best]);
      i = best;
    }
    v_[i] = std::move(last);
  }

 private:
  static constexpr size_t kArity = 4;
  std::vector<T> v_;
  [[no_unique_address]] KeyOf key_;
};

}  // namespace dualpath::sim
