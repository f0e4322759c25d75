#pragma once
// Full Block / Layer Block layout (PAPER.md §4 "Block layouts").
//
// A Full Block is [layer][token][bytes]: n_layer Layer Blocks back to back, so a Layer Block is a
// contiguous slice of its Full Block and is handed out as a std::span view, never copied. The
// store takes the three numbers from whoever knows the model (model/ModelSpec); it never depends
// on a model module.

#include <cstddef>
#include <cstdint>
#include <span>

#include "dualpath/status.h"

namespace dualpath::store {

// The paper's only block size ("e.g., 64 tokens", §4 Persistence).
inline constexpr int64_t kDefaultBlockTokens = 64;

struct BlockLayout {
  int64_t layers = 0;
  int64_t block_tokens = kDefaultBlockTokens;
  int64_t bytes_per_token_per_layer = 0;

  // OK when every field is positive and a Full Block fits comfortably in memory (< 4 GiB).
  Status validate() const;

  constexpr int64_t layer_block_bytes() const { return block_tokens * bytes_per_token_per_layer; }
  constexpr int64_t full_block_bytes() const { return layers * layer_block_bytes(); }

  friend bool operator==(const BlockLayout&, const BlockLayout&) = default;
};

// A view of one Full Block's bytes; T is std::byte or const std::byte. Does not own the memory.
// Thread-compatible (a plain span).
template <typename T>
class FullBlockView {
 public:
  // `bytes` must hold exactly layout.full_block_bytes() bytes.
  FullBlockView(const BlockLayout& layout, std::span<T> bytes) : layout_(layout), bytes_(bytes) {}

  std::span<T> bytes() const { return bytes_; }
  // Layer Block `layer` ([token][bytes]); a view into the Full Block, no copy.
  std::span<T> layer(int64_t layer) const {
    const auto n = static_cast<size_t>(layout_.layer_block_bytes());
    return bytes_.subspan(static_cast<size_t>(layer) * n, n);
  }
  // One token's bytes in one layer.
  std::span<T> token(int64_t layer_index, int64_t token_index) const {
    const auto n = static_cast<size_t>(layout_.bytes_per_token_per_layer);
    return layer(layer_index).subspan(static_cast<size_t>(token_index) * n, n);
  }
  int64_t layers() const { return layout_.layers; }

 private:
  BlockLayout layout_;
  std::span<T> bytes_;
};

using MutableFullBlock = FullBlockView<std::byte>;
using ConstFullBlock = FullBlockView<const std::byte>;

}  // namespace dualpath::store
