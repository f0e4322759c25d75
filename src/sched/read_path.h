#pragma once
// How a request's hit KV reaches its prefill engine (PAPER.md §4) — the one enum the simulator,
// the scheduler, the engines and the CLI share — and how a scheduler picks it.

#include <optional>
#include <string_view>

#include "dualpath/result.h"

namespace dualpath::sched {

enum class ReadPath {
  kPe,         // the PE node's storage NIC reads the hit KV into the PE buffer
  kDe,         // the DE node's storage NIC reads it into the DE buffer; pushed to the PE per layer
  kRecompute,  // nothing is read: every prompt token is recomputed
  kOracle,     // the KV is taken to be in HBM already: no read, no H2D, no PD transfer (a bound)
  // Both sides read parts of the hit KV (PAPER.md §11's split reads; ours): the leading hit
  // blocks by the PE node's storage NIC into the PE buffer, the rest by the DE node's into the
  // DE buffer, pushed to the PE per layer. Every hit block is still read once (ReadSplit).
  kSplit,
};

// "pe", "de", "recompute", "oracle", "split".
std::string_view read_path_name(ReadPath path);
// The inverse; an unknown name is kInvalidArgument listing the valid ones.
Result<ReadPath> parse_read_path(std::string_view name);

// A requested path: one of the above, or "auto" (nullopt): the scheduler's choice.
using PathRequest = std::optional<ReadPath>;
std::string_view path_request_name(const PathRequest& request);
// "auto" or a read path name.
Result<PathRequest> parse_path_request(std::string_view name);

// How a scheduler chooses the read path of a request whose path is its to choose
// (the path half of the simulator's modes, sim/sim_config.h).
enum class PathPolicy {
  kPeOnly,         // Basic, Layerwise: the PE side always
  kAlternate,      // the ablation's "dual path, round robin": sides in turn
  kShortestQueue,  // DualPath (PAPER.md §8.3): the side whose node's read queue is shorter
  kNoIo,           // Oracle: no reads at all
  kSplit,          // DualPath + split reads: the hit blocks shared by both sides (split_read)
};

}  // namespace dualpath::sched
