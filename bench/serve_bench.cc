#include "bench/serve_bench.h"

#include <fmt/format.h>
#include <httplib.h>

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "bench/fresh_store.h"
#include "bench/http_stream.h"
#include "common/mutex.h"
#include "serve/cluster.h"
#include "serve/completion_request.h"
#include "serve/http_api.h"
#include "serve/local_nodes.h"
#include "sim/experiment.h"
#include "workload/mooncake_reader.h"

namespace dualpath::bench {

namespace {

using Clock = std::chrono::steady_clock;

uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(uint64_t h, std::string_view s) {
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One streamed request's outcome, as the client saw it.
struct Exchange {
  bool ok = false;
  std::string error;
  std::string reply;
  double ttft_s = 0, e2e_s = 0;
  // The gaps between a token chunk and the one before it (vLLM's ITL: the first is after TTFT).
  std::vector<double> itl_s;
  Clock::time_point sent;
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  int64_t storage_read_bytes = 0;
  std::string read_path;
};

// The SSE reader of one response: splits events at blank lines and reads their JSON without
// exceptions.
class SseReader {
 public:
  SseReader(Exchange& x, Clock::time_point sent) : x_(x), sent_(sent) {}

  void feed(const char* data, size_t n) {
    raw_.append(data, n);
    buf_.append(data, n);
    for (size_t end; (end = buf_.find("\n\n")) != std::string::npos;) {
      event(buf_.substr(0, end));
      buf_.erase(0, end + 2);
    }
  }
  bool done() const { return done_; }
  bool usage_seen() const { return usage_; }
  const std::string& raw() const { return raw_; }

 private:
  void event(const std::string& e) {
    if (e.rfind("data: ", 0) != 0) return;
    const std::string payload = e.substr(6);
    if (payload == "[DONE]") {
      done_ = true;
      return;
    }
    Json j = Json::parse(payload, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      if (x_.error.empty()) x_.error = "a stream event that is not JSON: " + payload.substr(0, 80);
      return;
    }
    if (auto err = j.find("error"); err != j.end()) {
      const Json* m = err->is_object() && err->contains("message") ? &(*err)["message"] : nullptr;
      x_.error = m && m->is_string() ? m->get<std::string>() : err->dump();
      return;
    }
    const auto now = Clock::now();
    if (auto ch = j.find("choices"); ch != j.end() && ch->is_array() && !ch->empty()) {
      const Json& choice = (*ch)[0];
      const Json delta = choice.is_object() ? choice.value("delta", Json::object()) : Json();
      const std::string* piece = nullptr;  // a chat delta's content, or a completion's text
      bool role_only = false;
      if (delta.is_object() && delta.contains("content") && delta["content"].is_string()) {
        piece = &delta["content"].get_ref<const std::string&>();
        // The stream opens with {"role": "assistant", "content": ""} before any token is
        // generated (as OpenAI's does); the first token's chunk is the first after it, sent even
        // when its tokens carry no text yet.
        role_only = delta.contains("role") && piece->empty();
      } else if (choice.is_object() && choice.contains("text") && choice["text"].is_string()) {
        piece = &choice["text"].get_ref<const std::string&>();
      }
      if (piece != nullptr) {
        if (!first_ && !role_only) {
          first_ = now;
          x_.ttft_s = seconds(now - sent_);
        } else if (first_ && !role_only) {
          x_.itl_s.push_back(seconds(now - *last_));
        }
        if (!role_only) last_ = now;
        x_.reply += *piece;
      }
    }
    if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
      usage_ = true;
      x_.prompt_tokens = u->value("prompt_tokens", int64_t{0});
      x_.completion_tokens = u->value("completion_tokens", int64_t{0});
      const Json details = u->value("prompt_tokens_details", Json::object());
      if (details.is_object()) x_.cached_tokens = details.value("cached_tokens", int64_t{0});
    }
    if (auto d = j.find("dualpath"); d != j.end() && d->is_object()) {
      x_.read_path = d->value("read_path", std::string());
      x_.storage_read_bytes = d->value("storage_read_bytes", int64_t{0});
    }
  }

  Exchange& x_;
  Clock::time_point sent_;
  std::optional<Clock::time_point> first_, last_;
  std::string buf_, raw_;
  bool done_ = false;
  bool usage_ = false;
};

Exchange post_stream(httplib::Client& cli, const char* path, const Json& body) {
  Exchange x;
  std::string text = body.dump();  // the client's own work: before the clock starts
  const auto sent = Clock::now();
  x.sent = sent;
  SseReader sse(x, sent);
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent_ok = post_streamed(
      cli, path, std::move(text),
      [&](const char* data, size_t n) { sse.feed(data, n); }, res, err);
  x.e2e_s = seconds(Clock::now() - sent);
  if (!sent_ok) {
    x.error = fmt::format("HTTP request failed: {}", httplib::to_string(err));
    return x;
  }
  if (res.status != 200) {
    Json j = Json::parse(sse.raw(), nullptr, false);
    std::string why = sse.raw().substr(0, 200);
    if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object()) {
      why = j["error"].value("message", why);
    }
    x.error = fmt::format("HTTP {}: {}", res.status, why);
    return x;
  }
  if (x.error.empty() && !sse.done()) x.error = "the stream ended without [DONE]";
  if (x.error.empty() && !sse.usage_seen()) x.error = "the stream carried no usage chunk";
  x.ok = x.error.empty();
  return x;
}

Exchange post_chat(httplib::Client& cli, const Json& body) {
  return post_stream(cli, "/v1/chat/completions", body);
}

// Turn t of session s: the conversation so far plus its new user message, asked for as a greedy
// stream with usage (the same requests in every mode and every soak interval).
Json turn_body(const std::string& model, Json& messages, uint64_t seed, uint64_t session, int turn,
               int64_t context_tokens, int64_t append_tokens, int64_t max_tokens) {
  messages.push_back(
      {{"role", "user"},
       {"content", bench_text(seed * 1'000'003 + session * 10'007 + static_cast<uint64_t>(turn),
                              turn == 0 ? context_tokens : append_tokens)}});
  return {{"model", model},
          {"messages", messages},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"stream", true},
          {"stream_options", {{"include_usage", true}}}};
}

Exchange ask_turn(httplib::Client& cli, const std::string& model, Json& messages, uint64_t seed,
                  uint64_t session, int turn, int64_t context_tokens, int64_t append_tokens,
                  int64_t max_tokens) {
  return post_chat(cli, turn_body(model, messages, seed, session, turn, context_tokens,
                                  append_tokens, max_tokens));
}

// One request through the service's interface (ServeBenchOptions::direct).
struct DirectExchange {
  bool ok = false;
  std::string error;
  double ttft_s = 0, e2e_s = 0;
  double parse_s = 0;  // the API's parser and tokenizer on the body, as the bench ran them
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::vector<int32_t> prompt, output;
};

// The body the API was sent, parsed and tokenized by the API's own code, run for `tokens` output
// tokens under the bench's own cache namespace. `memo` holds this session's earlier replies'
// tokens (the API splices its own the same way), so the earlier turns keep their tokens.
DirectExchange ask_direct(serve::SchedulerService& service, const serve::Tokenizer& tok,
                          const serve::CompletionLimits& limits, const Json& body,
                          int64_t tokens, serve::ReplyMemo& memo) {
  DirectExchange x;
  const std::string text = body.dump();
  const auto parse_start = Clock::now();
  auto parsed = serve::parse_completion_request(text, /*chat=*/true, limits, tok,
                                                static_cast<serve::ReplyLookup*>(&memo));
  x.parse_s = seconds(Clock::now() - parse_start);
  if (auto* e = std::get_if<serve::ApiError>(&parsed)) {
    x.error = "the bench's body does not parse: " + e->message;
    return x;
  }
  const serve::CompletionParams& p = std::get<serve::CompletionParams>(parsed);
  serve::TurnRequest turn;
  turn.tokens = p.prompt;
  turn.gen_tokens = std::max<int64_t>(1, tokens);
  turn.sampling = p.sampling;
  turn.cache_namespace = "bench-serve-direct";
  turn.cancel = std::make_shared<serve::TurnCancel>();
  x.prompt_tokens = static_cast<int64_t>(p.prompt.size());
  const auto sent = Clock::now();
  std::atomic<int64_t> first_ns{-1};  // since `sent`; the callback runs on the turn's thread
  turn.on_tokens = [&first_ns, sent](std::span<const int32_t> out) {
    if (out.empty() || first_ns.load(std::memory_order_relaxed) >= 0) return;
    first_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - sent)
                       .count(),
                   std::memory_order_relaxed);
  };
  auto r = service.run_turn(std::move(turn));
  x.e2e_s = seconds(Clock::now() - sent);
  if (!r.is_ok()) {
    x.error = r.status().to_string();
    return x;
  }
  x.completion_tokens = static_cast<int64_t>(r->output_tokens.size());
  x.prompt = p.prompt;
  x.output = std::move(r->output_tokens);
  const int64_t first = first_ns.load(std::memory_order_relaxed);
  if (first < 0) {
    x.error = "no token reached on_tokens";
    return x;
  }
  x.ttft_s = static_cast<double>(first) / 1e9;
  x.ok = true;
  return x;
}

}  // namespace

