#pragma once
// Test-only helpers: deterministic block contents and blocking wrappers around FileStore.

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "store/aligned_buffer.h"
#include "store/file_store.h"

namespace dualpath::store::testkit {

inline constexpr Duration kTestDeadline = std::chrono::seconds(20);

// Fills `bytes` with a pattern that depends on the key and the position (xorshift).
inline void fill_block(const BlockKey& key, std::span<std::byte> bytes) {
  uint64_t x = key.high ^ (key.low * 0x9e3779b97f4a7c15ULL) ^ 0x5bd1e995ULL;
  for (size_t i = 0; i < bytes.size(); i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(bytes.data() + i, &x, std::min<size_t>(8, bytes.size() - i));
  }
}

inline bool holds_block(const BlockKey& key, std::span<const std::byte> bytes) {
  AlignedBuffer expected = AlignedBuffer::allocate(bytes.size()).value();
  fill_block(key, expected.first(bytes.size()));
  return std::memcmp(expected.data(), bytes.data(), bytes.size()) == 0;
}

inline BlockKey test_key(uint64_t i) {
  return BlockKey{0x1234000000000000ULL + i * 0x0100000000000001ULL, i};
}

// Writes the blocks (contents from fill_block) and waits; returns the per-block outcomes.
inline std::vector<Status> write_blocks(FileStore& store, const std::vector<BlockKey>& keys) {
  const auto n = static_cast<size_t>(store.layout().full_block_bytes());
  std::vector<AlignedBuffer> payloads;
  std::vector<WriteRequest> reqs;
  for (const auto& k : keys) {
    payloads.push_back(AlignedBuffer::allocate(n).value());
    fill_block(k, payloads.back().first(n));
    reqs.push_back({k, payloads.back().first(n)});
  }
  auto batch = store.write(reqs);
  EXPECT_TRUE(batch.is_ok()) << batch.status().to_string();
  if (!batch.is_ok()) return {};
  Status waited = batch->wait_for(kTestDeadline);
  EXPECT_TRUE(waited.is_ok()) << waited.to_string();
  if (!waited.is_ok()) return {};
  return {batch->results().begin(), batch->results().end()};
}

// Reads one block; the Status and, when OK, whether the bytes are the expected ones.
struct ReadOutcome {
  Status status;
  bool bytes_match = false;
};
inline ReadOutcome read_block(FileStore& store, const BlockKey& key) {
  const auto n = static_cast<size_t>(store.layout().full_block_bytes());
  AlignedBuffer buf = AlignedBuffer::allocate(n).value();
  ReadRequest req{key, buf.first(n)};
  auto batch = store.read(std::span(&req, 1));
  if (!batch.is_ok()) return {batch.status(), false};
  Status waited = batch->wait_for(kTestDeadline);
  if (!waited.is_ok()) return {waited, false};
  ReadOutcome out{batch->results()[0], false};
  if (out.status.is_ok()) out.bytes_match = holds_block(key, buf.first(n));
  return out;
}

}  // namespace dualpath::store::testkit
