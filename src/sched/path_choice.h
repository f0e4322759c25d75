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

// A split read (PAPER.md §11: "letting the two sides read parts of one request in parallel"; the
// paper leaves it as future work). One request's hit KV is shared between its PE node's and its
// DE node's storage NICs at Full Block granularity: the leading `pe_tokens` by the PE side, the
// rest by the DE side. pe_tokens + de_tokens is the hit: every block is read once.
struct ReadSplit {
  int64_t pe_tokens = 0;
  int64_t de_tokens = 0;
  ReadPath path() const {
    return pe_tokens > 0 && de_tokens > 0 ? ReadPath::kSplit
                                          : (pe_tokens > 0 ? ReadPath::kPe : ReadPath::kDe);
  }
};

// Splits `hit_tokens` (whole blocks of `block_tokens`) so that both sides finish together when
// their storage NICs read at the same rate behind the queues they have (tokens): the PE side
// takes (hit + de_q - pe_q) / 2, rounded to the nearest block and clamped to [0, hit]. A part
// smaller than `min_part_tokens` is not worth a second read (its per-read cost, a second buffer
// lease, a second ledger entry): it goes to the other side, and a hit below twice that is read
// whole on the side choose_read_path picks. With min_part_tokens <= block_tokens every hit of
// two blocks or more splits (a forced split: demo --path split).
ReadSplit split_read(int64_t hit_tokens, int64_t block_tokens, int64_t pe_node_read_q_tokens,
                     int64_t de_node_read_q_tokens, int64_t min_part_tokens);

// Read or recompute (issue 35). A read overlaps the request's wait in its PE's queue; computing
// the hit adds to the prefill. So the first token comes at about max(read_s, pe_wait_s) + prefill
// when reading and pe_wait_s + prefill + recompute_extra_s when recomputing: recompute when
// recompute_extra_s + pe_wait_s < read_s (all in seconds, the caller's estimates: the read behind
// its node's queue, the work queued ahead on the PE). A tie reads: it leaves the PE's compute to
// other requests. A busy PE (long pe_wait_s) never recomputes, so moving reads onto compute
// stops where compute becomes the bottleneck.
inline bool choose_recompute(double recompute_extra_s, double read_s, double pe_wait_s = 0) {
  return recompute_extra_s > 0 && recompute_extra_s + pe_wait_s < read_s;
}

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