std::string bench_text(uint64_t seed, int64_t bytes) {
  static constexpr std::string_view kWords[] = {
      "the",     "agent",  "reads",   "file",    "and",     "edits",  "code",   "with",
      "tests",   "that",   "pass",    "build",   "cache",   "block",  "store",  "decode",
      "prefill", "node",   "network", "storage", "request", "token",  "layer",  "buffer",
      "a",       "of",     "to",      "in",      "is",      "for",    "on",     "function",
      "returns", "value",  "error",   "config",  "module",  "commit", "branch", "review",
      "patch",   "server", "client",  "stream",  "queue",   "time",   "read",   "write"};
  constexpr size_t kCount = sizeof(kWords) / sizeof(kWords[0]);
  std::string out;
  out.reserve(static_cast<size_t>(bytes));
  uint64_t state = seed;
  while (static_cast<int64_t>(out.size()) < bytes) {
    if (!out.empty()) out += (splitmix(state) % 12 == 0) ? ". " : " ";
    out += kWords[splitmix(state) % kCount];
  }
  out.resize(static_cast<size_t>(std::max<int64_t>(bytes, 0)));
  return out;
}

std::string TracePrompts::next(int turn) {
  const workload::TurnShape& shape = plan_.turns[static_cast<size_t>(turn)];
  const uint64_t base = seed_ * 1'000'003 + session_ * 10'007;
  std::string prompt;
  if (!plan_.prefix_blocks.empty()) {
    // Content-addressed: block id b's text is the same in every request (its id names its prefix
    // too, so equal ids sit at equal offsets); the last block is cut at the prompt's length.
    prompt.reserve(static_cast<size_t>(shape.prompt_tokens));
    for (uint32_t id : plan_.prefix_blocks) {
      if (static_cast<int64_t>(prompt.size()) >= shape.prompt_tokens) break;
      prompt += bench_text(seed_ * 7'919 + 0x9e3779b97f4a7c15ull * (uint64_t{id} + 1),
                           plan_.prefix_block_tokens);
    }
    if (static_cast<int64_t>(prompt.size()) < shape.prompt_tokens) {  // past the listed blocks
      prompt += bench_text(base + static_cast<uint64_t>(turn),
                           shape.prompt_tokens - static_cast<int64_t>(prompt.size()));
    }
    prompt.resize(static_cast<size_t>(shape.prompt_tokens));
    return prompt;
  }
  const size_t kept = std::min(text_.size(), static_cast<size_t>(std::max<int64_t>(0, shape.context_tokens)));
  prompt = text_.substr(0, kept);
  prompt += bench_text(base + 2 * static_cast<uint64_t>(turn),
                       shape.prompt_tokens - static_cast<int64_t>(kept));
  // The stand-in for this turn's generation, so that the next turn's kept context (prompt and
  // generation, cut where the trace cut it) has the trace's length.
  text_ = prompt + bench_text(base + 2 * static_cast<uint64_t>(turn) + 1, shape.gen_tokens);
  return prompt;
}

Result<TraceReplay> make_trace_replay(const sim::SimConfig& base, const TraceSpec& spec,
                                      double time_dilation) {
  auto bad = [](const std::string& what) { return Status::invalid_argument(what); };
  if (spec.sessions < 1) return bad(fmt::format("--sessions {}: give at least 1", spec.sessions));
  for (auto [v, flag] : {std::pair{spec.length_scale, "--length-scale"},
                         std::pair{spec.time_scale, "--time-scale"}}) {
    if (!(v > 0) || !std::isfinite(v)) {
      return bad(fmt::format("{} {}: give a positive factor (1: as recorded)", flag, v));
    }
  }
  if (!(spec.think_time_scale >= 0) || !std::isfinite(spec.think_time_scale)) {
    return bad(fmt::format("--think-time-scale {}: give 0 (back to back) or a positive factor",
                           spec.think_time_scale));
  }
  if (!(spec.sessions_per_s >= 0) || !std::isfinite(spec.sessions_per_s)) {
    return bad(fmt::format("--sessions-per-s {}: give a positive rate (0: all at once)",
                           spec.sessions_per_s));
  }
  sim::SimConfig sc = base;
  std::string dataset = spec.dataset;
  if (dataset.rfind("table2:", 0) == 0) dataset = dataset.substr(7);  // table2:64k -> 64k
  sc.dataset = dataset;
  const bool timestamped = sim::is_timestamped_trace(dataset);
  if (timestamped && spec.sessions_per_s > 0) {
    return bad("--sessions-per-s: a mooncake: trace arrives at its own timestamps; scale them "
               "with --time-scale instead");
  }
  sc.append_scale *= spec.length_scale;
  sc.gen_scale *= spec.length_scale;
  sc.think_time = spec.think_time_scale > 0;
  sc.think_time_scale = spec.think_time_scale;
  sc.online = sim::OnlineConfig{};
  sc.online.time_scale = spec.time_scale;
  sc.agents = spec.sessions;
  if (spec.sessions_per_s > 0) {
    // Poisson arrivals until well past the expected last one; the first `sessions` are kept.
    sc.online.aps = spec.sessions_per_s;
    sc.online.duration_s = 20.0 * (spec.sessions + 10) / spec.sessions_per_s;
  }
  sc.fit_ep_groups();
  DP_RETURN_IF_ERROR(sc.validate());
  TraceReplay t;
  t.dataset = spec.dataset;
  DP_ASSIGN_OR_RETURN(t.plans, sim::build_agents(sc));
  if (static_cast<int>(t.plans.size()) > spec.sessions) t.plans.resize(static_cast<size_t>(spec.sessions));
  if (spec.max_turns < 0) return bad(fmt::format("--turns {}: give at least 1", spec.max_turns));
  for (sim::AgentPlan& p : t.plans) {
    if (spec.max_turns > 0 && p.turns.size() > static_cast<size_t>(spec.max_turns)) {
      p.turns.resize(static_cast<size_t>(spec.max_turns));
    }
    if (p.think_s.size() > p.turns.size()) p.think_s.resize(p.turns.size());
  }
  if (timestamped && !t.plans.empty()) {  // the first request at t = 0
    const double first = t.plans.front().start_s;
    for (sim::AgentPlan& p : t.plans) p.start_s -= first;
  }
  if (spec.sim) {
    sc.online = sim::OnlineConfig{};
    t.sim = sc;
  }
  t.time_dilation = time_dilation;
  t.length_scale = spec.length_scale;
  t.think_time_scale = spec.think_time_scale;
  t.time_scale = spec.time_scale;
  t.sessions_per_s = spec.sessions_per_s;
  return t;
}

double trace_hit_ratio(const std::vector<sim::AgentPlan>& plans) {
  workload::RequestTrace content;  // the content-addressed requests, for the trace's own rule
  double hit = 0, prompt = 0;
  for (const sim::AgentPlan& p : plans) {
    if (!p.prefix_blocks.empty()) {
      workload::TraceRequest r;
      r.input_tokens = p.turns.at(0).prompt_tokens;
      r.block_ids = p.prefix_blocks;
      for (uint32_t id : r.block_ids) content.distinct_blocks = std::max(content.distinct_blocks, id + 1);
      content.block_tokens = p.prefix_block_tokens;
      content.requests.push_back(std::move(r));
      continue;
    }
    for (const workload::TurnShape& t : p.turns) {
      hit += static_cast<double>(t.context_tokens);
      prompt += static_cast<double>(t.prompt_tokens);
    }
  }
  if (!content.requests.empty()) return workload::static_prefix_hit_ratio(content);
  return prompt > 0 ? hit / prompt : 0.0;
}

