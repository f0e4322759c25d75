#pragma once
// The values the engines take and give (plain structs: no wire format here, DESIGN.md
// `engine/`): a node's role and id, the bytes a turn moves per hop, the prefill and decode
// engines' requests and replies, a node's load report and its hello to its peers. The control
// plane (control/convert.h) builds them from its typed messages and checks their ranges there.
//
// Value types; thread-compatible.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compute/sampling.h"
#include "dualpath/result.h"
#include "sched/read_path.h"

namespace dualpath::engine {

enum class NodeRole { kPrefill, kDecode };
std::string_view role_name(NodeRole role);
Result<NodeRole> parse_role(std::string_view name);

struct NodeId {
  NodeRole role = NodeRole::kPrefill;
  int index = 0;
  std::string name() const;  // "prefill node 0"
  bool operator==(const NodeId&) const = default;
};

// Bytes per hop of one turn (PAPER.md §4's hops; §6's accounting).
struct HopBytes {
  int64_t storage_read = 0;  // storage -> PE buffer or DE buffer (Full Blocks)
  int64_t pe_h2d = 0;        // PE buffer -> PE HBM (PE path)
  int64_t de_to_pe = 0;      // DE buffer -> PE HBM (DE path)
  int64_t pd_transfer = 0;   // PE HBM -> DE buffer (hit + miss KV on the PE path, miss on DE)
  int64_t de_h2d = 0;        // DE buffer -> DE HBM at decode start (the prompt's KV)
  int64_t persist = 0;       // DE HBM -> DE buffer -> storage (new full blocks)
  int64_t de_dram = 0;       // DE DRAM tier -> DE buffer (issue 35: a session's KV kept from
                             // its last turn; no storage read)

  HopBytes& operator+=(const HopBytes& o);
};

// The largest token id the wire carries; each engine checks its model's vocabulary too.
inline constexpr int64_t kMaxTokenId = (int64_t{1} << 31) - 1;
// The most tokens one message carries (a 1M-token context with room to spare).
inline constexpr size_t kMaxWireTokens = size_t{1} << 22;

// DE "prepare": allocate the request's DE buffer (prompt + generation, whole blocks) and, with
// read_hits, read the hit blocks from read_from_tokens on into it (the DE read path: all of
// them; a split read: those after the PE side's part).
// A cache namespace travels as text (serve's HTTP layer sends a 64-digit hex digest); longer is a
// malformed message.
inline constexpr size_t kMaxCacheNamespaceBytes = 256;

struct PrepareRequest {
  uint64_t request_id = 0;  // unique per attempt: a retried turn gets a new id (its epoch)
  std::vector<int32_t> tokens;
  int64_t hit_tokens = 0;
  int64_t gen_tokens = 0;
  bool read_hits = false;
  bool oracle = false;  // kOracle: no DE buffer, no DE H2D, no persistence
  int engine = 0;       // the engine of the DE node that decodes
  compute::SamplingParams sampling;  // how the decode picks its tokens (greedy by default)
  // With read_hits: the DE reads the hit from here (whole blocks, below hit_tokens); a split
  // read's PE side reads those before.
  int64_t read_from_tokens = 0;
  // The DE DRAM tier (issue 35): the hit's leading tokens (whole blocks) this node serves from
  // its tier (store/dram_tier.h) and pushes to the PE with the rest of its part. A block the tier
  // no longer holds is read from storage instead (dram_missed_bytes).
  int64_t dram_tokens = 0;
  // The block key chain's namespace (store/block_key.h chain_start): the hit's keys and the keys
  // the decode persists under. Empty: the default chain. At most kMaxCacheNamespaceBytes.
  std::string cache_namespace;
};

struct PrepareReply {
  uint64_t dram_offset = 0;  // the request's Full Blocks in the DE node's buffer
  HopBytes bytes;  // bytes.de_dram: what the tier served; bytes.storage_read includes its misses
};

// PE "prefill".
struct PrefillRequest {
  uint64_t request_id = 0;
  std::vector<int32_t> tokens;  // the whole prompt
  int64_t hit_tokens = 0;       // whole blocks, cached in the store
  sched::ReadPath path = sched::ReadPath::kPe;
  int de_index = 0;             // the DE node that will decode (and, on the DE path, reads)
  uint64_t de_dram_offset = 0;  // the request's Full Blocks in that DE node's buffer
  int pe_engine = 0;            // the engine of the PE node that prefills
  compute::SamplingParams sampling;  // how the first token is picked (greedy by default)
  // kSplit: the PE side reads the leading pe_read_tokens of the hit (whole blocks, 0 < it <
  // hit_tokens), and the DE node pushes the rest it read. Other paths: unused.
  int64_t pe_read_tokens = 0;
  // kSplit: where the PE side's part begins (whole blocks): after the DE DRAM tier's leading part
  // (issue 35), else 0. The DE node pushes every hit block outside the PE side's part.
  int64_t pe_read_from_tokens = 0;
  std::string cache_namespace;  // as PrepareRequest's: the chain the hit is read from
};

struct PrefillReply {
  int32_t first_token = 0;
  std::vector<float> logits;  // the first output token's; empty for the modeled backend
  HopBytes bytes;
  double prefill_s = 0;
  double gpu_wait_s = 0;
  std::vector<std::pair<double, double>> layer_timeline;  // per layer: (load wait, compute), s
};

// DE "decode": decode start (DE buffer -> DE HBM), greedy decoding, persistence. The tokens
// stream to the scheduler while it runs.
struct DecodeRequest {
  uint64_t request_id = 0;
  int32_t first_token = 0;
};

struct DecodeReply {
  std::vector<int32_t> output_tokens;  // the first token included
  HopBytes bytes;
  double decode_s = 0;
  double tpot_s = 0;
  // Blocks the decode could not persist (no staging room, a failed write: a full disk): the
  // cache is the poorer, the turn's output is unaffected.
  int64_t persist_skipped_blocks = 0;
};

// A node's load, every report interval: the scheduler's snapshot of it (and its lease renewal).
struct LoadReport {
  int64_t read_queue_tokens = 0;  // the storage NIC's read queue (tokens waiting or in flight)
  int64_t read_queue_bytes = 0;
  uint64_t dram_used_bytes = 0;  // the PE / DE buffer in use
  uint64_t dram_bytes = 0;
  std::vector<uint64_t> hbm_used_bytes;  // per engine
  int64_t requests = 0;                  // requests the node holds state for (prepared, running)
  uint64_t dram_tier_bytes = 0;          // a decode node's DRAM tier in use (issue 35)

  bool operator==(const LoadReport&) const = default;
};

// What a node's peers need to move KV to and from it: its UCX worker address and its memory
// regions (the DRAM buffer pool, each engine's HBM arena) as transport descriptors.
struct NodeHello {
  NodeRole role = NodeRole::kPrefill;
  int index = 0;
  std::vector<std::byte> address;
  std::vector<std::byte> dram;
  std::vector<std::vector<std::byte>> hbm;  // per engine
  uint64_t epoch = 0;  // the scheduler's count of its registrations (control.proto Hello.epoch)
};

}  // namespace dualpath::engine
