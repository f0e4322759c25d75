#include "engine/engine_types.h"

#include <fmt/format.h>

namespace dualpath::engine {

std::string_view role_name(NodeRole role) {
  return role == NodeRole::kPrefill ? "prefill" : "decode";
}

Result<NodeRole> parse_role(std::string_view name) {
  if (name == "prefill") return NodeRole::kPrefill;
  if (name == "decode") return NodeRole::kDecode;
  return Status::invalid_argument(
      fmt::format("--role '{}' is not a node role; use prefill or decode", name));
}

std::string NodeId::name() const { return fmt::format("{} node {}", role_name(role), index); }

HopBytes& HopBytes::operator+=(const HopBytes& o) {
  storage_read += o.storage_read;
  pe_h2d += o.pe_h2d;
  de_to_pe += o.de_to_pe;
  pd_transfer += o.pd_transfer;
  de_h2d += o.de_h2d;
  persist += o.persist;
  de_dram += o.de_dram;
  return *this;
}

}  // namespace dualpath::engine
