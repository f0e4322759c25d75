#include "engine/request_fields.h"

#include <fmt/format.h>

namespace dualpath::engine {

Json HopBytes::to_json() const {
  return Json{{"storage_read", storage_read}, {"pe_h2d", pe_h2d}, {"de_to_pe", de_to_pe},
              {"pd_transfer", pd_transfer},   {"de_h2d", de_h2d}, {"persist", persist}};
}

HopBytes HopBytes::from_json(const Json& j) {
  HopBytes b;
  b.storage_read = j.value("storage_read", int64_t{0});
  b.pe_h2d = j.value("pe_h2d", int64_t{0});
  b.de_to_pe = j.value("de_to_pe", int64_t{0});
  b.pd_transfer = j.value("pd_transfer", int64_t{0});
  b.de_h2d = j.value("de_h2d", int64_t{0});
  b.persist = j.value("persist", int64_t{0});
  return b;
}

HopBytes& HopBytes::operator+=(const HopBytes& o) {
  storage_read += o.storage_read;
  pe_h2d += o.pe_h2d;
  de_to_pe += o.de_to_pe;
  pd_transfer += o.pd_transfer;
  de_h2d += o.de_h2d;
  persist += o.persist;
  return *this;
}

namespace {
Result<std::vector<int32_t>> tokens_of(const Json& j) {
  if (!j.contains("tokens") || !j["tokens"].is_array()) {
    return Status::invalid_argument("request without a \"tokens\" array");
  }
  return j["tokens"].get<std::vector<int32_t>>();
}
}  // namespace

Json PrefillRequest::to_json() const {
  return Json{{"request_id", request_id}, {"tokens", tokens},
              {"hit_tokens", hit_tokens}, {"path", sched::read_path_name(path)},
              {"de_index", de_index},     {"de_dram_offset", de_dram_offset},
              {"pe_engine", pe_engine}};
}

Result<PrefillRequest> PrefillRequest::from_json(const Json& j) {
  PrefillRequest r;
  r.request_id = j.value("request_id", uint64_t{0});
  DP_ASSIGN_OR_RETURN(r.tokens, tokens_of(j));
  r.hit_tokens = j.value("hit_tokens", int64_t{0});
  DP_ASSIGN_OR_RETURN(r.path, sched::parse_read_path(j.value("path", std::string())));
  r.de_index = j.value("de_index", 0);
  r.de_dram_offset = j.value("de_dram_offset", uint64_t{0});
  r.pe_engine = j.value("pe_engine", 0);
  return r;
}

Json PrepareRequest::to_json() const {
  return Json{{"request_id", request_id},
              {"tokens", tokens},
              {"hit_tokens", hit_tokens},
              {"gen_tokens", gen_tokens},
              {"read_hits", read_hits},
              {"oracle", oracle},
              {"engine", engine}};
}

Result<PrepareRequest> PrepareRequest::from_json(const Json& j) {
  PrepareRequest r;
  r.request_id = j.value("request_id", uint64_t{0});
  DP_ASSIGN_OR_RETURN(r.tokens, tokens_of(j));
  r.hit_tokens = j.value("hit_tokens", int64_t{0});
  r.gen_tokens = j.value("gen_tokens", int64_t{0});
  r.read_hits = j.value("read_hits", false);
  r.oracle = j.value("oracle", false);
  r.engine = j.value("engine", 0);
  return r;
}

}  // namespace dualpath::engine
