#include "serve/serve_guide.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace dualpath::serve {

namespace {

using Json = nlohmann::json;

// A guide key that maps onto a native key: at most one of them may be given.
bool exclusive(Config& f, const char* guide, const char* native) {
  if (!f.has(guide)) return false;
  if (f.has(native)) {
    f.fail(guide, fmt::format("{} says the same thing: keep one of the two", native));
    return false;
  }
  return true;
}

std::string mib_text(int64_t bytes) {
  return fmt::format("{} MiB", bytes >> 20);
}

}  // namespace

Status apply_guide_config(Config& f, ServeConfig& cfg) {
  engine::EngineConfig& e = cfg.engine;
  auto& w = cfg.warnings;
  // [storage_node]
  if (exclusive(f, "storage_node.data_paths", "store.data_paths")) {
    e.data_paths = f.string_list("storage_node.data_paths", e.data_paths);
  }
  if (f.has("storage_node.rdma_device")) {
    cfg.storage_device = f.string("storage_node.rdma_device", "", "the storage NIC, e.g. mlx5_0");
    if (f.has("storage_node.rdma_port")) {
      const int64_t port =
          f.integer("storage_node.rdma_port", 1, 1, 255, "the storage NIC's port (ibstat)");
      cfg.storage_device += fmt::format(":{}", port);
    }
  } else if (f.has("storage_node.rdma_port")) {
    f.fail("storage_node.rdma_port", "is a port of storage_node.rdma_device: give the device too");
  }
  // [dualpath_engine]
  const bool pe_given = exclusive(f, "dualpath_engine.pe_dram_buffer", "live.pe_dram_buffer_mb");
  const bool de_given = exclusive(f, "dualpath_engine.de_dram_buffer", "live.de_dram_buffer_mb");
  if (pe_given) {
    e.pe_dram_buffer_bytes = static_cast<uint64_t>(
        f.size_bytes("dualpath_engine.pe_dram_buffer", 0, "the PE node's DRAM buffer"));
  }
  if (de_given) {
    e.de_dram_buffer_bytes = static_cast<uint64_t>(
        f.size_bytes("dualpath_engine.de_dram_buffer", 0, "the DE node's DRAM buffer"));
  }
  if (f.has("storage_node.buffer_pool_size")) {
    const auto pool = static_cast<uint64_t>(
        f.size_bytes("storage_node.buffer_pool_size", 0, "a node's DRAM buffer pool"));
    const bool native = f.has("live.pe_dram_buffer_mb") || f.has("live.de_dram_buffer_mb");
    if (!pe_given && !de_given && !native) {
      e.pe_dram_buffer_bytes = e.de_dram_buffer_bytes = pool;
    } else if (pool < std::max(e.pe_dram_buffer_bytes, e.de_dram_buffer_bytes)) {
      f.fail("storage_node.buffer_pool_size",
             fmt::format("is smaller than the DRAM buffers it holds (PE {}, DE {}): raise it, or "
                         "lower the buffers",
                         mib_text(static_cast<int64_t>(e.pe_dram_buffer_bytes)),
                         mib_text(static_cast<int64_t>(e.de_dram_buffer_bytes))));
    }
  }
  if (exclusive(f, "dualpath_engine.enable_dual_path", "scheduler.mode")) {
    cfg.scheduler.mode = f.boolean("dualpath_engine.enable_dual_path", true) ? ServeMode::kFull
                                                                             : ServeMode::kBasic;
  }
  if (f.has("dualpath_engine.scheduler_mode")) {
    (void)f.choice("dualpath_engine.scheduler_mode", "adaptive", {"adaptive"});
  }
  if (exclusive(f, "dualpath_engine.rdma_transfer_chunk", "transport.traffic.chunk_bytes")) {
    const int64_t chunk = f.size_bytes("dualpath_engine.rdma_transfer_chunk", 0,
                                       "the largest piece one transfer is cut into");
    if (chunk < 1 || chunk > (int64_t{1} << 30)) {
      f.fail("dualpath_engine.rdma_transfer_chunk", "must be between 1 byte and 1G");
    } else {
      auto& t = e.transport.traffic;
      t.chunk_bytes = static_cast<uint64_t>(chunk);
      if (t.max_inflight_bytes < 2 * t.chunk_bytes) {
        w.push_back(fmt::format(
            "dualpath_engine.rdma_transfer_chunk = {}: transport.traffic.max_inflight_bytes is "
            "raised from {} to {} (two chunks), so that a chunk fits in flight",
            mib_text(chunk), t.max_inflight_bytes, 2 * t.chunk_bytes));
        t.max_inflight_bytes = 2 * t.chunk_bytes;
      }
    }
  }
  // [prefill_engine] and [decode_engine]
  std::optional<size_t> gpus[2];
  const char* names[2] = {"prefill_engine", "decode_engine"};
  for (int i = 0; i < 2; ++i) {
    const std::string sec = names[i];
    const std::string role = i == 0 ? "prefill" : "decode";
    if (f.has(sec + ".engine_type")) (void)f.choice(sec + ".engine_type", role, {role});
    if (f.has(sec + ".gpu_ids")) {
      const auto ids = f.integer_list(sec + ".gpu_ids", {});
      std::set<int64_t> unique(ids.begin(), ids.end());
      if (ids.empty() || unique.size() != ids.size() || *unique.begin() < 0) {
        f.fail(sec + ".gpu_ids", "give distinct GPU indexes, e.g. [0, 1, 2, 3]");
      } else {
        gpus[i] = ids.size();
      }
    }
    if (f.has(sec + ".max_batch_tokens")) {
      const int64_t t = f.integer(sec + ".max_batch_tokens", 8192, 1, int64_t{1} << 30, "tokens");
      w.push_back(fmt::format(
          "{}.max_batch_tokens = {} has no effect: the live engines run one request per pass "
          "(no batching across requests yet, docs/serve.md)",
          sec, t));
    }
  }
  if (gpus[0] || gpus[1]) {
    if (gpus[0] && gpus[1] && *gpus[0] != *gpus[1]) {
      f.fail("decode_engine.gpu_ids",
             fmt::format("has {} GPUs and prefill_engine.gpu_ids {}: both roles run the same "
                         "number of engines per node (g, live.engines_per_node) here",
                         *gpus[1], *gpus[0]));
    } else if (f.has("live.engines_per_node")) {
      f.fail(gpus[0] ? "prefill_engine.gpu_ids" : "decode_engine.gpu_ids",
             "live.engines_per_node says the same thing: keep one of the two");
    } else {
      e.engines_per_node = static_cast<int>(gpus[0] ? *gpus[0] : *gpus[1]);
      if (e.engines_per_node > 16) {
        f.fail(gpus[0] ? "prefill_engine.gpu_ids" : "decode_engine.gpu_ids",
               "at most 16 engines (GPUs) per node");
      } else {
        w.push_back(fmt::format(
            "[prefill_engine]/[decode_engine] gpu_ids: {} engines per node; the GPU indexes "
            "themselves are not used, since this build computes on the {} backend",
            e.engines_per_node, e.compute));
      }
    }
  }
  return Status::ok();
}

