#pragma once
// The fields of the driver's per-turn requests to the nodes, and the bytes each hop moved
// (PAPER.md §4's hops; §6's accounting). Value types; thread-compatible.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/control_channel.h"
#include "sched/read_path.h"

namespace dualpath::engine {

// The read path of a turn: sched::ReadPath (sched/read_path.h).

// Bytes per hop of one turn.
struct HopBytes {
  int64_t storage_read = 0;  // storage -> PE buffer or DE buffer (Full Blocks)
  int64_t pe_h2d = 0;        // PE buffer -> PE HBM (PE path)
  int64_t de_to_pe = 0;      // DE buffer -> PE HBM (DE path)
  int64_t pd_transfer = 0;   // PE HBM -> DE buffer (hit + miss KV on the PE path, miss on DE)
  int64_t de_h2d = 0;        // DE buffer -> DE HBM at decode start (the prompt's KV)
  int64_t persist = 0;       // DE HBM -> DE buffer -> storage (new full blocks)

  Json to_json() const;
  static HopBytes from_json(const Json& j);
  HopBytes& operator+=(const HopBytes& o);
};

// Driver -> PE "prefill".
struct PrefillRequest {
  uint64_t request_id = 0;
  std::vector<int32_t> tokens;  // the whole prompt
  int64_t hit_tokens = 0;       // whole blocks, cached in the store
  sched::ReadPath path = sched::ReadPath::kPe;
  int de_index = 0;             // the DE node that will decode (and, on the DE path, reads)
  uint64_t de_dram_offset = 0;  // the request's Full Blocks in that DE node's buffer
  int pe_engine = 0;            // the engine of the PE node that prefills

  Json to_json() const;
  static Result<PrefillRequest> from_json(const Json& j);
};

// Driver -> DE "prepare": allocate the request's DE buffer (prompt + generation, whole blocks)
// and, with read_hits, read the hit blocks into it (the DE read path).
struct PrepareRequest {
  uint64_t request_id = 0;
  std::vector<int32_t> tokens;
  int64_t hit_tokens = 0;
  int64_t gen_tokens = 0;
  bool read_hits = false;
  bool oracle = false;  // kOracle: no DE buffer, no DE H2D, no persistence
  int engine = 0;       // the engine of the DE node that decodes

  Json to_json() const;
  static Result<PrepareRequest> from_json(const Json& j);
};

}  // namespace dualpath::engine
