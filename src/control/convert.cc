#include "control/convert.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace dualpath::control {

namespace {

constexpr int64_t kMaxIndex = 1 << 20;  // nodes and engines per role, far beyond any cluster
constexpr int64_t kMaxTokens = int64_t{1} << 40;

Status bad(std::string_view message, std::string_view field, std::string_view why) {
  return Status::invalid_argument(fmt::format("{}: {} {}", message, field, why));
}

bool in_range(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }

bool finite_non_negative(double v) { return std::isfinite(v) && v >= 0; }

std::vector<std::byte> bytes_of(const std::string& s) {
  const auto* b = reinterpret_cast<const std::byte*>(s.data());
  return {b, b + s.size()};
}

std::string string_of(const std::vector<std::byte>& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

compute::SamplingParams sampling_of(const pb::Sampling& m) {
  compute::SamplingParams s;
  // Out-of-range values fall back to greedy defaults field by field: sampling never fails a turn.
  if (std::isfinite(m.temperature()) && m.temperature() >= 0 && m.temperature() <= 100)
    s.temperature = m.temperature();
  if (std::isfinite(m.top_p()) && m.top_p() > 0 && m.top_p() <= 1) s.top_p = m.top_p();
  if (m.top_k() >= 0) s.top_k = m.top_k();
  s.seed = m.seed();
  return s;
}

void put_sampling(pb::Sampling* m, const compute::SamplingParams& s) {
  m->set_temperature(s.temperature);
  m->set_top_p(s.top_p);
  m->set_top_k(s.top_k);
  m->set_seed(s.seed);
}

// The common checks of a turn spec: ids, counts and the plan's read-range shape.
struct CheckedTurn {
  std::vector<int32_t> tokens;
  sched::ReadPath path = sched::ReadPath::kPe;
};

Result<CheckedTurn> check_turn(const pb::TurnSpec& t, int64_t block_tokens, std::string_view what) {
  CheckedTurn c;
  DP_ASSIGN_OR_RETURN(c.tokens, tokens_from_proto(t.tokens(), fmt::format("{}.tokens", what)));
  DP_ASSIGN_OR_RETURN(c.path, from_proto(t.path()));
  const auto n = static_cast<int64_t>(c.tokens.size());
  if (n < 1) return bad(what, "tokens", "is empty: a turn has at least one prompt token");
  if (!in_range(t.gen_tokens(), 1, kMaxTokens))
    return bad(what, "gen_tokens", fmt::format("= {} is not in [1, 2^40]", t.gen_tokens()));
  const int64_t hit = t.hit_tokens();
  if (block_tokens < 1 || !in_range(hit, 0, n - 1) || hit % block_tokens != 0) {
    return bad(what, "hit_tokens",
               fmt::format("= {} must be whole blocks of {} below the prompt's {} tokens", hit,
                           block_tokens, n));
  }
  const int64_t pb_ = t.pe_read().begin_tokens(), pe_ = t.pe_read().end_tokens();
  const int64_t db = t.de_read().begin_tokens(), de = t.de_read().end_tokens();
  const int64_t mb = t.de_dram().begin_tokens(), me = t.de_dram().end_tokens();
  const bool pe_empty = pe_ <= pb_, de_empty = de <= db, dram_empty = me <= mb;
  // The plan's shape (sched::plan_turn): the DE's DRAM tier serves [0, m), the PE side reads
  // [m, x), the DE side [x, hit).
  const int64_t start = dram_empty ? 0 : me;
  bool shape = (dram_empty || (mb == 0 && me <= hit)) &&
               (pe_empty || (pb_ == start && pe_ <= hit)) &&
               (de_empty || (db >= start && de == hit)) && (pe_empty || de_empty || pe_ == db);
  for (int64_t v : {pb_, pe_, db, de, mb, me}) shape = shape && v >= 0 && v % block_tokens == 0;
  if (!shape) {
    return bad(what, "read ranges",
               fmt::format("de_dram [{}, {}), pe [{}, {}) and de [{}, {}) are not the plan's split "
                           "of a {}-token hit",
                           mb, me, pb_, pe_, db, de, hit));
  }
  if (t.no_io() && (!pe_empty || !de_empty || !dram_empty))
    return bad(what, "no_io", "comes with a storage read");
  // A loading plan covers its whole hit, part after part, with no gap (a block nobody loads
  // would leave its rows in the PE's HBM slot unwritten).
  if (!t.no_io() && c.path != sched::ReadPath::kRecompute) {
    int64_t covered = start;
    if (!pe_empty) covered = pe_;
    if (!de_empty) shape = shape && db == covered;
    if (!de_empty) covered = de;
    if (!shape || covered != hit) {
      return bad(what, "read ranges",
                 fmt::format("de_dram [{}, {}), pe [{}, {}) and de [{}, {}) leave a gap in the "
                             "{}-token hit",
                             mb, me, pb_, pe_, db, de, hit));
    }
  }
  if (!dram_empty && c.path != sched::ReadPath::kDe && c.path != sched::ReadPath::kSplit)
    return bad(what, "de_dram", "comes with a path on which the DE node pushes nothing");
  if (t.cache_namespace().size() > engine::kMaxCacheNamespaceBytes) {
    return bad(what, "cache_namespace",
               fmt::format("is longer than {} bytes", engine::kMaxCacheNamespaceBytes));
  }
  return c;
}

}  // namespace

pb::Role to_proto(engine::NodeRole role) {
  return role == engine::NodeRole::kPrefill ? pb::ROLE_PREFILL : pb::ROLE_DECODE;
}

Result<engine::NodeRole> from_proto(pb::Role role) {
  if (role == pb::ROLE_PREFILL) return engine::NodeRole::kPrefill;
  if (role == pb::ROLE_DECODE) return engine::NodeRole::kDecode;
  return Status::invalid_argument(fmt::format("role {} is neither prefill nor decode",
                                              static_cast<int>(role)));
}

pb::ReadPath to_proto(sched::ReadPath path) {
  switch (path) {
    case sched::ReadPath::kPe:
      return pb::READ_PATH_PE;
    case sched::ReadPath::kDe:
      return pb::READ_PATH_DE;
    case sched::ReadPath::kRecompute:
      return pb::READ_PATH_RECOMPUTE;
    case sched::ReadPath::kOracle:
      return pb::READ_PATH_ORACLE;
    case sched::ReadPath::kSplit:
      return pb::READ_PATH_SPLIT;
  }
  return pb::READ_PATH_PE;
}

Result<sched::ReadPath> from_proto(pb::ReadPath path) {
  switch (path) {
    case pb::READ_PATH_PE:
      return sched::ReadPath::kPe;
    case pb::READ_PATH_DE:
      return sched::ReadPath::kDe;
    case pb::READ_PATH_RECOMPUTE:
      return sched::ReadPath::kRecompute;
    case pb::READ_PATH_ORACLE:
      return sched::ReadPath::kOracle;
    case pb::READ_PATH_SPLIT:
      return sched::ReadPath::kSplit;
    default:
      break;
  }
  return Status::invalid_argument(fmt::format("read path {} is unknown", static_cast<int>(path)));
}

Result<std::vector<int32_t>> tokens_from_proto(const google::protobuf::RepeatedField<int32_t>& t,
                                               std::string_view field) {
  if (static_cast<size_t>(t.size()) > engine::kMaxWireTokens) {
    return Status::invalid_argument(fmt::format(
        "{} holds {} tokens, more than the {} a message may carry", field, t.size(),
        engine::kMaxWireTokens));
  }
  for (int32_t v : t) {
    if (v < 0) {
      return Status::invalid_argument(fmt::format("{} holds token id {}, below 0", field, v));
    }
  }
  return std::vector<int32_t>(t.begin(), t.end());
}

pb::TurnSpec turn_spec(const sched::TurnPlan& plan,
                       uint64_t request_id,
                       std::span<const int32_t> tokens,
                       const compute::SamplingParams& sampling,
                       const std::string& cache_namespace) {
  pb::TurnSpec t;
  t.set_request_id(request_id);
  t.mutable_tokens()->Add(tokens.begin(), tokens.end());
  t.set_gen_tokens(plan.gen_tokens);
  t.set_hit_tokens(plan.hit_tokens);
  t.set_path(to_proto(plan.path));
  t.mutable_pe_read()->set_begin_tokens(plan.pe_read.begin_tokens);
  t.mutable_pe_read()->set_end_tokens(plan.pe_read.end_tokens);
  t.mutable_de_read()->set_begin_tokens(plan.de_read.begin_tokens);
  t.mutable_de_read()->set_end_tokens(plan.de_read.end_tokens);
  if (!plan.de_dram.empty()) {
    t.mutable_de_dram()->set_begin_tokens(plan.de_dram.begin_tokens);
    t.mutable_de_dram()->set_end_tokens(plan.de_dram.end_tokens);
  }
  t.set_de_pushes_layers(plan.de_pushes_layers);
  t.set_no_io(plan.no_io);
  put_sampling(t.mutable_sampling(), sampling);
  t.set_cache_namespace(cache_namespace);
  return t;
}

Result<engine::PrepareRequest> prepare_request(const pb::PrepareRequest& m, int64_t block_tokens) {
  const pb::TurnSpec& t = m.turn();
  DP_ASSIGN_OR_RETURN(CheckedTurn c, check_turn(t, block_tokens, "prepare"));
  if (!in_range(m.engine(), 0, kMaxIndex)) return bad("prepare", "engine", "is out of range");
  engine::PrepareRequest r;
  r.request_id = t.request_id();
  r.tokens = std::move(c.tokens);
  r.hit_tokens = t.hit_tokens();
  r.gen_tokens = t.gen_tokens();
  r.read_hits = t.de_read().end_tokens() > t.de_read().begin_tokens();
  r.read_from_tokens = r.read_hits ? t.de_read().begin_tokens() : 0;
  const bool dram = t.de_dram().end_tokens() > t.de_dram().begin_tokens();
  r.dram_tokens = dram ? t.de_dram().end_tokens() : 0;
  r.oracle = t.no_io();
  r.engine = m.engine();
  r.sampling = sampling_of(t.sampling());
  r.cache_namespace = t.cache_namespace();
  return r;
}

Result<engine::PrefillRequest> prefill_request(const pb::PrefillRequest& m, int64_t block_tokens) {
  const pb::TurnSpec& t = m.turn();
  DP_ASSIGN_OR_RETURN(CheckedTurn c, check_turn(t, block_tokens, "prefill"));
  if (!in_range(m.engine(), 0, kMaxIndex)) return bad("prefill", "engine", "is out of range");
  if (!in_range(m.de_index(), 0, kMaxIndex)) return bad("prefill", "de_index", "is out of range");
  engine::PrefillRequest r;
  r.request_id = t.request_id();
  r.tokens = std::move(c.tokens);
  r.hit_tokens = t.hit_tokens();
  r.path = c.path;
  r.de_index = m.de_index();
  r.de_dram_offset = m.de_dram_offset();
  r.pe_engine = m.engine();
  r.sampling = sampling_of(t.sampling());
  // A split read's PE part: its length, and where it begins (after the DE DRAM tier's part).
  const int64_t pe_part =
      std::max<int64_t>(0, t.pe_read().end_tokens() - t.pe_read().begin_tokens());
  const bool split = c.path == sched::ReadPath::kSplit;
  r.pe_read_tokens = split ? pe_part : 0;
  r.pe_read_from_tokens = split && pe_part > 0 ? t.pe_read().begin_tokens() : 0;
  r.cache_namespace = t.cache_namespace();
  return r;
}

Result<engine::DecodeRequest> decode_request(const pb::DecodeRequest& m) {
  if (m.first_token() < 0) return bad("decode", "first_token", "is below 0");
  return engine::DecodeRequest{m.request_id(), m.first_token()};
}

pb::HopBytes to_proto(const engine::HopBytes& b) {
  pb::HopBytes m;
  m.set_storage_read(b.storage_read);
  m.set_pe_h2d(b.pe_h2d);
  m.set_de_to_pe(b.de_to_pe);
  m.set_pd_transfer(b.pd_transfer);
  m.set_de_h2d(b.de_h2d);
  m.set_persist(b.persist);
  m.set_de_dram(b.de_dram);
  return m;
}

Result<engine::HopBytes> from_proto(const pb::HopBytes& m) {
  engine::HopBytes b{m.storage_read(), m.pe_h2d(), m.de_to_pe(), m.pd_transfer(),
                     m.de_h2d(),       m.persist(), m.de_dram()};
  for (int64_t v :
       {b.storage_read, b.pe_h2d, b.de_to_pe, b.pd_transfer, b.de_h2d, b.persist, b.de_dram}) {
    if (v < 0) return bad("reply", "bytes", "holds a negative count");
  }
  return b;
}

pb::PrepareReply to_proto(const engine::PrepareReply& r) {
  pb::PrepareReply m;
  m.set_dram_offset(r.dram_offset);
  *m.mutable_bytes() = to_proto(r.bytes);
  return m;
}

Result<engine::PrepareReply> from_proto(const pb::PrepareReply& m) {
  engine::PrepareReply r;
  r.dram_offset = m.dram_offset();
  DP_ASSIGN_OR_RETURN(r.bytes, from_proto(m.bytes()));
  return r;
}

pb::PrefillReply to_proto(const engine::PrefillReply& r) {
  pb::PrefillReply m;
  m.set_first_token(r.first_token);
  m.mutable_logits()->Add(r.logits.begin(), r.logits.end());
  *m.mutable_bytes() = to_proto(r.bytes);
  m.set_prefill_s(r.prefill_s);
  m.set_gpu_wait_s(r.gpu_wait_s);
  for (const auto& [load, compute] : r.layer_timeline) {
    pb::LayerTime* l = m.add_layer_timeline();
    l->set_load_wait_s(load);
    l->set_compute_s(compute);
  }
  return m;
}

Result<engine::PrefillReply> from_proto(const pb::PrefillReply& m) {
  engine::PrefillReply r;
  if (m.first_token() < 0) return bad("prefill reply", "first_token", "is below 0");
  r.first_token = m.first_token();
  r.logits.assign(m.logits().begin(), m.logits().end());
  DP_ASSIGN_OR_RETURN(r.bytes, from_proto(m.bytes()));
  if (!finite_non_negative(m.prefill_s()) || !finite_non_negative(m.gpu_wait_s()))
    return bad("prefill reply", "times", "must be finite and >= 0");
  r.prefill_s = m.prefill_s();
  r.gpu_wait_s = m.gpu_wait_s();
  for (const pb::LayerTime& l : m.layer_timeline()) {
    if (!finite_non_negative(l.load_wait_s()) || !finite_non_negative(l.compute_s()))
      return bad("prefill reply", "layer_timeline", "must hold finite times >= 0");
    r.layer_timeline.emplace_back(l.load_wait_s(), l.compute_s());
  }
  return r;
}

pb::DecodeReply to_proto(const engine::DecodeReply& r) {
  pb::DecodeReply m;
  m.mutable_output_tokens()->Add(r.output_tokens.begin(), r.output_tokens.end());
  *m.mutable_bytes() = to_proto(r.bytes);
  m.set_decode_s(r.decode_s);
  m.set_tpot_s(r.tpot_s);
  m.set_persist_skipped_blocks(r.persist_skipped_blocks);
  return m;
}

Result<engine::DecodeReply> from_proto(const pb::DecodeReply& m) {
  engine::DecodeReply r;
  DP_ASSIGN_OR_RETURN(r.output_tokens, tokens_from_proto(m.output_tokens(), "output_tokens"));
  DP_ASSIGN_OR_RETURN(r.bytes, from_proto(m.bytes()));
  if (!finite_non_negative(m.decode_s()) || !finite_non_negative(m.tpot_s()))
    return bad("decode reply", "times", "must be finite and >= 0");
  if (m.persist_skipped_blocks() < 0)
    return bad("decode reply", "persist_skipped_blocks", "is below 0");
  r.decode_s = m.decode_s();
  r.tpot_s = m.tpot_s();
  r.persist_skipped_blocks = m.persist_skipped_blocks();
  return r;
}

pb::LoadReport to_proto(const engine::LoadReport& r) {
  pb::LoadReport m;
  m.set_read_queue_tokens(r.read_queue_tokens);
  m.set_read_queue_bytes(r.read_queue_bytes);
  m.set_dram_used_bytes(r.dram_used_bytes);
  m.set_dram_bytes(r.dram_bytes);
  m.set_dram_tier_bytes(r.dram_tier_bytes);
  m.mutable_hbm_used_bytes()->Add(r.hbm_used_bytes.begin(), r.hbm_used_bytes.end());
  m.set_requests(r.requests);
  return m;
}

Result<engine::LoadReport> from_proto(const pb::LoadReport& m) {
  if (m.read_queue_tokens() < 0 || m.read_queue_bytes() < 0 || m.requests() < 0)
    return bad("load report", "counts", "must be >= 0");
  if (m.hbm_used_bytes_size() > kMaxIndex) return bad("load report", "hbm_used_bytes", "is too long");
  engine::LoadReport r;
  r.read_queue_tokens = m.read_queue_tokens();
  r.read_queue_bytes = m.read_queue_bytes();
  r.dram_used_bytes = m.dram_used_bytes();
  r.dram_bytes = m.dram_bytes();
  r.dram_tier_bytes = m.dram_tier_bytes();
  r.hbm_used_bytes.assign(m.hbm_used_bytes().begin(), m.hbm_used_bytes().end());
  r.requests = m.requests();
  return r;
}

pb::Hello to_proto(const engine::NodeHello& h) {
  pb::Hello m;
  m.set_role(to_proto(h.role));
  m.set_index(h.index);
  m.set_ucx_address(string_of(h.address));
  m.set_dram_region(string_of(h.dram));
  for (const auto& r : h.hbm) m.add_hbm_regions(string_of(r));
  m.set_epoch(h.epoch);
  return m;
}

Result<engine::NodeHello> from_proto(const pb::Hello& m) {
  engine::NodeHello h;
  DP_ASSIGN_OR_RETURN(h.role, from_proto(m.role()));
  if (!in_range(m.index(), 0, kMaxIndex)) return bad("hello", "index", "is out of range");
  if (m.ucx_address().empty() || m.dram_region().empty())
    return bad("hello", "ucx_address and dram_region", "must not be empty");
  if (m.hbm_regions_size() < 1 || m.hbm_regions_size() > 1024)
    return bad("hello", "hbm_regions", "must hold 1 to 1024 regions");
  h.index = m.index();
  h.address = bytes_of(m.ucx_address());
  h.dram = bytes_of(m.dram_region());
  for (const std::string& r : m.hbm_regions()) h.hbm.push_back(bytes_of(r));
  h.epoch = m.epoch();
  return h;
}

pb::NodeSetup to_proto(const engine::NodeSetup& s) {
  pb::NodeSetup m;
  m.set_role(to_proto(s.role));
  m.set_index(s.index);
  pb::BackendSpec* b = m.mutable_backend();
  b->set_compute(s.backend.compute);
  b->set_model(s.backend.model);
  b->set_weights(s.backend.weights);
  b->set_weights_seed(s.backend.weights_seed);
  b->set_kv_scale(s.backend.kv_scale);
  b->set_time_dilation(s.backend.time_dilation);
  b->set_prefill_ep_gpus(s.backend.prefill_ep_gpus);
  b->set_decode_ep_gpus(s.backend.decode_ep_gpus);
  const model::HardwareSpec& hw = s.backend.hardware;
  pb::HardwareSpec* h = b->mutable_hardware();
  h->set_name(hw.name);
  h->set_gpus_per_node(hw.gpus_per_node);
  h->set_bf16_flops(hw.bf16_flops);
  h->set_fp8_flops(hw.fp8_flops);
  h->set_hbm_bytes(hw.hbm_bytes);
  h->set_hbm_bytes_per_s(hw.hbm_bytes_per_s);
  h->set_cnic_bytes_per_s(hw.cnic_bytes_per_s);
  h->set_snics_per_node(hw.snics_per_node);
  h->set_snic_bytes_per_s(hw.snic_bytes_per_s);
  h->set_dram_bytes_per_s(hw.dram_bytes_per_s);
  h->set_pcie_bytes_per_s(hw.pcie_bytes_per_s);
  const model::Efficiency& ef = s.backend.efficiency;
  pb::Efficiency* e = b->mutable_efficiency();
  e->set_linear_mfu(ef.linear_mfu);
  e->set_attention_mfu(ef.attention_mfu);
  e->set_layer_overhead_s(ef.layer_overhead_s);
  e->set_intra_node_layer_overhead_s(ef.intra_node_layer_overhead_s);
  e->set_request_overhead_s(ef.request_overhead_s);
  e->set_decode_step_overhead_s(ef.decode_step_overhead_s);
  e->set_decode_mbu(ef.decode_mbu);
  e->set_decode_mfu(ef.decode_mfu);
  e->set_storage_efficiency(ef.storage_efficiency);
  m.set_block_tokens(s.block_tokens);
  for (const std::string& p : s.data_paths) m.add_data_paths(p);
  m.set_store_capacity_bytes(s.store_capacity_bytes);
  m.set_store_fault_rate(s.store_fault_rate);
  m.set_dram_buffer_bytes(s.dram_buffer_bytes);
  m.set_hbm_bytes(s.hbm_bytes);
  m.set_pipeline_depth(s.pipeline_depth);
  m.set_engines(s.engines);
  m.set_compute_slots(s.compute_slots);
  m.set_timeout_ms(std::chrono::duration_cast<std::chrono::milliseconds>(s.timeout).count());
  m.set_report_interval_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(s.report_interval).count());
  m.set_heartbeat_ms(std::chrono::duration_cast<std::chrono::milliseconds>(s.heartbeat).count());
  m.set_buffer_ttl_ms(std::chrono::duration_cast<std::chrono::milliseconds>(s.buffer_ttl).count());
  m.set_dram_tier_bytes(s.dram_tier_bytes);
  m.set_dram_tier_ttl_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(s.dram_tier_ttl).count());
  m.set_transports(s.transports);
  m.set_net_devices(s.net_devices);
  m.set_poll_us(s.poll_us);
  m.set_poll_in_flight_us(s.poll_in_flight_us);
  m.set_snic_gbps(s.snic_gbps);
  return m;
}

