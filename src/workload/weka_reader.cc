#include "workload/weka_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "workload/block_interval_set.h"

namespace dualpath::workload {
namespace {

using nlohmann::json;

// The WEKA traces hash prompts in 64-token blocks (SOURCE.md); a trace's `block_size` overrides.
constexpr int64_t kWekaBlockTokens = 64;
constexpr const char* kWekaFormatHint =
    "each line must be one trace object as described in traces/weka_claude_code/SOURCE.md";

// Parsing context for error messages: "file:line".
struct Where {
  const std::string& path;
  int64_t line;
};

Status bad_line(const Where& w, const std::string& what) {
  return Status::invalid_argument(fmt::format("{}:{}: {}; {}", w.path, w.line, what, kWekaFormatHint));
}

std::optional<int64_t> get_count(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return std::nullopt;
  const auto v = it->get<int64_t>();
  if (v < 0) return std::nullopt;
  return v;
}

// The request's prefix-block ids as runs [start, count]: `hash_ranges` (the compact file) or
// `hash_ids` (the raw trace files).
Result<std::vector<std::pair<int64_t, int64_t>>> block_runs(const json& req,
                                                            const Where& w,
                                                            const std::string& req_name) {
  std::vector<std::pair<int64_t, int64_t>> runs;
  if (auto it = req.find("hash_ranges"); it != req.end()) {
    if (!it->is_array()) return bad_line(w, req_name + ": 'hash_ranges' is not an array");
    for (const json& r : *it) {
      if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() ||
          !r[1].is_number_integer() || r[1].get<int64_t>() < 0) {
        return bad_line(w, req_name + ": a 'hash_ranges' entry is not a pair [start, count >= 0]");
      }
      runs.emplace_back(r[0].get<int64_t>(), r[1].get<int64_t>());
    }
  } else if (auto ids = req.find("hash_ids"); ids != req.end()) {
    if (!ids->is_array()) return bad_line(w, req_name + ": 'hash_ids' is not an array");
    for (const json& id : *ids) {
      if (!id.is_number_integer())
        return bad_line(w, req_name + ": a 'hash_ids' entry is not an integer");
      const auto v = id.get<int64_t>();
      if (!runs.empty() && runs.back().first + runs.back().second == v) {
        ++runs.back().second;
      } else {
        runs.emplace_back(v, 1);
      }
    }
  }
  return runs;
}

struct Builder {
  const WekaOptions& options;
  Dataset& ds;
  int64_t max_context = 0;

  // Appends `requests` as one trajectory (and, recursively, its sub-agents after it).
  Status add(const json& requests, const std::string& id, int64_t block_tokens, const Where& w) {
    if (!requests.is_array())
      return bad_line(w, fmt::format("'{}': 'requests' is not an array", id));
    Trajectory tr;
    tr.id = id;
    BlockIntervalSet seen;
    int64_t context = 0;  // what the replay has seen: previous prompt + gen
    std::vector<std::pair<const json*, std::string>> subagents;
    int64_t k = 0;
    for (const json& req : requests) {
      const std::string req_name = fmt::format("'{}' request {}", id, k++);
      if (!req.is_object()) return bad_line(w, req_name + " is not an object");
      if (auto type = req.find("type"); type != req.end() && *type == "subagent") {
        if (!req.contains("requests")) {
          return bad_line(w, req_name + ": a subagent entry without 'requests'");
        }
        const auto agent = req.find("agent_id");
        std::string agent_id = agent != req.end() && agent->is_string()
                                   ? agent->get<std::string>()
                                   : fmt::format("subagent{}", k - 1);
        subagents.emplace_back(&*req.find("requests"), id + "/" + agent_id);
        continue;
      }
      const auto in = get_count(req, "in");
      const auto out = get_count(req, "out");
      if (!in) return bad_line(w, req_name + ": 'in' is missing or not an integer >= 0");
      if (!out) return bad_line(w, req_name + ": 'out' is missing or not an integer >= 0");
      double think = 0;
      if (auto t = req.find("think_time"); t != req.end()) {
        if (!t->is_number() || t->get<double>() < 0) {
          return bad_line(w, req_name + ": 'think_time' is not a number >= 0");
        }
        think = t->get<double>();
      }
      DP_ASSIGN_OR_RETURN(auto runs, block_runs(req, w, req_name));
      // Leading blocks already seen by this trajectory (prefix-trie semantics: stop at the
      // first block never seen before).
      int64_t hit_blocks = 0;
      for (const auto& [start, count] : runs) {
        const int64_t covered = seen.covered_prefix(start, count);
        hit_blocks += covered;
        if (covered < count) break;
      }
      for (const auto& [start, count] : runs) seen.insert(start, count);

      Turn turn;
      turn.keep_tokens = std::min(hit_blocks * block_tokens, *in);
      const int64_t kept = std::min(turn.keep_tokens, context);
      turn.append_tokens = *in - kept;
      turn.gen_tokens = std::max<int64_t>(1, *out);
      turn.think_time_s = think;
      context = *in + turn.gen_tokens;
      max_context = std::max(max_context, context);
      tr.turns.push_back(turn);
    }
    if (!tr.turns.empty()) ds.trajectories.push_back(std::move(tr));
    if (options.include_subagents) {
      for (const auto& [reqs, sub_id] : subagents)
        DP_RETURN_IF_ERROR(add(*reqs, sub_id, block_tokens, w));
    }
    return Status::ok();
  }
};

}  // namespace

Result<Dataset> read_weka(const std::string& path, const WekaOptions& options) {
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    const std::string fix =
        "pass the WEKA trace file, e.g. --dataset weka:../shared/traces/weka_claude_code/"
        "weka_traces_compact.jsonl";
    if (err == ENOENT)
      return Status::not_found(fmt::format("trace file '{}' does not exist; {}", path, fix));
    return Status::io_error(fmt::format("cannot open trace file '{}': {} (errno {}); {}", path,
                                        std::strerror(err), err, fix));
  }
  Dataset ds;
  ds.name = "weka:" + path;
  Builder b{options, ds};
  std::string line;
  int64_t sessions = 0;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
    if (options.max_sessions > 0 && sessions >= options.max_sessions) break;
    const Where w{path, line_no};
    json trace;
    try {
      trace = json::parse(line);
    } catch (const json::exception& e) {
      return bad_line(w, fmt::format("not valid JSON ({})", e.what()));
    }
    if (!trace.is_object() || !trace.contains("requests")) {
      return bad_line(w, "not a JSON object with a 'requests' array");
    }
    std::string id = fmt::format("line{}", line_no);
    if (auto it = trace.find("id"); it != trace.end() && it->is_string())
      id = it->get<std::string>();
    int64_t block_tokens = kWekaBlockTokens;
    if (auto it = trace.find("block_size"); it != trace.end()) {
      if (!it->is_number_integer() || it->get<int64_t>() <= 0) {
        return bad_line(w, "'block_size' is not a positive integer");
      }
      block_tokens = it->get<int64_t>();
    }
    DP_RETURN_IF_ERROR(b.add(trace["requests"], id, block_tokens, w));
    ++sessions;
  }
  if (in.bad()) {
    return Status::io_error(fmt::format("reading trace file '{}' failed; check the disk", path));
  }
  if (ds.trajectories.empty()) {
    return Status::invalid_argument(
        fmt::format("trace file '{}' holds no requests; pass weka_traces_compact.jsonl ({})", path,
                    kWekaFormatHint));
  }
  ds.max_len_tokens = options.max_len_tokens >= 0 ? options.max_len_tokens : b.max_context;
  return ds;
}

}  // namespace dualpath::workload
