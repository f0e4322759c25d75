#include "engine/node_protocol.h"

#include <fmt/format.h>

#include <limits>

#include "engine/wire.h"

namespace dualpath::engine {

namespace {

constexpr int64_t kMaxIndex = 1 << 20;  // nodes and engines per role, far beyond any cluster
constexpr int64_t kMaxTokens = int64_t{1} << 40;

std::vector<int32_t> read_tokens(WireReader& r, std::string_view key) {
  std::vector<int32_t> t = r.int32_list(key, 0, kMaxTokenId);
  if (t.size() > kMaxWireTokens) {
    r.fail(key, fmt::format("holds {} tokens, more than the {} a message may carry", t.size(),
                            kMaxWireTokens));
  }
  return t;
}

HopBytes read_bytes(WireReader& r, std::string_view key) {
  if (!r.has(key)) return {};
  auto b = HopBytes::from_json(r.object(key));
  if (!b.is_ok()) {
    r.fail(key, b.status().message());
    return {};
  }
  return *b;
}

}  // namespace

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

Json HopBytes::to_json() const {
  return Json{{"storage_read", storage_read}, {"pe_h2d", pe_h2d}, {"de_to_pe", de_to_pe},
              {"pd_transfer", pd_transfer},   {"de_h2d", de_h2d}, {"persist", persist}};
}

Result<HopBytes> HopBytes::from_json(const Json& j) {
  WireReader r(j, "bytes");
  HopBytes b;
  b.storage_read = r.i64_or("storage_read", 0, 0);
  b.pe_h2d = r.i64_or("pe_h2d", 0, 0);
  b.de_to_pe = r.i64_or("de_to_pe", 0, 0);
  b.pd_transfer = r.i64_or("pd_transfer", 0, 0);
  b.de_h2d = r.i64_or("de_h2d", 0, 0);
  b.persist = r.i64_or("persist", 0, 0);
  DP_RETURN_IF_ERROR(r.status());
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

// A request's sampling travels only when it is not greedy (the fields are absent otherwise).
void put_sampling(Json& j, const compute::SamplingParams& s) {
  if (s.greedy()) return;
  j["sampling"] = Json{
      {"temperature", s.temperature}, {"top_p", s.top_p}, {"top_k", s.top_k}, {"seed", s.seed}};
}

compute::SamplingParams read_sampling(const Json& j) {
  compute::SamplingParams s;
  auto it = j.find("sampling");
  if (it == j.end() || !it->is_object()) return s;
  WireReader r(*it, "sampling");
  s.temperature = r.number_or("temperature", 0, 0, 100);
  s.top_p = r.number_or("top_p", 1, 1e-9, 1);
  s.top_k = static_cast<int>(r.i64_or("top_k", 0, 0, 1 << 30));
  s.seed = r.u64_or("seed", 0);
  if (!r.status().is_ok()) return compute::SamplingParams{};
  return s;
}

namespace {

// Absent: the default namespace (messages from before namespaces existed read as before).
std::string read_cache_namespace(WireReader& r) {
  std::string ns = r.str_or("cache_namespace", "");
  if (ns.size() > kMaxCacheNamespaceBytes) {
    r.fail("cache_namespace",
           fmt::format("is {} bytes, more than {}", ns.size(), kMaxCacheNamespaceBytes));
    return {};
  }
  return ns;
}

}  // namespace

Json PrepareRequest::to_json() const {
  Json j{{"request_id", request_id}, {"tokens", tokens},       {"hit_tokens", hit_tokens},
         {"gen_tokens", gen_tokens}, {"read_hits", read_hits}, {"oracle", oracle},
         {"engine", engine}};
  if (read_from_tokens != 0) j["read_from_tokens"] = read_from_tokens;
  if (!cache_namespace.empty()) j["cache_namespace"] = cache_namespace;
  put_sampling(j, sampling);
  return j;
}

Result<PrepareRequest> PrepareRequest::from_json(const Json& j) {
  WireReader r(j, "prepare request");
  PrepareRequest p;
  p.request_id = r.u64("request_id");
  p.tokens = read_tokens(r, "tokens");
  p.hit_tokens = r.i64("hit_tokens", 0, kMaxTokens);
  p.gen_tokens = r.i64("gen_tokens", 1, kMaxTokens);
  p.read_hits = r.boolean_or("read_hits", false);
  p.read_from_tokens = r.i64_or("read_from_tokens", 0, 0, kMaxTokens);
  p.oracle = r.boolean_or("oracle", false);
  p.engine = static_cast<int>(r.i64_or("engine", 0, 0, kMaxIndex));
  p.cache_namespace = read_cache_namespace(r);
  DP_RETURN_IF_ERROR(r.status());
  p.sampling = read_sampling(j);
  return p;
}

Json PrepareReply::to_json() const {
  return Json{{"dram_offset", dram_offset}, {"bytes", bytes.to_json()}};
}

Result<PrepareReply> PrepareReply::from_json(const Json& j) {
  WireReader r(j, "prepare reply");
  PrepareReply p;
  p.dram_offset = r.u64("dram_offset");
  p.bytes = read_bytes(r, "bytes");
  DP_RETURN_IF_ERROR(r.status());
  return p;
}

Json PrefillRequest::to_json() const {
  Json j{{"request_id", request_id}, {"tokens", tokens},
         {"hit_tokens", hit_tokens}, {"path", sched::read_path_name(path)},
         {"de_index", de_index},     {"de_dram_offset", de_dram_offset},
         {"pe_engine", pe_engine}};
  if (path == sched::ReadPath::kSplit) j["pe_read_tokens"] = pe_read_tokens;
  if (!cache_namespace.empty()) j["cache_namespace"] = cache_namespace;
  put_sampling(j, sampling);
  return j;
}

Result<PrefillRequest> PrefillRequest::from_json(const Json& j) {
  WireReader r(j, "prefill request");
  PrefillRequest p;
  p.request_id = r.u64("request_id");
  p.tokens = read_tokens(r, "tokens");
  p.hit_tokens = r.i64("hit_tokens", 0, kMaxTokens);
  auto path = sched::parse_read_path(r.str("path"));
  if (r.status().is_ok() && !path.is_ok()) r.fail("path", path.status().message());
  p.pe_read_tokens = r.i64_or("pe_read_tokens", 0, 0, kMaxTokens);
  p.de_index = static_cast<int>(r.i64("de_index", 0, kMaxIndex));
  p.de_dram_offset = r.u64_or("de_dram_offset", 0);
  p.pe_engine = static_cast<int>(r.i64_or("pe_engine", 0, 0, kMaxIndex));
  p.cache_namespace = read_cache_namespace(r);
  DP_RETURN_IF_ERROR(r.status());
  p.path = *path;
  p.sampling = read_sampling(j);
  return p;
}

Json PrefillReply::to_json() const {
  Json timeline = Json::array();
  for (const auto& [load, compute] : layer_timeline) timeline.push_back({load, compute});
  return Json{{"first_token", first_token}, {"logits", logits},
              {"bytes", bytes.to_json()},   {"prefill_s", prefill_s},
              {"gpu_wait_s", gpu_wait_s},   {"layer_timeline", timeline}};
}

Result<PrefillReply> PrefillReply::from_json(const Json& j) {
  WireReader r(j, "prefill reply");
  PrefillReply p;
  p.first_token = static_cast<int32_t>(r.i64("first_token", 0, kMaxTokenId));
  p.logits = r.has("logits") ? r.float_list("logits") : std::vector<float>{};
  p.bytes = read_bytes(r, "bytes");
  p.prefill_s = r.number_or("prefill_s", 0, 0);
  p.gpu_wait_s = r.number_or("gpu_wait_s", 0, 0);
  if (r.has("layer_timeline")) {
    for (const Json& layer : r.array("layer_timeline")) {
      if (!layer.is_array() || layer.size() != 2 || !layer[0].is_number() ||
          !layer[1].is_number()) {
        r.fail("layer_timeline", "must hold [load_wait_s, compute_s] pairs");
        break;
      }
      p.layer_timeline.emplace_back(layer[0].get<double>(), layer[1].get<double>());
    }
  }
  DP_RETURN_IF_ERROR(r.status());
  return p;
}

Json DecodeRequest::to_json() const {
  return Json{{"request_id", request_id}, {"first_token", first_token}};
}

Result<DecodeRequest> DecodeRequest::from_json(const Json& j) {
  WireReader r(j, "decode request");
  DecodeRequest d;
  d.request_id = r.u64("request_id");
  d.first_token = static_cast<int32_t>(r.i64("first_token", 0, kMaxTokenId));
  DP_RETURN_IF_ERROR(r.status());
  return d;
}

Json DecodeReply::to_json() const {
  return Json{{"output_tokens", output_tokens},
              {"bytes", bytes.to_json()},
              {"decode_s", decode_s},
              {"tpot_s", tpot_s},
              {"persist_skipped_blocks", persist_skipped_blocks}};
}

Result<DecodeReply> DecodeReply::from_json(const Json& j) {
  WireReader r(j, "decode reply");
  DecodeReply d;
  d.output_tokens = read_tokens(r, "output_tokens");
  d.bytes = read_bytes(r, "bytes");
  d.decode_s = r.number_or("decode_s", 0, 0);
  d.tpot_s = r.number_or("tpot_s", 0, 0);
  d.persist_skipped_blocks = r.i64_or("persist_skipped_blocks", 0, 0);
  DP_RETURN_IF_ERROR(r.status());
  return d;
}

Json LoadReport::to_json() const {
  return Json{{"read_queue_tokens", read_queue_tokens}, {"read_queue_bytes", read_queue_bytes},
              {"dram_used_bytes", dram_used_bytes},     {"dram_bytes", dram_bytes},
              {"hbm_used_bytes", hbm_used_bytes},       {"requests", requests}};
}

Result<LoadReport> LoadReport::from_json(const Json& j) {
  WireReader r(j, "load report");
  LoadReport l;
  l.read_queue_tokens = r.i64("read_queue_tokens", 0);
  l.read_queue_bytes = r.i64_or("read_queue_bytes", 0, 0);
  l.dram_used_bytes = r.u64_or("dram_used_bytes", 0);
  l.dram_bytes = r.u64_or("dram_bytes", 0);
  if (r.has("hbm_used_bytes")) {
    for (const Json& v : r.array("hbm_used_bytes")) {
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
        r.fail("hbm_used_bytes", "must hold byte counts");
        break;
      }
      l.hbm_used_bytes.push_back(v.get<uint64_t>());
    }
  }
  l.requests = r.i64_or("requests", 0, 0);
  DP_RETURN_IF_ERROR(r.status());
  return l;
}

Json TokenEvent::to_json() const {
  return Json{{"request_id", request_id}, {"start", start}, {"tokens", tokens}};
}

Result<TokenEvent> TokenEvent::from_json(const Json& j) {
  WireReader r(j, "token event");
  TokenEvent e;
  e.request_id = r.u64("request_id");
  e.start = r.i64("start", 0, kMaxTokens);
  e.tokens = read_tokens(r, "tokens");
  DP_RETURN_IF_ERROR(r.status());
  return e;
}

Json RegisterRequest::to_json() const {
  return Json{{"role", role_name(role)},
              {"index", index},
              {"protocol", protocol},
              {"host", host},
              {"pid", pid},
              {"resume", resume}};
}

Result<RegisterRequest> RegisterRequest::from_json(const Json& j) {
  WireReader r(j, "register request");
  RegisterRequest q;
  auto role = parse_role(r.str("role"));
  if (r.status().is_ok() && !role.is_ok()) r.fail("role", role.status().message());
  q.index = static_cast<int>(r.i64_or("index", -1, -1, kMaxIndex));
  q.protocol = static_cast<int>(r.i64("protocol", 0, 1 << 20));
  q.host = r.str_or("host", "");
  q.pid = r.i64_or("pid", 0, 0);
  q.resume = r.boolean_or("resume", false);
  DP_RETURN_IF_ERROR(r.status());
  q.role = *role;
  return q;
}

}  // namespace dualpath::engine