namespace {

// The successful requests' samples, in completion order (the run's statistics and vLLM's file).
struct VllmSamples {
  std::vector<double> ttft, tpot, itl, e2el;
  int64_t completed = 0, failed = 0, input_tokens = 0, output_tokens = 0;
};

VllmSamples vllm_samples(const ServeBenchRun& run) {
  VllmSamples v;
  for (const RequestRecord& r : run.records) {
    if (!r.ok) {
      ++v.failed;
      continue;
    }
    ++v.completed;
    v.input_tokens += r.input_len;
    v.output_tokens += r.output_len;
    v.ttft.push_back(r.ttft_s);
    v.e2el.push_back(r.e2e_s);
    v.itl.insert(v.itl.end(), r.itl_s.begin(), r.itl_s.end());
    if (r.has_tpot()) v.tpot.push_back(r.tpot_s());
  }
  return v;
}

// The run's latencies, per round and goodput, from its records.
void finish_records(ServeBenchRun& run, const GoodputSlo& slo) {
  VllmSamples v = vllm_samples(run);
  run.ttft_s = summarize(std::move(v.ttft));
  run.tpot_s = summarize(std::move(v.tpot));
  run.e2e_s = summarize(std::move(v.e2el));
  std::vector<double> first, later;  // the sessions' first turns (nothing cached) and the rest
  std::vector<double> hit;           // the turns with a cached prefix
  for (const RequestRecord& r : run.records) {
    if (r.ok) (r.round == 0 ? first : later).push_back(r.ttft_s);
    if (r.ok && r.cached_tokens > 0) hit.push_back(r.ttft_s);
  }
  run.ttft_first_turn_s = summarize(std::move(first));
  run.ttft_later_turns_s = summarize(std::move(later));
  run.ttft_hit_turns_s = summarize(std::move(hit));
  std::map<int, std::vector<double>> ttft;
  std::map<int, std::pair<int64_t, int64_t>> tokens;  // cached, prompt
  std::map<int, int64_t> requests;
  for (const RequestRecord& r : run.records) {
    requests[r.round] += 1;
    if (!r.ok) continue;
    ttft[r.round].push_back(r.ttft_s);
    tokens[r.round].first += r.cached_tokens;
    tokens[r.round].second += r.input_len;
  }
  run.per_round.clear();
  for (const auto& [round, n] : requests) {
    ServeBenchRun::Round x;
    x.round = round;
    x.requests = n;
    x.ttft_s = summarize(ttft[round]);
    const auto [cached, prompt] = tokens[round];
    x.hit_ratio = prompt > 0 ? static_cast<double>(cached) / static_cast<double>(prompt) : 0.0;
    run.per_round.push_back(x);
  }
  if (!slo.given()) return;
  run.goodput_slo = slo;
  run.good_requests = 0;
  for (const RequestRecord& r : run.records) {
    if (!r.ok) continue;
    const double tpot_ms = r.has_tpot() ? r.tpot_s() * 1e3 : 0;
    const bool good = (slo.ttft_ms <= 0 || r.ttft_s * 1e3 <= slo.ttft_ms) &&
                      (slo.tpot_ms <= 0 || tpot_ms <= slo.tpot_ms) &&
                      (slo.e2el_ms <= 0 || r.e2e_s * 1e3 <= slo.e2el_ms);
    run.good_requests += good ? 1 : 0;
  }
  run.request_goodput =
      run.duration_s > 0 ? static_cast<double>(run.good_requests) / run.duration_s : 0.0;
}

}  // namespace

Json ServeBenchRun::to_json() const {
  Json paths = Json::object();
  for (const auto& [p, n] : read_paths) paths[p] = n;
  Json digests = Json::array();
  for (uint64_t d : session_digests) digests.push_back(fmt::format("{:016x}", d));
  Json j = {{"mode", mode},
          {"requests", requests},
          {"errors", errors},
          {"duration_s", duration_s},
          {"output_tokens", output_tokens},
          {"output_tokens_per_s", output_tokens_per_s},
          {"requests_per_s", requests_per_s},
          {"prompt_tokens", prompt_tokens},
          {"cached_tokens", cached_tokens},
          {"storage_read_bytes", storage_read_bytes},
          {"ttft_s", sim::latency_json(ttft_s)},
          {"tpot_s", sim::latency_json(tpot_s)},
          {"e2e_s", sim::latency_json(e2e_s)},
          {"ttft_first_turn_s", sim::latency_json(ttft_first_turn_s)},
          {"ttft_later_turns_s", sim::latency_json(ttft_later_turns_s)},
          {"ttft_hit_turns_s", sim::latency_json(ttft_hit_turns_s)},
          {"read_paths", paths},
          {"error_samples", error_samples},
          {"session_digests", digests}};
  Json rounds = Json::array();
  for (const Round& r : per_round) {
    rounds.push_back({{"round", r.round},
                      {"requests", r.requests},
                      {"ttft_s", {{"p50", r.ttft_s.p50}, {"p99", r.ttft_s.p99}}},
                      {"hit_ratio", r.hit_ratio}});
  }
  j["per_round"] = rounds;
  j["hit_ratio"] = prompt_tokens > 0 ? static_cast<double>(cached_tokens) / static_cast<double>(prompt_tokens) : 0.0;
  j["output_len_mismatches"] = output_len_mismatches;
  if (sim) {
    // Side by side in emulated seconds: the live figures over the cluster's time dilation.
    const double d = time_dilation > 0 ? time_dilation : 1.0;
    const double sim_tps = sim->jct_s > 0 ? sim_output_tokens / sim->jct_s : 0.0;
    const double live_duration = duration_s / d;
    const double live_tps = live_duration > 0 ? static_cast<double>(output_tokens) / live_duration : 0.0;
    j["sim"] = {
        {"mode", sim->mode},
        {"ttft_s", {{"p50", sim->ttft.p50}, {"p99", sim->ttft.p99}}},
        {"tpot_s", {{"p50", sim->tpot.p50}, {"p99", sim->tpot.p99}}},
        {"jct_s", sim->jct_s},
        {"output_tokens_per_s", sim_tps},
        {"hit_ratio", sim->hit_ratio},
        {"storage_read_bytes", sim->storage_read_bytes},
        {"pe_path_turns", sim->pe_path_turns},
        {"de_path_turns", sim->de_path_turns},
        {"live_emulated",
         {{"time_dilation", d},
          {"ttft_s", {{"p50", ttft_s.p50 / d}, {"p99", ttft_s.p99 / d}}},
          {"tpot_s", {{"p50", tpot_s.p50 / d}, {"p99", tpot_s.p99 / d}}},
          {"duration_s", live_duration},
          {"output_tokens_per_s", live_tps}}}};
  } else {
    j["sim"] = nullptr;
  }
  if (goodput_slo) {
    Json slo = Json::object();
    if (goodput_slo->ttft_ms > 0) slo["ttft_ms"] = goodput_slo->ttft_ms;
    if (goodput_slo->tpot_ms > 0) slo["tpot_ms"] = goodput_slo->tpot_ms;
    if (goodput_slo->e2el_ms > 0) slo["e2el_ms"] = goodput_slo->e2el_ms;
    j["goodput"] = {{"slo", slo},
                    {"good_requests", good_requests},
                    {"request_goodput", request_goodput}};
  } else {
    j["goodput"] = nullptr;
  }
  if (direct) {
    const DirectRun& d = *direct;
    j["direct"] = {{"requests", d.requests},
                   {"errors", d.errors},
                   {"prompt_mismatches", d.prompt_mismatches},
                   {"ttft_s", sim::latency_json(d.ttft_s)},
                   {"tpot_s", sim::latency_json(d.tpot_s)},
                   {"e2e_s", sim::latency_json(d.e2e_s)},
                   {"parse_s", sim::latency_json(d.parse_s)},
                   {"error_samples", d.error_samples}};
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    j["api_overhead"] = {{"ttft_p50_ms", (ttft_s.p50 - d.ttft_s.p50) * 1e3},
                         {"ttft_p99_ratio", ratio(ttft_s.p99, d.ttft_s.p99)},
                         {"tpot_p50_ms", (tpot_s.p50 - d.tpot_s.p50) * 1e3},
                         {"tpot_p99_ratio", ratio(tpot_s.p99, d.tpot_s.p99)},
                         {"e2e_p50_ms", (e2e_s.p50 - d.e2e_s.p50) * 1e3},
                         {"ttft_paired_p50_ms", d.ttft_paired_diff_s.p50 * 1e3},
                         {"tpot_paired_p50_ms", d.tpot_paired_diff_s.p50 * 1e3}};
  }
  return j;
}

