#pragma once
// For tests: a small node setup, node 0 of `role` with the tiny model on the CPU backend, its
// store in `dir`, `buffer_bytes` of DRAM buffer and of HBM arena, a 20 s deadline.

#include <chrono>
#include <cstdint>
#include <string>

#include "engine/engine_types.h"

namespace dualpath::engine {

inline NodeSetup test_node_setup(NodeRole role,
                                 const std::string& dir,
                                 uint64_t buffer_bytes = 16u << 20) {
  NodeSetup s;
  s.role = role;
  s.index = 0;
  s.backend.compute = "cpu";
  s.backend.model = "tiny";
  s.data_paths = {dir};
  s.dram_buffer_bytes = buffer_bytes;
  s.hbm_bytes = buffer_bytes;
  s.timeout = std::chrono::seconds(20);
  return s;
}

}  // namespace dualpath::engine
