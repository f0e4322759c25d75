#include "bench/serve_bench.h"

#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "bench/fresh_store.h"
#include "serve/cluster.h"
#include "serve/http_api.h"
#include "sim/experiment.h"

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
      const Json& delta = (*ch)[0].value("delta", Json::object());
      if (delta.is_object() && delta.contains("content") && delta["content"].is_string()) {
        if (!first_) {
          first_ = now;
          x_.ttft_s = seconds(now - sent_);
        }
        x_.reply += delta["content"].get<std::string>();
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
  std::optional<Clock::time_point> first_;
  std::string buf_, raw_;
  bool done_ = false;
  bool usage_ = false;
};

Exchange post_chat(httplib::Client& cli, const Json& body) {
  Exchange x;
  const auto sent = Clock::now();
  SseReader sse(x, sent);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.headers = {{"Accept", "text/event-stream"}};
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    sse.feed(data, n);
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent_ok = cli.send(req, res, err);
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

Json ServeBenchRun::to_json() const {
  Json paths = Json::object();
  for (const auto& [p, n] : read_paths) paths[p] = n;
  Json digests = Json::array();
  for (uint64_t d : session_digests) digests.push_back(fmt::format("{:016x}", d));
  return {{"mode", mode},
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
          {"read_paths", paths},
          {"error_samples", error_samples},
          {"session_digests", digests}};
}

Result<ServeBenchRun> run_serve_bench(const serve::ServeConfig& config,
                                      serve::ServeMode mode,
                                      const ServeBenchOptions& o) {
  if (o.sessions < 1 || o.turns < 1) {
    return Status::invalid_argument(fmt::format(
        "--sessions {} --turns {}: give at least one session of one turn", o.sessions, o.turns));
  }
  if (o.context_tokens < 1 || o.append_tokens < 1 || o.max_tokens < 1) {
    return Status::invalid_argument(fmt::format(
        "--context-tokens {} --append-tokens {} --max-tokens {}: each must be at least 1",
        o.context_tokens, o.append_tokens, o.max_tokens));
  }
  const int concurrency = o.concurrency > 0 ? std::min(o.concurrency, o.sessions) : o.sessions;
  ServeBenchRun run;
  run.mode = std::string(serve::serve_mode_name(mode));

  serve::ClusterOptions co;
  co.config = config;
  co.config.scheduler.mode = mode;
  co.config.scheduler.port = 0;  // its own nodes only
  if (!o.node_program.empty()) {
    co.node_program = o.node_program;
    co.node_args = o.node_args;
  }
  DP_ASSIGN_OR_RETURN(FreshStore store,
                      FreshStore::make(config.engine.data_paths, "bench-serve-" + run.mode));
  co.config.engine.data_paths = store.paths();
  co.ready_timeout = config.scheduler.register_timeout;
  DP_ASSIGN_OR_RETURN(auto cluster, serve::Cluster::start(co));

  serve::ApiOptions api;
  api.host = "127.0.0.1";
  api.port = 0;
  api.max_concurrent = concurrency + 8;
  // Room for the longest conversation: every message, its template tokens, every reply.
  api.max_model_len =
      o.context_tokens + static_cast<int64_t>(o.turns) * (o.append_tokens + o.max_tokens + 16) +
      64;
  api.default_max_tokens = o.max_tokens;
  api.max_body_bytes = std::max<size_t>(api.max_body_bytes,
                                        static_cast<size_t>(api.max_model_len) * 4 + (1u << 20));
  DP_ASSIGN_OR_RETURN(auto http, serve::HttpApi::start(api, cluster->service()));
  const int port = http->port();
  const std::string model = http->model_name();

  std::mutex mu;  // guards run's samples and the progress calls
  std::vector<double> ttft, tpot, e2e, ttft_first, ttft_later;
  run.session_digests.assign(static_cast<size_t>(o.sessions), 0xcbf29ce484222325ull);
  std::atomic<int> next_session{0};
  int64_t done = 0;
  const int64_t total = static_cast<int64_t>(o.sessions) * o.turns;
  const auto start = Clock::now();
  const Duration timeout = config.engine.request_timeout * 4;
  auto client = [&] {
    httplib::Client cli("127.0.0.1", port);
    cli.set_keep_alive(true);
    cli.set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(timeout));
    cli.set_write_timeout(std::chrono::seconds(30));
    for (int s; (s = next_session.fetch_add(1)) < o.sessions;) {
      Json messages = Json::array();
      for (int t = 0; t < o.turns; ++t) {
        const uint64_t text_seed = o.seed * 1'000'003 + static_cast<uint64_t>(s) * 10'007 +
                                   static_cast<uint64_t>(t);
        messages.push_back(
            {{"role", "user"},
             {"content", bench_text(text_seed, t == 0 ? o.context_tokens : o.append_tokens)}});
        const Json body = {{"model", model},
                           {"messages", messages},
                           {"max_tokens", o.max_tokens},
                           {"temperature", 0},
                           {"stream", true},
                           {"stream_options", {{"include_usage", true}}}};
        Exchange x = post_chat(cli, body);
        std::lock_guard lock(mu);
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
          ttft.push_back(x.ttft_s);
          (t == 0 ? ttft_first : ttft_later).push_back(x.ttft_s);
          e2e.push_back(x.e2e_s);
          // vLLM's definition: the time after the first token over the tokens after it (the
          // stream's end marks the last token: a modeled reply sends no text per token).
          if (x.completion_tokens > 1) {
            tpot.push_back((x.e2e_s - x.ttft_s) / static_cast<double>(x.completion_tokens - 1));
          }
          auto& digest = run.session_digests[static_cast<size_t>(s)];
          digest = fnv1a(digest, x.reply);
          digest = fnv1a(digest, std::string_view("\x1e", 1));
        }
        if (o.progress) o.progress(done, total, seconds(Clock::now() - start));
        if (!x.ok) break;  // the conversation cannot go on without its reply
        messages.push_back({{"role", "assistant"}, {"content", x.reply}});
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < concurrency; ++i) threads.emplace_back(client);
  for (auto& t : threads) t.join();
  run.duration_s = seconds(Clock::now() - start);
  run.ttft_s = summarize(std::move(ttft));
  run.tpot_s = summarize(std::move(tpot));
  run.e2e_s = summarize(std::move(e2e));
  run.ttft_first_turn_s = summarize(std::move(ttft_first));
  run.ttft_later_turns_s = summarize(std::move(ttft_later));
  run.output_tokens_per_s = run.duration_s > 0 ? run.output_tokens / run.duration_s : 0;
  run.requests_per_s = run.duration_s > 0 ? run.requests / run.duration_s : 0;
  http.reset();
  cluster.reset();
  return run;
}

std::string serve_bench_table(const std::vector<ServeBenchRun>& runs) {
  if (runs.empty()) return {};
  std::string out = fmt::format("{:<22}", "");
  for (const auto& r : runs) out += fmt::format("{:>12}", r.mode);
  for (size_t i = 1; i < runs.size(); ++i) {
    out += fmt::format("{:>14}", runs[i].mode + "/" + runs[0].mode);
  }
  out += "\n";
  auto row = [&](const char* name, auto get, const char* fmt_value, bool ratio) {
    out += fmt::format("{:<22}", name);
    for (const auto& r : runs) out += fmt::format(fmt::runtime(fmt_value), get(r));
    for (size_t i = 1; i < runs.size(); ++i) {
      const double base = static_cast<double>(get(runs[0]));
      if (ratio && base > 0) {
        out += fmt::format("{:>13.2f}x", static_cast<double>(get(runs[i])) / base);
      } else {
        out += fmt::format("{:>14}", "");
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
  return out;
}

}  // namespace dualpath::bench