Result<ServeBenchRun> run_serve_bench(const serve::ServeConfig& config,
                                      serve::ServeMode mode,
                                      const ServeBenchOptions& o) {
  const TraceReplay* trace = o.trace ? &*o.trace : nullptr;
  if (trace != nullptr) {
    if (trace->plans.empty()) return Status::invalid_argument("the trace gives no session");
    if (o.direct) {
      return Status::invalid_argument(
          "--direct compares the synthetic chat sessions; drop it or --dataset");
    }
  } else if (o.sessions < 1 || o.turns < 1) {
    return Status::invalid_argument(fmt::format(
        "--sessions {} --turns {}: give at least one session of one turn", o.sessions, o.turns));
  }
  if (trace == nullptr && (o.context_tokens < 1 || o.append_tokens < 1 || o.max_tokens < 1)) {
    return Status::invalid_argument(fmt::format(
        "--context-tokens {} --append-tokens {} --max-tokens {}: each must be at least 1",
        o.context_tokens, o.append_tokens, o.max_tokens));
  }
  const int sessions = trace ? static_cast<int>(trace->plans.size()) : o.sessions;
  auto turns_of = [&](int s) {
    return trace ? static_cast<int>(trace->plans[static_cast<size_t>(s)].turns.size()) : o.turns;
  };
  const int concurrency = o.concurrency > 0 ? std::min(o.concurrency, sessions) : sessions;
  ServeBenchRun run;
  const std::string mode_name(serve::serve_mode_name(mode));
  const double tier_bytes = o.dram_tier_bytes >= 0 ? o.dram_tier_bytes : config.cache.de_dram_bytes;
  run.mode = mode_name + (tier_bytes > 0 ? "+tier" : "");
  run.time_dilation = config.engine.time_dilation;
  run.completions = trace != nullptr;

  serve::ClusterOptions co;
  co.config = config;
  co.config.scheduler.mode = mode;
  co.config.cache.de_dram_bytes = tier_bytes;
  co.config.scheduler.port = 0;  // its own nodes only
  if (!o.node_program.empty()) {
    co.node_program = o.node_program;
    co.node_args = o.node_args;
  }
  DP_ASSIGN_OR_RETURN(FreshStore store,
                      FreshStore::make(config.engine.data_paths, "bench-serve-" + run.mode));
  co.config.engine.data_paths = store.paths();
  co.ready_timeout = config.scheduler.register_timeout;
  // The scheduler prices beta at the trace's typical turn, as the simulator beside it does.
  if (trace != nullptr) co.config.typical_turn = sim::typical_turn(trace->plans);
  DP_ASSIGN_OR_RETURN(auto cluster, serve::Cluster::start(co));

  serve::ApiOptions api;
  api.host = "127.0.0.1";
  api.port = 0;
  api.max_concurrent = concurrency + 8;
  // Room for the longest conversation: every message, its template tokens, every reply.
  api.max_model_len =
      o.context_tokens + static_cast<int64_t>(o.turns) * (o.append_tokens + o.max_tokens + 16) +
      64;
  if (trace != nullptr) {  // the longest turn of the trace
    api.max_model_len = 64;
    for (const sim::AgentPlan& p : trace->plans) {
      for (const workload::TurnShape& t : p.turns) {
        api.max_model_len = std::max(api.max_model_len, t.prompt_tokens + t.gen_tokens + 64);
      }
    }
  }
  api.default_max_tokens = o.max_tokens;
  api.max_body_bytes = std::max<size_t>(api.max_body_bytes,
                                        static_cast<size_t>(api.max_model_len) * 4 + (1u << 20));
  DP_ASSIGN_OR_RETURN(api.tokenizer, serve::tokenizer_for(co.config.engine));
  const std::shared_ptr<const serve::Tokenizer> tokenizer = api.tokenizer;
  DP_ASSIGN_OR_RETURN(auto http, serve::HttpApi::start(api, cluster->service()));
  const int port = http->port();
  const std::string model = http->model_name();
  const serve::CompletionLimits limits{model, api.max_model_len, api.default_max_tokens};
  std::vector<double> direct_ttft, direct_tpot, direct_e2e, direct_parse;
  std::vector<double> paired_ttft, paired_tpot;  // per request: the API's minus the direct one
  if (o.direct) run.direct.emplace();

  // Guards run's samples and the progress calls (plain locals: the analysis cannot name them).
  Mutex mu;
  run.session_digests.assign(static_cast<size_t>(sessions), 0xcbf29ce484222325ull);
  std::atomic<int> next_session{0};
  int64_t done = 0;
  int64_t total = 0;
  for (int s = 0; s < sessions; ++s) total += turns_of(s);
  const auto start = Clock::now();
  // One request's outcome into the run (under mu).
  auto account = [&](int s, int t, const Exchange& x) {
    RequestRecord rec;
    rec.ok = x.ok;
    rec.round = t;
    rec.start_s = seconds(x.sent - start);
    rec.cached_tokens = x.cached_tokens;
    rec.read_path = x.read_path;
    rec.input_len = x.prompt_tokens;
    rec.output_len = x.completion_tokens;
    rec.ttft_s = x.ttft_s;
    rec.e2e_s = x.e2e_s;
    rec.itl_s = x.itl_s;
    rec.generated_text = x.reply;
    rec.error = x.error;
    run.records.push_back(std::move(rec));
    ++done;
    if (!x.ok) {
      ++run.errors;
      if (run.error_samples.size() < 5) {
        run.error_samples.push_back(fmt::format("session {} turn {}: {}", s, t, x.error));
      }
    } else {
      ++run.requests;
      run.output_tokens += x.completion_tokens;
      run.prompt_tokens += x.prompt_tokens;
      run.cached_tokens += x.cached_tokens;
      run.storage_read_bytes += x.storage_read_bytes;
      run.read_paths[x.read_path.empty() ? "?" : x.read_path] += 1;
      auto& digest = run.session_digests[static_cast<size_t>(s)];
      digest = fnv1a(digest, x.reply);
      digest = fnv1a(digest, std::string_view("\x1e", 1));
    }
    if (o.progress) o.progress(done, total, seconds(Clock::now() - start));
  };
  const Duration timeout = config.engine.request_timeout * 4;
  auto client = [&] {
    httplib::Client cli("127.0.0.1", port);
    cli.set_keep_alive(true);
    cli.set_tcp_nodelay(true);  // as curl and the SDKs: no Nagle wait on a request's body
    cli.set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(timeout));
    cli.set_write_timeout(std::chrono::seconds(30));
    for (int s; (s = next_session.fetch_add(1)) < o.sessions;) {
      Json messages = Json::array();
      serve::ReplyMemo memo(static_cast<size_t>(o.turns) + 1);  // this session's replies
      for (int t = 0; t < o.turns; ++t) {
        const Json body = turn_body(model, messages, o.seed, static_cast<uint64_t>(s), t,
                                    o.context_tokens, o.append_tokens, o.max_tokens);
        Exchange x = post_chat(cli, body);
        std::optional<DirectExchange> d;
        if (o.direct && x.ok) {
          d = ask_direct(cluster->service(), *tokenizer, limits, body, x.completion_tokens, memo);
          if (d->ok) memo.remember(d->prompt, x.reply, d->output);
        }
        MutexLock lock(mu);
        account(s, t, x);
        if (d) {
          DirectRun& dr = *run.direct;
          if (!d->ok) {
            ++dr.errors;
            if (dr.error_samples.size() < 5) {
              dr.error_samples.push_back(fmt::format("session {} turn {}: {}", s, t, d->error));
            }
          } else {
            ++dr.requests;
            if (d->prompt_tokens != x.prompt_tokens) ++dr.prompt_mismatches;
            direct_ttft.push_back(d->ttft_s);
            direct_parse.push_back(d->parse_s);
            paired_ttft.push_back(x.ttft_s - d->ttft_s);
            direct_e2e.push_back(d->e2e_s);
            // The same definition on both sides: the API's request as recorded, and this one.
            const RequestRecord& api_side = run.records.back();
            RequestRecord direct_side;
            direct_side.output_len = d->completion_tokens;
            direct_side.ttft_s = d->ttft_s;
            direct_side.e2e_s = d->e2e_s;
            if (direct_side.has_tpot() && api_side.has_tpot()) {
              direct_tpot.push_back(direct_side.tpot_s());
              paired_tpot.push_back(api_side.tpot_s() - direct_side.tpot_s());
            }
          }
        }
        if (!x.ok) break;  // the conversation cannot go on without its reply
        messages.push_back({{"role", "assistant"}, {"content", x.reply}});
      }
    }
  };
  // A trace's sessions: each at its start time, its turns after their think times, as
  // /v1/completions requests of the trace's lengths (TraceReplay).
  auto trace_client = [&] {
    httplib::Client cli("127.0.0.1", port);
    cli.set_keep_alive(true);
    cli.set_tcp_nodelay(true);
    cli.set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(timeout));
    cli.set_write_timeout(std::chrono::seconds(30));
    auto real = [&](double emulated_s) {
      return std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(emulated_s * trace->time_dilation));
    };
    for (int s; (s = next_session.fetch_add(1)) < sessions;) {
      const sim::AgentPlan& plan = trace->plans[static_cast<size_t>(s)];
      std::this_thread::sleep_until(start + real(plan.start_s));
      TracePrompts prompts(plan, o.seed, static_cast<uint64_t>(s));
      for (int t = 0; t < turns_of(s); ++t) {
        const workload::TurnShape& shape = plan.turns[static_cast<size_t>(t)];
        if (static_cast<size_t>(t) < plan.think_s.size() && plan.think_s[static_cast<size_t>(t)] > 0) {
          std::this_thread::sleep_for(real(plan.think_s[static_cast<size_t>(t)]));
        }
        const Json body = {{"model", model},
                           {"prompt", prompts.next(t)},
                           {"max_tokens", shape.gen_tokens},
                           {"ignore_eos", true},
                           {"temperature", 0},
                           {"stream", true},
                           {"stream_options", {{"include_usage", true}}}};
        const Exchange x = post_stream(cli, "/v1/completions", body);
        MutexLock lock(mu);
        account(s, t, x);
        if (x.ok && x.completion_tokens != shape.gen_tokens) ++run.output_len_mismatches;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < concurrency; ++i) {
    if (trace != nullptr) {
      threads.emplace_back(trace_client);
    } else {
      threads.emplace_back(client);
    }
  }
  for (auto& t : threads) t.join();
  run.duration_s = seconds(Clock::now() - start);
  finish_records(run, o.goodput);
  if (trace != nullptr && trace->sim) {
    // The simulator on the same plans, in this mode, all the way through (no online stop rule:
    // the live run replays every session).
    sim::SimConfig sc = *trace->sim;
    DP_ASSIGN_OR_RETURN(sc.scheduler.mode, sim::parse_mode(mode_name));
    sc.de_dram_bytes = tier_bytes;
    sc.online = sim::OnlineConfig{};
    for (const sim::AgentPlan& p : trace->plans) {
      for (const workload::TurnShape& t : p.turns) run.sim_output_tokens += static_cast<double>(t.gen_tokens);
    }
    DP_ASSIGN_OR_RETURN(run.sim, sim::simulate(sc, trace->plans, {}));
  }
  if (run.direct) {
    run.direct->ttft_s = summarize(std::move(direct_ttft));
    run.direct->tpot_s = summarize(std::move(direct_tpot));
    run.direct->e2e_s = summarize(std::move(direct_e2e));
    run.direct->parse_s = summarize(std::move(direct_parse));
    run.direct->ttft_paired_diff_s = summarize(std::move(paired_ttft));
    run.direct->tpot_paired_diff_s = summarize(std::move(paired_tpot));
  }
  run.output_tokens_per_s = run.duration_s > 0 ? run.output_tokens / run.duration_s : 0;
  run.requests_per_s = run.duration_s > 0 ? run.requests / run.duration_s : 0;
  http.reset();
  cluster.reset();
  return run;
}

