#include "workload/mooncake_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace dualpath::workload {
namespace {

using nlohmann::json;

constexpr const char* kMooncakeFormatHint =
    "each line must be {\"timestamp\": ms, \"input_length\": n, \"output_length\": n, "
    "\"hash_ids\": [...]} as described in traces/mooncake_fast25/SOURCE.md";

// A trace longer than this is not a Mooncake trace (the longest prompt there is 191K tokens).
constexpr int64_t kMaxInputTokens = int64_t{1} << 30;
// Timestamps past ~30 years of milliseconds are a unit slip, not a trace.
constexpr double kMaxTimestampMs = 1e12;

Status bad_line(const std::string& path, int64_t line, const std::string& what) {
  return Status::invalid_argument(fmt::format("{}:{}: {}; {}", path, line, what, kMooncakeFormatHint));
}

}  // namespace

Result<RequestTrace> read_mooncake(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    const std::string fix =
        "pass a Mooncake trace file, e.g. --dataset "
        "mooncake:../shared/traces/mooncake_fast25/conversation_trace.jsonl";
    if (err == ENOENT)
      return Status::not_found(fmt::format("trace file '{}' does not exist; {}", path, fix));
    return Status::io_error(fmt::format("cannot open trace file '{}': {} (errno {}); {}", path,
                                        std::strerror(err), err, fix));
  }
  RequestTrace trace;
  trace.name = "mooncake:" + path;
  std::unordered_map<int64_t, uint32_t> dense;  // trace id -> dense id
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
    // The non-throwing parse: a malformed line is an error value, never an exception.
    const json obj = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (obj.is_discarded()) return bad_line(path, line_no, "not valid JSON");
    if (!obj.is_object()) return bad_line(path, line_no, "not a JSON object");
    TraceRequest r;
    const auto ts = obj.find("timestamp");
    if (ts == obj.end() || !ts->is_number() || !std::isfinite(ts->get<double>()) ||
        ts->get<double>() < 0 || ts->get<double>() > kMaxTimestampMs)
      return bad_line(path, line_no, "'timestamp' is missing or not a number of ms >= 0");
    r.arrival_s = ts->get<double>() / 1000.0;
    const auto input = obj.find("input_length");
    if (input == obj.end() || !input->is_number_integer() || input->get<int64_t>() < 1 ||
        input->get<int64_t>() > kMaxInputTokens)
      return bad_line(path, line_no, "'input_length' is missing or not an integer >= 1");
    r.input_tokens = input->get<int64_t>();
    const auto output = obj.find("output_length");
    if (output == obj.end() || !output->is_number_integer() || output->get<int64_t>() < 0 ||
        output->get<int64_t>() > kMaxInputTokens)
      return bad_line(path, line_no, "'output_length' is missing or not an integer >= 0");
    r.output_tokens = output->get<int64_t>();
    const auto ids = obj.find("hash_ids");
    if (ids == obj.end() || !ids->is_array())
      return bad_line(path, line_no, "'hash_ids' is missing or not an array");
    const int64_t want = (r.input_tokens + trace.block_tokens - 1) / trace.block_tokens;
    if (static_cast<int64_t>(ids->size()) != want)
      return bad_line(
          path, line_no,
          fmt::format("'hash_ids' has {} ids; an input of {} tokens needs "
                      "ceil({} / {}) = {}",
                      ids->size(), r.input_tokens, r.input_tokens, trace.block_tokens, want));
    r.block_ids.reserve(ids->size());
    for (const json& id : *ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0)
        return bad_line(path, line_no, "a 'hash_ids' entry is not an integer >= 0");
      auto [it, fresh] = dense.try_emplace(id.get<int64_t>(), trace.distinct_blocks);
      if (fresh) ++trace.distinct_blocks;
      r.block_ids.push_back(it->second);
    }
    trace.requests.push_back(std::move(r));
  }
  if (in.bad())
    return Status::io_error(fmt::format("reading trace file '{}' failed; check the disk", path));
  if (trace.requests.empty())
    return Status::invalid_argument(
        fmt::format("trace file '{}' holds no requests; {}", path, kMooncakeFormatHint));
  std::stable_sort(
      trace.requests.begin(), trace.requests.end(),
      [](const TraceRequest& a, const TraceRequest& b) { return a.arrival_s < b.arrival_s; });
  return trace;
}

double static_prefix_hit_ratio(const RequestTrace& trace) {
  std::vector<bool> seen(trace.distinct_blocks, false);
  double hit = 0, total = 0;
  for (const TraceRequest& r : trace.requests) {
    const int64_t full = r.full_blocks(trace.block_tokens);
    int64_t lead = 0;
    while (lead < full && seen[r.block_ids[static_cast<size_t>(lead)]]) ++lead;
    hit += static_cast<double>(lead * trace.block_tokens);
    total += static_cast<double>(r.input_tokens);
    for (int64_t b = 0; b < full; ++b) seen[r.block_ids[static_cast<size_t>(b)]] = true;
  }
  return total > 0 ? hit / total : 0.0;
}

}  // namespace dualpath::workload
