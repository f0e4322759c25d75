#pragma once
// BlockIntervalSet: a set of integer block ids stored as disjoint, non-adjacent runs, because
// the WEKA traces' prefix-block ids come in long consecutive runs (a 100K-token prompt is one or
// two runs of ~1,600 ids). Thread-compatible.

#include <cstdint>
#include <map>

namespace dualpath::workload {

class BlockIntervalSet {
 public:
  // Adds ids [start, start + count).
  void insert(int64_t start, int64_t count);
  // How many of the ids start, start+1, ... start+count-1 are present before the first absent one.
  int64_t covered_prefix(int64_t start, int64_t count) const;
  int64_t run_count() const { return static_cast<int64_t>(runs_.size()); }

 private:
  std::map<int64_t, int64_t> runs_;  // start -> end (exclusive); runs neither overlap nor touch
};

}  // namespace dualpath::workload
