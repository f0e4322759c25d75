#include "sched/path_choice.h"

namespace dualpath::sched {

ReadPath choose_read_path(int64_t pe_node_read_q_tokens, int64_t de_node_read_q_tokens) {
  return de_node_read_q_tokens <= pe_node_read_q_tokens ? ReadPath::kDe : ReadPath::kPe;
}

}  // namespace dualpath::sched