Result<GuideSettings> apply_settings_json(const std::string& path, ServeConfig& cfg) {
  std::ifstream in(path);
  if (!in) {
    return Status::not_found(
        fmt::format("--settings {}: cannot read the file; give the guide's settings.json", path));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  Json j = Json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::invalid_argument(
        fmt::format("{}: not a JSON object; the guide's settings.json is one {{...}}", path));
  }
  GuideSettings g;
  g.path = path;
  auto field = [](const Json& obj, const char* key) -> const Json* {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  };
  if (auto hc = j.find("health_check"); hc != j.end()) {
    if (!hc->is_object()) {
      return Status::invalid_argument(fmt::format("{}: health_check must be an object", path));
    }
    if (const Json* en = field(*hc, "enabled")) {
      if (!en->is_boolean()) {
        return Status::invalid_argument(
            fmt::format("{}: health_check.enabled = {} must be true or false", path, en->dump()));
      }
      g.health_check = en->get<bool>();
    }
    if (const Json* ep = field(*hc, "endpoint")) {
      if (!ep->is_string()) {
        return Status::invalid_argument(fmt::format(
            "{}: health_check.endpoint = {} must be a path such as \"/v1/models\"", path,
            ep->dump()));
      }
      g.health_endpoint = ep->get<std::string>();
    }
  }
  auto dp = j.find("dualpath");
  if (dp == j.end()) return g;
  if (!dp->is_object()) {
    return Status::invalid_argument(fmt::format("{}: dualpath must be an object", path));
  }
  for (const auto& [key, value] : dp->items()) {
    if (key == "enable") {
      if (!value.is_boolean()) {
        return Status::invalid_argument(
            fmt::format("{}: dualpath.enable = {} must be true or false", path, value.dump()));
      }
      cfg.scheduler.mode = value.get<bool>() ? ServeMode::kFull : ServeMode::kBasic;
    } else if (key == "path_a_weight" || key == "path_b_weight") {
      return Status::invalid_argument(fmt::format(
          "{}: dualpath.{} = {}: DualPath's scheduler has no static path weights to start from: "
          "it picks each request's read path (PE or DE) from the storage NICs' read queues at "
          "that moment (PAPER.md §8), which is what the guide's \"adaptive\" mode does. Remove "
          "path_a_weight and path_b_weight; dualpath.enable = true (or scheduler.mode = "
          "\"full\") is the whole setting",
          path, key, value.dump()));
    } else if (key == "rebalance_interval_ms") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 ||
          value.get<int64_t>() > 60'000) {
        return Status::invalid_argument(fmt::format(
            "{}: dualpath.rebalance_interval_ms = {} must be an integer of ms in [1, 60000]",
            path, value.dump()));
      }
      const auto ms = std::chrono::milliseconds(value.get<int64_t>());
      cfg.scheduler.report_interval = ms;
      if (cfg.scheduler.lease_ttl < 5 * cfg.scheduler.report_interval) {
        cfg.scheduler.lease_ttl = 5 * cfg.scheduler.report_interval;
        cfg.warnings.push_back(fmt::format(
            "{}: dualpath.rebalance_interval_ms = {} sets scheduler.report_interval_ms (how often "
            "the scheduler learns the read queues); scheduler.lease_ttl_ms is raised to {} (five "
            "reports) so that a node reporting on time keeps its lease",
            path, value.get<int64_t>(),
            std::chrono::duration_cast<std::chrono::milliseconds>(cfg.scheduler.lease_ttl)
                .count()));
      }
    } else {
      return Status::invalid_argument(fmt::format(
          "{}: dualpath.{} is not a setting; the dualpath block takes enable and "
          "rebalance_interval_ms",
          path, key));
    }
  }
  return g;
}

}  // namespace dualpath::serve
