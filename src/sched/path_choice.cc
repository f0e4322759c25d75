#include "sched/path_choice.h"

#include <algorithm>
#include <cmath>

namespace dualpath::sched {

ReadPath choose_read_path(int64_t pe_node_read_q_tokens, int64_t de_node_read_q_tokens) {
  return de_node_read_q_tokens <= pe_node_read_q_tokens ? ReadPath::kDe : ReadPath::kPe;
}

ReadSplit split_read(int64_t hit_tokens, int64_t block_tokens, int64_t pe_node_read_q_tokens,
                     int64_t de_node_read_q_tokens, int64_t min_part_tokens) {
  const int64_t bt = std::max<int64_t>(1, block_tokens);
  const int64_t blocks = std::max<int64_t>(0, hit_tokens) / bt;
  const int64_t min_blocks = std::max<int64_t>(1, (min_part_tokens + bt - 1) / bt);
  auto whole = [&](ReadPath side) {
    return side == ReadPath::kPe ? ReadSplit{blocks * bt, 0} : ReadSplit{0, blocks * bt};
  };
  if (blocks < 2 * min_blocks)
    return whole(choose_read_path(pe_node_read_q_tokens, de_node_read_q_tokens));
  // Equal finish times: pe_q + x = de_q + (hit - x). In blocks, rounded to the nearest (halves
  // up: a tie gives the PE side the odd block, the same as the DE side's tie-break of
  // choose_read_path gives the DE side a whole request; the two balance).
  const double x = (static_cast<double>(blocks * bt) + static_cast<double>(de_node_read_q_tokens) -
                    static_cast<double>(pe_node_read_q_tokens)) /
                   2.0 / static_cast<double>(bt);
  int64_t pe_blocks = std::clamp<int64_t>(static_cast<int64_t>(std::floor(x + 0.5)), 0, blocks);
  if (pe_blocks < min_blocks) pe_blocks = 0;
  if (blocks - pe_blocks < min_blocks) pe_blocks = blocks;
  return {pe_blocks * bt, (blocks - pe_blocks) * bt};
}

}  // namespace dualpath::sched