namespace {

// numpy's mean, median, std (ddof 0) and percentile (linear), in milliseconds.
void vllm_stats(Json& j, const std::string& name, const std::vector<double>& seconds_samples) {
  double mean_s = 0, var = 0;
  for (double v : seconds_samples) mean_s += v;
  const auto n = static_cast<double>(seconds_samples.size());
  if (n > 0) mean_s /= n;
  for (double v : seconds_samples) var += (v - mean_s) * (v - mean_s);
  j["mean_" + name + "_ms"] = mean_s * 1e3;
  j["median_" + name + "_ms"] = percentile(seconds_samples, 0.5) * 1e3;
  j["std_" + name + "_ms"] = (n > 0 ? std::sqrt(var / n) : 0.0) * 1e3;
  j["p99_" + name + "_ms"] = percentile(seconds_samples, 0.99) * 1e3;
}

}  // namespace

Json vllm_result_json(const ServeBenchRun& run, const VllmResultSetup& setup) {
  const VllmSamples v = vllm_samples(run);
  const double duration = run.duration_s;
  auto per_s = [duration](double x) { return duration > 0 ? x / duration : 0.0; };
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(date, sizeof(date), "%Y%m%d-%H%M%S", &tm);
  Json j;
  j["date"] = date;
  j["endpoint_type"] = run.completions ? "openai" : "openai-chat";
  j["backend"] = run.completions ? "openai" : "openai-chat";
  j["label"] = nullptr;
  j["model_id"] = setup.model_id;
  j["tokenizer_id"] = setup.tokenizer_id;
  j["num_prompts"] = static_cast<int64_t>(run.records.size());
  j["request_rate"] = "inf";  // closed loop: each client sends its next turn when one ends
  j["burstiness"] = 1.0;
  j["max_concurrency"] = setup.max_concurrency;
  j["dualpath_mode"] = run.mode;  // ours: which run of `bench serve` this is
  j["duration"] = duration;
  j["completed"] = v.completed;
  j["failed"] = v.failed;
  j["total_input_tokens"] = v.input_tokens;
  j["total_output_tokens"] = v.output_tokens;
  j["request_throughput"] = per_s(static_cast<double>(v.completed));
  if (run.goodput_slo) {
    j["request_goodput"] = run.request_goodput;
  } else {
    j["request_goodput"] = nullptr;  // no --goodput SLO given
  }
  j["output_throughput"] = per_s(static_cast<double>(v.output_tokens));
  j["total_token_throughput"] = per_s(static_cast<double>(v.input_tokens + v.output_tokens));
  Json input_lens = Json::array(), output_lens = Json::array(), ttfts = Json::array(),
       itls = Json::array(), latencies = Json::array(), start_times = Json::array(),
       queue_times = Json::array(), texts = Json::array(), errors = Json::array();
  // Ours, per request beside vLLM's lists: the session turn, cached tokens and read path.
  Json rounds = Json::array(), cached = Json::array(), paths = Json::array();
  // The peak of requests in flight, and of output tokens per whole second (a request's tokens
  // spread evenly over its chunks: the stream does not say how many tokens a chunk carried).
  std::vector<std::pair<double, int>> edges;
  std::map<int64_t, double> tokens_by_second;
  for (const RequestRecord& r : run.records) {
    input_lens.push_back(r.input_len);
    output_lens.push_back(r.ok ? r.output_len : 0);
    ttfts.push_back(r.ok ? r.ttft_s : 0.0);
    itls.push_back(r.itl_s);
    latencies.push_back(r.e2e_s);
    start_times.push_back(r.start_s);
    queue_times.push_back(0.0);  // no client-side queue: a client sends when its turn comes
    texts.push_back(r.generated_text);
    errors.push_back(r.error);
    rounds.push_back(r.round);
    cached.push_back(r.ok ? r.cached_tokens : 0);
    paths.push_back(r.read_path);
    edges.push_back({r.start_s, +1});
    edges.push_back({r.start_s + r.e2e_s, -1});
    if (r.ok && r.output_len > 0) {
      const double per_chunk =
          static_cast<double>(r.output_len) / static_cast<double>(r.itl_s.size() + 1);
      double t = r.start_s + r.ttft_s;
      tokens_by_second[static_cast<int64_t>(t)] += per_chunk;
      for (double gap : r.itl_s) {
        t += gap;
        tokens_by_second[static_cast<int64_t>(t)] += per_chunk;
      }
    }
  }
  j["input_lens"] = input_lens;
  j["output_lens"] = output_lens;
  j["ttfts"] = ttfts;
  j["itls"] = itls;
  j["latencies"] = latencies;
  j["start_times"] = start_times;
  j["queue_times"] = queue_times;
  j["generated_texts"] = texts;
  j["errors"] = errors;
  j["dualpath_rounds"] = rounds;
  j["dualpath_cached_tokens"] = cached;
  j["dualpath_read_paths"] = paths;
  double max_tokens_per_s = 0;
  for (const auto& [second, tokens] : tokens_by_second) {
    max_tokens_per_s = std::max(max_tokens_per_s, tokens);
  }
  std::sort(edges.begin(), edges.end());
  int in_flight = 0, peak = 0;
  for (const auto& [t, d] : edges) peak = std::max(peak, in_flight += d);
  j["max_output_tokens_per_s"] = max_tokens_per_s;
  j["max_concurrent_requests"] = peak;
  vllm_stats(j, "ttft", v.ttft);
  vllm_stats(j, "tpot", v.tpot);
  vllm_stats(j, "itl", v.itl);
  vllm_stats(j, "e2el", v.e2el);
  return j;
}

