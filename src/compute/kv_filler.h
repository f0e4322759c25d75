#pragma once
// Deterministic stand-in KV bytes for the modeled backend: a token's row in a layer is a function
// of (seed, token id, position, layer) only, so a prefix's KV is the same bytes whether it was
// computed in this pass, an earlier chunk, or an earlier turn and loaded from storage. Transfers
// and the store then carry real, checkable bytes.

#include <cstddef>
#include <cstdint>
#include <span>

namespace dualpath::compute {

// Fills `row` (one token's KV in one layer, any length) with the filler of (seed, token,
// position, layer).
void fill_kv_row(
    std::span<std::byte> row, uint64_t seed, int32_t token, int64_t position, int layer);

// A 64-bit digest of one KV row; rows are folded in order into a sequence's digest.
uint64_t kv_row_digest(std::span<const std::byte> row);

}  // namespace dualpath::compute
