#pragma once
// A turn's bytes per hop (engine::HopBytes) as the benchmarks' JSON reports write them.

#include <nlohmann/json.hpp>

#include "engine/engine_types.h"

namespace dualpath::bench {

inline nlohmann::json hop_bytes_json(const engine::HopBytes& b) {
  return nlohmann::json{{"storage_read", b.storage_read}, {"pe_h2d", b.pe_h2d},
                        {"de_to_pe", b.de_to_pe},         {"pd_transfer", b.pd_transfer},
                        {"de_h2d", b.de_h2d},             {"persist", b.persist}};
}

}  // namespace dualpath::bench
