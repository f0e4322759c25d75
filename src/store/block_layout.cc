#include "store/block_layout.h"

#include <fmt/format.h>

namespace dualpath::store {

// A Full Block is read into one buffer; 4 GiB keeps sizes far from any 32-bit iovec or
// io_uring length limit (the largest in PAPER.md §4 is Qwen 32B's 16 MiB).
static constexpr int64_t kMaxFullBlockBytes = int64_t{4} << 30;

Status BlockLayout::validate() const {
  if (layers <= 0 || block_tokens <= 0 || bytes_per_token_per_layer <= 0) {
    return Status::invalid_argument(fmt::format(
        "block layout layers={} block_tokens={} bytes_per_token_per_layer={} has a non-positive "
        "field; take all three from the model spec (block_tokens is 64 by default)",
        layers, block_tokens, bytes_per_token_per_layer));
  }
  if (layers > kMaxFullBlockBytes / block_tokens / bytes_per_token_per_layer) {
    return Status::invalid_argument(fmt::format(
        "block layout layers={} block_tokens={} bytes_per_token_per_layer={} makes a Full Block "
        "larger than 4 GiB; use fewer tokens per block",
        layers, block_tokens, bytes_per_token_per_layer));
  }
  return Status::ok();
}

}  // namespace dualpath::store