std::string vllm_result_block(const ServeBenchRun& run, const Json& j) {
  auto line = [](std::string_view name, double v, int decimals) {
    return fmt::format("{:<40}{:<10.{}f}\n", name, v, decimals);
  };
  auto head = [](std::string_view title) { return fmt::format("{:-^50}\n", title); };
  std::string out = fmt::format("{:=^50}\n", fmt::format(" Serving Benchmark Result ({}) ", run.mode));
  out += fmt::format("{:<40}{:<10}\n", "Successful requests:", j["completed"].get<int64_t>());
  out += fmt::format("{:<40}{:<10}\n", "Failed requests:", j["failed"].get<int64_t>());
  out += line("Benchmark duration (s):", j["duration"].get<double>(), 2);
  out += fmt::format("{:<40}{:<10}\n", "Total input tokens:", j["total_input_tokens"].get<int64_t>());
  out += fmt::format("{:<40}{:<10}\n", "Total generated tokens:",
                     j["total_output_tokens"].get<int64_t>());
  out += line("Request throughput (req/s):", j["request_throughput"].get<double>(), 2);
  if (run.goodput_slo) out += line("Request goodput (req/s):", run.request_goodput, 2);
  out += line("Output token throughput (tok/s):", j["output_throughput"].get<double>(), 2);
  out += line("Peak output token throughput (tok/s):", j["max_output_tokens_per_s"].get<double>(), 2);
  out += fmt::format("{:<40}{:<10}\n", "Peak concurrent requests:",
                     j["max_concurrent_requests"].get<int>());
  out += line("Total Token throughput (tok/s):", j["total_token_throughput"].get<double>(), 2);
  const std::pair<const char*, const char*> families[] = {
      {"ttft", "Time to First Token"},
      {"tpot", "Time per Output Token (excl. 1st token)"},
      {"itl", "Inter-token Latency"},
      {"e2el", "End-to-end Latency"}};
  for (const auto& [key, title] : families) {
    std::string upper(key);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    out += head(title);
    out += line(fmt::format("Mean {} (ms):", upper), j["mean_" + std::string(key) + "_ms"].get<double>(), 2);
    out += line(fmt::format("Median {} (ms):", upper), j["median_" + std::string(key) + "_ms"].get<double>(), 2);
    out += line(fmt::format("P99 {} (ms):", upper), j["p99_" + std::string(key) + "_ms"].get<double>(), 2);
  }
  // Ours: the turns that hit (every later turn of a session) apart, and where the hits were read.
  out += head("DualPath");
  out += line("Later turns' TTFT p50 (ms):", run.ttft_later_turns_s.p50 * 1e3, 2);
  out += line("Later turns' TTFT p99 (ms):", run.ttft_later_turns_s.p99 * 1e3, 2);
  out += line("Cached prompt tokens (%):",
              run.prompt_tokens > 0 ? 100.0 * static_cast<double>(run.cached_tokens) /
                                          static_cast<double>(run.prompt_tokens)
                                    : 0.0,
              1);
  out += line("Storage read (MB):", static_cast<double>(run.storage_read_bytes) / 1e6, 1);
  std::string paths;
  for (const auto& [p, n] : run.read_paths) paths += fmt::format("{} {} ", p, n);
  out += fmt::format("{:<40}{}\n", "Read paths (requests):", paths);
  out += std::string(50, '=') + "\n";
  return out;
}

std::string trace_vs_sim_table(const std::vector<ServeBenchRun>& runs, double trace_hits) {
  std::string out = fmt::format(
      "live beside the simulator (same sessions; emulated seconds: live real seconds / time "
      "dilation {:g})\n{:<24}",
      runs.empty() ? 1.0 : runs[0].time_dilation, "");
  for (const ServeBenchRun& r : runs) out += fmt::format("{:>15}{:>11}", r.mode + " live", "sim");
  out += "\n";
  auto row = [&](const char* name, auto live, auto simulated, const char* f) {
    out += fmt::format("{:<24}", name);
    for (const ServeBenchRun& r : runs) {
      const double d = r.time_dilation > 0 ? r.time_dilation : 1.0;
      out += fmt::format("{:>15}", fmt::format(fmt::runtime(f), live(r, d)));
      out += r.sim ? fmt::format(fmt::runtime(f), simulated(*r.sim, r)) : fmt::format("{:>11}", "-");
    }
    out += "\n";
  };
  using R = const ServeBenchRun&;
  using S = const sim::SimResult&;
  row("TTFT p50 (s)", [](R r, double d) { return r.ttft_s.p50 / d; },
      [](S s, R) { return s.ttft.p50; }, "{:>11.3f}");
  row("TTFT p99 (s)", [](R r, double d) { return r.ttft_s.p99 / d; },
      [](S s, R) { return s.ttft.p99; }, "{:>11.3f}");
  row("TPOT p50 (ms)", [](R r, double d) { return r.tpot_s.p50 / d * 1e3; },
      [](S s, R) { return s.tpot.p50 * 1e3; }, "{:>11.1f}");
  row("output tokens/s", [](R r, double d) {
        return r.duration_s > 0 ? static_cast<double>(r.output_tokens) / (r.duration_s / d) : 0.0;
      },
      [](S s, R r) { return s.jct_s > 0 ? r.sim_output_tokens / s.jct_s : 0.0; }, "{:>11.1f}");
  row("duration / JCT (s)", [](R r, double d) { return r.duration_s / d; },
      [](S s, R) { return s.jct_s; }, "{:>11.1f}");
  row("hit ratio", [](R r, double) {
        return r.prompt_tokens > 0 ? static_cast<double>(r.cached_tokens) / static_cast<double>(r.prompt_tokens) : 0.0;
      },
      [](S s, R) { return s.hit_ratio; }, "{:>11.3f}");
  out += fmt::format("the trace's hit ratio (kept context / prompt): {:.3f}\n", trace_hits);
  for (const ServeBenchRun& r : runs) {
    if (r.output_len_mismatches > 0) {
      out += fmt::format("{}: {} replies had another length than the trace's\n", r.mode,
                         r.output_len_mismatches);
    }
  }
  return out;
}

