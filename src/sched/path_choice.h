#pragma once
// Read-path choice, PAPER.md §8.3, and the round-robin baseline. Pure.

#include <cstdint>

#include "sched/scheduler_types.h"

namespace dualpath::sched {

// Once PE and DE are fixed, the whole request reads on the side whose node has the shorter read
// queue (tokens). Ties go to the DE side: reads are short and queues are often both empty, and a
// PE-side tie-break would pile reads onto the P prefill nodes' NICs while the D decode nodes'
// idle, the imbalance DualPath exists to remove (with P <= D, the usual case). An overloaded DE
// node's queue grows and turns later ties away.
ReadPath choose_read_path(int64_t pe_node_read_q_tokens, int64_t de_node_read_q_tokens);

// Round robin over n choices (the baseline engine assignment). Thread-compatible.
class RoundRobin {
 public:
  int next(int n) {
    if (n <= 0) return -1;
    int v = static_cast<int>(next_ % static_cast<uint64_t>(n));
    ++next_;
    return v;
  }

 private:
  uint64_t next_ = 0;
};

}  // namespace dualpath::sched