Result<engine::NodeSetup> from_proto(const pb::NodeSetup& m) {
  engine::NodeSetup s;
  DP_ASSIGN_OR_RETURN(s.role, from_proto(m.role()));
  auto need = [](bool ok, std::string_view field) {
    return ok ? Status::ok() : bad("node setup", field, "is out of range");
  };
  DP_RETURN_IF_ERROR(need(in_range(m.index(), 0, kMaxIndex), "index"));
  DP_RETURN_IF_ERROR(need(in_range(m.block_tokens(), 1, 1 << 20), "block_tokens"));
  DP_RETURN_IF_ERROR(need(in_range(m.engines(), 1, 1024), "engines"));
  DP_RETURN_IF_ERROR(need(in_range(m.compute_slots(), 0, 1 << 16), "compute_slots"));
  DP_RETURN_IF_ERROR(need(in_range(m.pipeline_depth(), 2, 64), "pipeline_depth"));
  DP_RETURN_IF_ERROR(need(in_range(m.timeout_ms(), 1, int64_t{1} << 40), "timeout_ms"));
  DP_RETURN_IF_ERROR(need(in_range(m.report_interval_ms(), 1, int64_t{1} << 30), "report_interval_ms"));
  DP_RETURN_IF_ERROR(need(in_range(m.heartbeat_ms(), 0, int64_t{1} << 30), "heartbeat_ms"));
  DP_RETURN_IF_ERROR(need(in_range(m.buffer_ttl_ms(), 0, int64_t{1} << 40), "buffer_ttl_ms"));
  DP_RETURN_IF_ERROR(need(in_range(m.dram_tier_ttl_ms(), 0, int64_t{1} << 40), "dram_tier_ttl_ms"));
  DP_RETURN_IF_ERROR(need(m.store_capacity_bytes() >= 0, "store_capacity_bytes"));
  DP_RETURN_IF_ERROR(need(std::isfinite(m.store_fault_rate()) && m.store_fault_rate() >= 0 &&
                              m.store_fault_rate() <= 0.5,
                          "store_fault_rate"));
  DP_RETURN_IF_ERROR(need(finite_non_negative(m.snic_gbps()), "snic_gbps"));
  DP_RETURN_IF_ERROR(need(m.poll_us() >= 0 && m.poll_in_flight_us() >= -1, "poll_us"));
  s.index = m.index();
  const pb::BackendSpec& b = m.backend();
  s.backend.compute = b.compute();
  s.backend.model = b.model();
  s.backend.weights = b.weights();
  s.backend.weights_seed = b.weights_seed();
  s.backend.kv_scale = b.kv_scale();
  s.backend.time_dilation = b.time_dilation();
  s.backend.prefill_ep_gpus = b.prefill_ep_gpus();
  s.backend.decode_ep_gpus = b.decode_ep_gpus();
  DP_RETURN_IF_ERROR(need(std::isfinite(b.kv_scale()) && b.kv_scale() > 0 &&
                              std::isfinite(b.time_dilation()) && b.time_dilation() > 0,
                          "backend.kv_scale or time_dilation"));
  const pb::HardwareSpec& h = b.hardware();
  model::HardwareSpec& hw = s.backend.hardware;
  hw.name = h.name();
  hw.gpus_per_node = h.gpus_per_node();
  hw.bf16_flops = h.bf16_flops();
  hw.fp8_flops = h.fp8_flops();
  hw.hbm_bytes = h.hbm_bytes();
  hw.hbm_bytes_per_s = h.hbm_bytes_per_s();
  hw.cnic_bytes_per_s = h.cnic_bytes_per_s();
  hw.snics_per_node = h.snics_per_node();
  hw.snic_bytes_per_s = h.snic_bytes_per_s();
  hw.dram_bytes_per_s = h.dram_bytes_per_s();
  hw.pcie_bytes_per_s = h.pcie_bytes_per_s();
  const pb::Efficiency& e = b.efficiency();
  model::Efficiency& ef = s.backend.efficiency;
  ef.linear_mfu = e.linear_mfu();
  ef.attention_mfu = e.attention_mfu();
  ef.layer_overhead_s = e.layer_overhead_s();
  ef.intra_node_layer_overhead_s = e.intra_node_layer_overhead_s();
  ef.request_overhead_s = e.request_overhead_s();
  ef.decode_step_overhead_s = e.decode_step_overhead_s();
  ef.decode_mbu = e.decode_mbu();
  ef.decode_mfu = e.decode_mfu();
  ef.storage_efficiency = e.storage_efficiency();
  s.block_tokens = m.block_tokens();
  s.data_paths.assign(m.data_paths().begin(), m.data_paths().end());
  s.store_capacity_bytes = m.store_capacity_bytes();
  s.store_fault_rate = m.store_fault_rate();
  s.dram_buffer_bytes = m.dram_buffer_bytes();
  s.hbm_bytes = m.hbm_bytes();
  s.pipeline_depth = m.pipeline_depth();
  s.engines = m.engines();
  s.compute_slots = m.compute_slots();
  s.timeout = std::chrono::milliseconds(m.timeout_ms());
  s.report_interval = std::chrono::milliseconds(m.report_interval_ms());
  s.heartbeat = std::chrono::milliseconds(m.heartbeat_ms());
  s.buffer_ttl = std::chrono::milliseconds(m.buffer_ttl_ms());
  s.dram_tier_bytes = m.dram_tier_bytes();
  s.dram_tier_ttl = std::chrono::milliseconds(m.dram_tier_ttl_ms());
  s.transports = m.transports();
  s.net_devices = m.net_devices();
  s.poll_us = m.poll_us();
  s.poll_in_flight_us = m.poll_in_flight_us();
  s.snic_gbps = m.snic_gbps();
  return s;
}

}  // namespace dualpath::control
