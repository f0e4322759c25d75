#include "workload/block_interval_set.h"

#include <algorithm>
#include <iterator>

namespace dualpath::workload {

void BlockIntervalSet::insert(int64_t start, int64_t count) {
  if (count <= 0) return;
  int64_t lo = start;
  int64_t hi = start + count;
  // Merge with a run that starts before `lo` and reaches it.
  auto it = runs_.upper_bound(lo);
  if (it != runs_.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= lo) {
      lo = prev->first;
      hi = std::max(hi, prev->second);
      it = runs_.erase(prev);
    }
  }
  // Absorb runs that start inside [lo, hi] (touching runs merge too).
  while (it != runs_.end() && it->first <= hi) {
    hi = std::max(hi, it->second);
    it = runs_.erase(it);
  }
  runs_.emplace(lo, hi);
}

int64_t BlockIntervalSet::covered_prefix(int64_t start, int64_t count) const {
  if (count <= 0) return 0;
  auto it = runs_.upper_bound(start);
  if (it == runs_.begin()) return 0;
  --it;
  if (it->second <= start) return 0;
  return std::min(it->second, start + count) - start;
}

}  // namespace dualpath::workload