std::string serve_bench_table(const std::vector<ServeBenchRun>& runs) {
  if (runs.empty()) return {};
  std::string out = fmt::format("{:<22}", "");
  for (const auto& r : runs) out += fmt::format("{:>12}", r.mode);
  for (size_t i = 1; i < runs.size(); ++i) {
    out += fmt::format("{:>16}", runs[i].mode + "/" + runs[0].mode);
  }
  out += "\n";
  auto row = [&](const char* name, auto get, const char* fmt_value, bool ratio) {
    out += fmt::format("{:<22}", name);
    for (const auto& r : runs) out += fmt::format(fmt::runtime(fmt_value), get(r));
    for (size_t i = 1; i < runs.size(); ++i) {
      const double base = static_cast<double>(get(runs[0]));
      if (ratio && base > 0) {
        out += fmt::format("{:>15.2f}x", static_cast<double>(get(runs[i])) / base);
      } else {
        out += fmt::format("{:>16}", "");
      }
    }
    out += "\n";
  };
  row("requests", [](const ServeBenchRun& r) { return r.requests; }, "{:>12}", false);
  row("errors", [](const ServeBenchRun& r) { return r.errors; }, "{:>12}", false);
  row("duration (s)", [](const ServeBenchRun& r) { return r.duration_s; }, "{:>12.1f}", true);
  row("output tokens/s", [](const ServeBenchRun& r) { return r.output_tokens_per_s; },
      "{:>12.1f}", true);
  row("requests/s", [](const ServeBenchRun& r) { return r.requests_per_s; }, "{:>12.2f}", true);
  row("TTFT p50 (ms)", [](const ServeBenchRun& r) { return r.ttft_s.p50 * 1e3; }, "{:>12.1f}",
      true);
  row("TTFT p99 (ms)", [](const ServeBenchRun& r) { return r.ttft_s.p99 * 1e3; }, "{:>12.1f}",
      true);
  row("  first turns p50", [](const ServeBenchRun& r) { return r.ttft_first_turn_s.p50 * 1e3; },
      "{:>12.1f}", true);
  row("  later turns p50", [](const ServeBenchRun& r) { return r.ttft_later_turns_s.p50 * 1e3; },
      "{:>12.1f}", true);
  row("  later turns p99", [](const ServeBenchRun& r) { return r.ttft_later_turns_s.p99 * 1e3; },
      "{:>12.1f}", true);
  row("  hit turns p50", [](const ServeBenchRun& r) { return r.ttft_hit_turns_s.p50 * 1e3; },
      "{:>12.1f}", true);
  row("  hit turns p99", [](const ServeBenchRun& r) { return r.ttft_hit_turns_s.p99 * 1e3; },
      "{:>12.1f}", true);
  row("TPOT p50 (ms)", [](const ServeBenchRun& r) { return r.tpot_s.p50 * 1e3; }, "{:>12.2f}",
      true);
  row("TPOT p99 (ms)", [](const ServeBenchRun& r) { return r.tpot_s.p99 * 1e3; }, "{:>12.2f}",
      true);
  row("prompt tokens", [](const ServeBenchRun& r) { return r.prompt_tokens; }, "{:>12}", false);
  row("cached tokens", [](const ServeBenchRun& r) { return r.cached_tokens; }, "{:>12}", false);
  row("storage read (MB)",
      [](const ServeBenchRun& r) { return static_cast<double>(r.storage_read_bytes) / 1e6; },
      "{:>12.1f}", false);
  for (const auto& r : runs) {
    std::string p;
    for (const auto& [k, n] : r.read_paths) p += fmt::format(" {} {},", k, n);
    if (!p.empty()) p.pop_back();
    out += fmt::format("{:<22}{}:{}\n", "read paths", r.mode, p);
  }
  // Per round: the first turns compute their whole prompt, later ones hit what came before.
  out += fmt::format("\n{:<10}{:>8}{:>10}{:>16}{:>16}{:>12}\n", "per round", "mode",
                     "requests", "TTFT p50 (ms)", "TTFT p99 (ms)", "hit ratio");
  for (const auto& r : runs) {
    for (const auto& x : r.per_round) {
      out += fmt::format("{:<10}{:>8}{:>10}{:>16.1f}{:>16.1f}{:>11.1f}%\n", x.round, r.mode,
                         x.requests, x.ttft_s.p50 * 1e3, x.ttft_s.p99 * 1e3, x.hit_ratio * 100);
    }
  }
  for (const auto& r : runs) {
    if (!r.goodput_slo) continue;
    out += fmt::format("goodput {}: {} of {} requests met the SLO, {:.2f} req/s\n", r.mode,
                       r.good_requests, r.requests, r.request_goodput);
  }
  // --direct: the API against the service's interface, the same requests side by side.
  for (const auto& r : runs) {
    if (!r.direct) continue;
    const DirectRun& d = *r.direct;
    out += fmt::format(
        "\n{}: the API against the service's interface ({} requests each, {} errors, {} prompt "
        "mismatches)\n{:<22}{:>12}{:>12}{:>14}\n",
        r.mode, d.requests, d.errors, d.prompt_mismatches, "", "API", "direct", "API adds");
    auto pair = [&](const char* name, double api, double direct, bool ratio) {
      out += fmt::format("{:<22}{:>12.2f}{:>12.2f}", name, api * 1e3, direct * 1e3);
      out += ratio ? fmt::format("{:>13.3f}x\n", direct > 0 ? api / direct : 0.0)
                   : fmt::format("{:>11.2f} ms\n", (api - direct) * 1e3);
    };
    pair("TTFT p50 (ms)", r.ttft_s.p50, d.ttft_s.p50, false);
    pair("TTFT p99 (ms)", r.ttft_s.p99, d.ttft_s.p99, true);
    pair("TPOT p50 (ms)", r.tpot_s.p50, d.tpot_s.p50, false);
    pair("TPOT p99 (ms)", r.tpot_s.p99, d.tpot_s.p99, true);
    pair("E2E p50 (ms)", r.e2e_s.p50, d.e2e_s.p50, false);
    out += fmt::format("{:<22}{:>12.2f}   (the API's parser and tokenizer on the body, p50)\n",
                       "  parse (ms)", d.parse_s.p50 * 1e3);
    out += fmt::format(
        "{:<22}{:>12.2f}   (per request, the API's minus the direct one: median)\n{:<22}{:>12.3f}\n",
        "paired TTFT (ms)", d.ttft_paired_diff_s.p50 * 1e3, "paired TPOT (ms)",
        d.tpot_paired_diff_s.p50 * 1e3);
  }
  return out;
}

}  // namespace dualpath::bench

namespace dualpath::bench {
namespace {

struct ProcessUsage {
  int64_t rss_kb = 0;  // VmRSS; 0 when the process is gone
  std::map<std::string, int64_t> parts_kb;  // RssAnon, RssShmem, RssFile as "anon", "shmem", "file"
  int64_t fds = 0;
};

// RSS and open descriptors of one process (pid 0: this one), from /proc.
ProcessUsage process_usage(pid_t pid) {
  const std::string base = pid == 0 ? "/proc/self" : fmt::format("/proc/{}", pid);
  ProcessUsage u;
  std::ifstream status(base + "/status");
  static const std::pair<const char*, const char*> kParts[] = {
      {"RssAnon:", "anon"}, {"RssShmem:", "shmem"}, {"RssFile:", "file"}};
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) u.rss_kb = std::strtoll(line.c_str() + 6, nullptr, 10);
    for (const auto& [field, name] : kParts) {
      const size_t n = std::strlen(field);
      if (line.compare(0, n, field) == 0) u.parts_kb[name] = std::strtoll(line.c_str() + n, nullptr, 10);
    }
  }
  std::error_code ec;
  for (std::filesystem::directory_iterator it(base + "/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++u.fds;
  }
  return u;
}

int64_t tree_bytes(const std::string& dir) {
  int64_t bytes = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code fe;
    if (it->is_regular_file(fe)) bytes += static_cast<int64_t>(it->file_size(fe));
  }
  return bytes;
}

}  // namespace

bool SoakResult::ok() const {
  return std::all_of(verdicts.begin(), verdicts.end(), [](const SoakVerdict& v) { return v.ok; });
}

Json SoakResult::to_json() const {
  Json out = {{"requests", requests}, {"errors", errors}, {"ok", ok()}};
  Json ss = Json::array();
  for (const SoakSample& s : samples) {
    ss.push_back({{"t_s", s.t_s},
                  {"requests", s.requests},
                  {"errors", s.errors},
                  {"output_tokens_per_s", s.output_tokens_per_s},
                  {"ttft_s", {{"p50", s.ttft_s.p50}, {"p99", s.ttft_s.p99}}},
                  {"rss_kb", s.rss_kb},
                  {"rss_kb_by_process", s.rss_kb_by_process},
                  {"rss_parts_kb_by_process", s.rss_parts_kb_by_process},
                  {"open_fds", s.open_fds},
                  {"store_bytes", s.store_bytes}});
  }
  out["samples"] = ss;
  Json vs = Json::array();
  for (const SoakVerdict& v : verdicts) {
    vs.push_back({{"what", v.what}, {"ok", v.ok}, {"detail", v.detail}});
  }
  out["verdicts"] = vs;
  out["error_samples"] = error_samples;
  return out;
}

std::string soak_header() {
  return fmt::format("{:>7} {:>6} {:>6} {:>9} {:>9} {:>9} {:>10} {:>6} {:>10}\n", "t s", "req",
                     "errors", "out tok/s", "TTFT p50", "TTFT p99", "RSS MiB", "fds",
                     "store MiB");
}

std::string soak_row(const SoakSample& s) {
  return fmt::format("{:>7.0f} {:>6} {:>6} {:>9.1f} {:>7.1f}ms {:>7.1f}ms {:>10.1f} {:>6} {:>10.1f}\n",
                     s.t_s, s.requests, s.errors, s.output_tokens_per_s, s.ttft_s.p50 * 1e3,
                     s.ttft_s.p99 * 1e3, static_cast<double>(s.rss_kb) / 1024.0, s.open_fds,
                     static_cast<double>(s.store_bytes) / (1 << 20));
}

