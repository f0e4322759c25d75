#pragma once
// DaryHeap: a min-heap with four children per node, for the simulator's event queue and its
// processor-sharing servers. Half the depth of a binary heap, and a node's children share a
// cache line or two, so a pop touches fewer lines: the simulator pops ~50 million events a run
// at 48P96D. `Less(x, y)` must be a strict total order (the callers break ties by a sequence
// number), so the order of pops is the same as std::priority_queue's, element for element.
// Owned by the simulation thread.

#include <cstddef>
#include <utility>
#include <vector>

namespace dualpath::sim {

template <typename T, typename Less>
class DaryHeap {
 public:
  bool empty() const { return v_.empty(); }
  size_t size() const { return v_.size(); }
  const T& top() const { return v_.front(); }

  void push(const T& x) {
    size_t i = v_.size();
    v_.push_back(x);
    while (i > 0) {
      const size_t parent = (i - 1) / kArity;
      if (!less_(x, v_[parent])) break;
      v_[i] = std::move(v_[parent]);
      i = parent;
    }
    v_[i] = x;
  }

  void pop() {
    T last = std::move(v_.back());
    v_.pop_back();
    if (v_.empty()) return;
    // Move the hole at the root down to where `last` belongs.
    const size_t n = v_.size();
    size_t i = 0;
    for (;;) {
      const size_t first = kArity * i + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t end = first + kArity < n ? first + kArity : n;
      for (size_t c = first + 1; c < end; ++c)
        if (less_(v_[c], v_[best])) best = c;
      if (!less_(v_[best], last)) break;
      v_[i] = std::move(v_[best]);
      i = best;
    }
    v_[i] = std::move(last);
  }

 private:
  static constexpr size_t kArity = 4;
  std::vector<T> v_;
  [[no_unique_address]] Less less_;
};

}  // namespace dualpath::sim