Result<SoakResult> run_soak_bench(const serve::ServeConfig& config, const SoakOptions& o,
                                  const std::function<void(const SoakSample&)>& on_sample) {
  if (!(o.minutes > 0) || o.concurrency < 1 || o.turns < 1 || o.context_tokens < 1 ||
      o.append_tokens < 1 || o.max_tokens < 1 || !(o.interval_s >= 1)) {
    return Status::invalid_argument(
        "soak: --minutes > 0, --concurrency, --turns, --context-tokens, --append-tokens and "
        "--max-tokens >= 1, --interval-s >= 1");
  }
  serve::ClusterOptions co;
  co.config = config;
  co.config.scheduler.port = 0;
  if (!o.node_program.empty()) {
    co.node_program = o.node_program;
    co.node_args = o.node_args;
  }
  // A store of its own, so that its bytes can be counted.
  std::string tmpl = (std::filesystem::temp_directory_path() / "dualpath-soak.XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return Status::io_error(fmt::format("cannot make a temporary directory {}", tmpl));
  }
  struct Remove {
    std::string dir;
    ~Remove() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } remove{tmpl};
  std::vector<std::string> paths = {tmpl};
  std::optional<FreshStore> store;  // under the config's data paths, when it names some
  if (!config.engine.data_paths.empty()) {
    DP_ASSIGN_OR_RETURN(FreshStore made, FreshStore::make(config.engine.data_paths, "soak"));
    store.emplace(std::move(made));
    paths = store->paths();
  }
  co.config.engine.data_paths = paths;
  co.config.engine.store_capacity_bytes = o.store_capacity_bytes;
  co.ready_timeout = config.scheduler.register_timeout;
  DP_ASSIGN_OR_RETURN(auto cluster, serve::Cluster::start(co));
  serve::ApiOptions api;
  api.port = 0;
  api.max_concurrent = o.concurrency + 8;
  api.max_model_len =
      o.context_tokens + static_cast<int64_t>(o.turns) * (o.append_tokens + o.max_tokens + 16) + 64;
  api.default_max_tokens = o.max_tokens;
  DP_ASSIGN_OR_RETURN(auto http, serve::HttpApi::start(api, cluster->service()));
  const int port = http->port();
  const std::string model = http->model_name();

  // Guards the interval's figures and the result's totals (plain locals: the analysis cannot
  // name them).
  Mutex mu;
  SoakResult result;
  std::vector<double> ttft;
  int64_t interval_requests = 0, interval_errors = 0, interval_tokens = 0;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> next_session{0};
  const Duration timeout = config.engine.request_timeout * 4;
  auto client = [&] {
    httplib::Client cli("127.0.0.1", port);
    cli.set_keep_alive(true);
    cli.set_tcp_nodelay(true);  // as curl and the SDKs: no Nagle wait on a request's body
    cli.set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(timeout));
    while (!stop.load()) {
      const uint64_t s = next_session.fetch_add(1);
      Json messages = Json::array();
      for (int t = 0; t < o.turns && !stop.load(); ++t) {
        Exchange x = ask_turn(cli, model, messages, o.seed, s, t, o.context_tokens,
                              o.append_tokens, o.max_tokens);
        MutexLock lock(mu);
        if (!x.ok) {
          ++interval_errors;
          ++result.errors;
          if (result.error_samples.size() < 5) {
            result.error_samples.push_back(fmt::format("session {} turn {}: {}", s, t, x.error));
          }
          break;
        }
        ++interval_requests;
        ++result.requests;
        interval_tokens += x.completion_tokens;
        ttft.push_back(x.ttft_s);
        messages.push_back({{"role", "assistant"}, {"content", x.reply}});
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < o.concurrency; ++i) threads.emplace_back(client);
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(o.minutes * 60));
  auto next = start;
  serve::LocalNodes* nodes = cluster->local_nodes();
  const auto& e = config.engine;
  while (Clock::now() < end) {
    next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.interval_s));
    std::this_thread::sleep_until(std::min(next, end));
    SoakSample sample;
    sample.t_s = seconds(Clock::now() - start);
    {
      MutexLock lock(mu);
      sample.requests = interval_requests;
      sample.errors = interval_errors;
      sample.output_tokens_per_s = static_cast<double>(interval_tokens) / o.interval_s;
      sample.ttft_s = summarize(std::move(ttft));
      ttft.clear();
      interval_requests = interval_errors = interval_tokens = 0;
    }
    const ProcessUsage self = process_usage(0);
    int64_t rss = self.rss_kb, fds = self.fds;
    sample.rss_kb_by_process["scheduler"] = self.rss_kb;
    sample.rss_parts_kb_by_process["scheduler"] = self.parts_kb;
    for (int role = 0; nodes != nullptr && role < 2; ++role) {
      const auto r = role == 0 ? engine::NodeRole::kPrefill : engine::NodeRole::kDecode;
      for (int i = 0; i < (role == 0 ? e.prefill_nodes : e.decode_nodes); ++i) {
        const pid_t pid = nodes->pid(engine::NodeId{r, i});
        if (pid <= 0) continue;
        const ProcessUsage u = process_usage(pid);
        const std::string name = fmt::format("{}{}", role == 0 ? "prefill" : "decode", i);
        sample.rss_kb_by_process[name] = u.rss_kb;
        sample.rss_parts_kb_by_process[name] = u.parts_kb;
        rss += u.rss_kb;
        fds += u.fds;
      }
    }
    sample.rss_kb = rss;
    sample.open_fds = fds;
    for (const std::string& p : paths) sample.store_bytes += tree_bytes(p + "/blocks");
    result.samples.push_back(sample);
    if (on_sample) on_sample(sample);
  }
  stop = true;
  for (auto& t : threads) t.join();
  http.reset();
  cluster.reset();

  // The verdicts: against the sample at 5 minutes (or a sixth of a shorter run), the end.
  const auto& ss = result.samples;
  SoakVerdict lost{"lost requests", result.errors == 0,
                   fmt::format("{} requests, {} errors", result.requests, result.errors)};
  result.verdicts.push_back(lost);
  if (ss.size() >= 3) {
    size_t ref = 0;
    while (ref + 1 < ss.size() && ss[ref].t_s < std::min(300.0, o.minutes * 10)) ++ref;
    const SoakSample& a = ss[ref];
    const SoakSample& b = ss.back();
    std::string growth;  // per process and kind of memory, so that a drift names its source
    const auto kb_in = [](const auto& map, const std::string& key) -> int64_t {
      const auto it = map.find(key);
      return it == map.end() ? 0 : it->second;
    };
    for (const auto& [name, kb] : b.rss_kb_by_process) {
      growth += fmt::format("{}{} {:+.1f} MiB", growth.empty() ? "" : ", ", name,
                            (kb - kb_in(a.rss_kb_by_process, name)) / 1024.0);
      const auto pa = a.rss_parts_kb_by_process.find(name);
      const auto pb = b.rss_parts_kb_by_process.find(name);
      if (pa == a.rss_parts_kb_by_process.end() || pb == b.rss_parts_kb_by_process.end()) continue;
      std::string parts;  // heap (anon), shared segments (shmem), mapped files
      for (const auto& [part, after] : pb->second) {
        parts += fmt::format("{}{} {:+.1f}", parts.empty() ? "" : " ", part,
                             (after - kb_in(pa->second, part)) / 1024.0);
      }
      growth += fmt::format(" ({})", parts);
    }
    result.verdicts.push_back(
        {"rss", b.rss_kb <= a.rss_kb * 11 / 10,
         fmt::format("{:.1f} MiB at {:.0f} s, {:.1f} MiB at the end ({:+.1f} %; limit +10 %): {}",
                     a.rss_kb / 1024.0, a.t_s, b.rss_kb / 1024.0,
                     100.0 * (static_cast<double>(b.rss_kb) / std::max<int64_t>(1, a.rss_kb) - 1),
                     growth)});
    // A leak holds its descriptors: the fewest open over the last quarter of the samples (two at
    // least) grows with it. The files an in-flight read or connection holds come and go (a
    // 1-minute soak saw 102 -> 135 -> ... in one sample), so the last sample alone would flag them.
    int64_t max_fds = 0;
    for (size_t i = ref; i < ss.size(); ++i) max_fds = std::max(max_fds, ss[i].open_fds);
    const size_t late = std::min(ss.size() - ref, std::max<size_t>(2, (ss.size() - ref) / 4));
    int64_t late_fds = b.open_fds;
    for (size_t i = ss.size() - late; i < ss.size(); ++i) {
      late_fds = std::min(late_fds, ss[i].open_fds);
    }
    result.verdicts.push_back(
        {"open fds", late_fds <= a.open_fds + 4,
         fmt::format("{} at {:.0f} s, at least {} over the last {} samples ({} at the end), at "
                     "most {} in between (limit +4)",
                     a.open_fds, a.t_s, late_fds, late, b.open_fds, max_fds)});
    result.verdicts.push_back(
        {"store bytes", b.store_bytes <= o.store_capacity_bytes,
         fmt::format("{:.1f} MiB at the end, capacity {:.1f} MiB", b.store_bytes / 1048576.0,
                     o.store_capacity_bytes / 1048576.0)});
    // Throughput: the mean over the samples after the reference, first half against second.
    const size_t n = ss.size() - ref;
    double first = 0, second = 0;
    for (size_t i = 0; i < n; ++i) (i < n / 2 ? first : second) += ss[ref + i].output_tokens_per_s;
    first /= std::max<size_t>(1, n / 2);
    second /= std::max<size_t>(1, n - n / 2);
    result.verdicts.push_back(
        {"throughput", second >= 0.8 * first,
         fmt::format("{:.1f} then {:.1f} output tok/s (halves after {:.0f} s; limit -20 %)", first,
                     second, a.t_s)});
  }
  return result;
}

}  // namespace dualpath::bench
