#pragma once
// The serving benchmark (`dualpath bench serve`): the seed guide's verification, measured. The
// same multi-turn chat sessions go through the OpenAI-compatible HTTP API of a fresh cluster once
// per mode (DualPath off = basic, on = full), from real HTTP clients over TCP, with at most
// `concurrency` sessions active at once (vLLM's multi-turn serving benchmark: a client runs one
// conversation at a time, turn after turn, and takes the next when it ends).
//
// A session: a first user message of `context_tokens` bytes of text (the byte tokenizer: one
// token per byte), then `turns` turns; turn i > 0 resends the whole conversation (every earlier
// message, the replies as the server sent them) plus a new user message of `append_tokens`
// bytes. Every request streams (SSE, include_usage) with temperature 0 and `max_tokens`. The
// text is deterministic (the seed, the session, the turn), so both modes get the same requests,
// and greedy decoding gives them the same replies.
//
// Per request, from the client's clock: TTFT (sent -> the first token's chunk), TPOT (the first
// token's chunk -> the last one, over completion_tokens - 1), end-to-end latency; and from the
// reply's usage: prompt, completion and cached tokens, and the `dualpath` read path and storage
// bytes. Times are real seconds (on an emulated cluster they include its time dilation: compare
// modes, do not quote them).
//
// Threads: run_serve_bench blocks; it runs `concurrency` client threads and calls `progress`
// from them, one call at a time.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/percentiles.h"
#include <nlohmann/json.hpp>
#include "serve/serve_config.h"
#include "sim/cluster_sim.h"
#include "sim/sim_config.h"

namespace dualpath::bench {

using Json = nlohmann::json;

// vLLM's goodput (`--goodput ttft:MS tpot:MS e2el:MS`): a request counts when it meets every SLO
// given (0: not given).
struct GoodputSlo {
  double ttft_ms = 0, tpot_ms = 0, e2el_ms = 0;
  bool given() const { return ttft_ms > 0 || tpot_ms > 0 || e2el_ms > 0; }
};

// A trace replayed through the API (`--dataset`): each plan is one session, as the simulator
// replays it (sim::build_agents on the same config file: the same sessions, turn shapes, start
// times and think times), so the simulator's prediction is of exactly these requests.
//
// A turn is a /v1/completions request (greedy, streamed, `ignore_eos`, max_tokens = its
// generation) whose prompt text reproduces the plan's prefix structure with the byte tokenizer
// (one token per byte):
//   agents (32k, 64k, weka:PATH): the session's text so far cut to the turn's kept context, then
//     fresh text for the rest of its prompt; after the turn, stand-in text for its generation
//     joins the session's text (the server stored the KV of its own reply, not of this text: a
//     later turn's hit misses those tokens, which the measured hit ratio shows against the
//     trace's);
//   content-addressed requests (mooncake:PATH): one text per prefix-block id, in order, so that
//     requests sharing leading ids share that text and the server's hits follow the trace's.
// Sessions start at their plan's start time (emulated seconds, times `time_dilation` real
// seconds), wait their think times the same way, and at most `concurrency` run at once.
struct TraceReplay {
  std::string dataset;                  // the spec, for the output
  std::vector<sim::AgentPlan> plans;    // one session each
  std::optional<sim::SimConfig> sim;    // the simulator's view of the cluster: its prediction
  double time_dilation = 1;             // real seconds per emulated second of the live cluster
  double length_scale = 1, think_time_scale = 1, time_scale = 1, sessions_per_s = 0;
};

// What `--dataset` and its flags ask for.
struct TraceSpec {
  std::string dataset;         // weka:PATH | mooncake:PATH | table2:NAME (32k, 48k, 64k) | NAME
  int sessions = 16;           // sessions (mooncake: requests, the first ones of the trace)
  int max_turns = 0;           // at most this many turns of each session; 0: all
  double sessions_per_s = 0;   // Poisson arrivals (emulated seconds); 0: every session at t = 0
  double think_time_scale = 1; // on the recorded think times (WEKA); 0: back to back
  double length_scale = 1;     // on every length: appends, generations, prefix blocks
  double time_scale = 1;       // on a timestamped trace's timestamps (mooncake)
  bool sim = true;             // the simulator's prediction beside the live run
};

// The plans for `spec` on the cluster the simulator reads from the same file (`base`): its
// dataset, scales and arrivals set from the spec, sim::build_agents, the first `sessions` kept.
// Errors: a bad spec (named, with the fix), the dataset's reader's.
Result<TraceReplay> make_trace_replay(const sim::SimConfig& base, const TraceSpec& spec,
                                      double time_dilation);

// The prompt text of each turn of one plan (TraceReplay's rule), built turn after turn.
class TracePrompts {
 public:
  TracePrompts(const sim::AgentPlan& plan, uint64_t seed, uint64_t session)
      : plan_(plan), seed_(seed), session_(session) {}
  // Turn `turn`'s prompt: call for turns 0, 1, 2, ... in order.
  std::string next(int turn);

 private:
  const sim::AgentPlan& plan_;
  uint64_t seed_, session_;
  std::string text_;  // the session's text so far (agents)
};

// The trace's own hit ratio as the simulator replays these plans: kept-context tokens over
// prompt tokens (agents), or the leading prefix blocks earlier requests stored (mooncake).
double trace_hit_ratio(const std::vector<sim::AgentPlan>& plans);

struct ServeBenchOptions {
  int sessions = 16;
  int turns = 10;
  int concurrency = 0;  // 0: every session at once
  int64_t context_tokens = 16000;
  int64_t append_tokens = 256;
  int64_t max_tokens = 32;
  uint64_t seed = 1;
  // The node program and its leading arguments (empty: the dualpath binary's `node`; tests give
  // dp_node_program).
  std::string node_program;
  std::vector<std::string> node_args;
  // Called after every request with (requests done, requests in all, real seconds so far).
  std::function<void(int64_t, int64_t, double)> progress;
  // The API's own cost (`--direct`): right after each request has gone through the HTTP API, the
  // same prompt (the API's own parser and tokenizer make its tokens from the same body) goes to
  // the scheduler service's request interface (SchedulerService::run_turn: no HTTP, no JSON, no
  // SSE) for as many tokens as the API's reply had, under a cache namespace of its own so that
  // neither path hits the other's KV. Both paths then see the same cluster at the same load.
  bool direct = false;
  GoodputSlo goodput;
  // `--dataset`: replay a trace instead of the synthetic sessions (sessions, turns, context and
  // append tokens are then the trace's plans').
  std::optional<TraceReplay> trace;
  // The DE DRAM tier per decode node in the model's bytes (cache.de_dram_gb x 1e9) for this run
  // and its simulator twin; < 0: the config's. A run with a tier is named MODE+tier.
  double dram_tier_bytes = -1;
};

// The service-interface side of a `--direct` run, from the calling thread's clock: TTFT (the call
// -> the first token's callback), TPOT (the first token -> run_turn's return, over the tokens
// after the first), end to end.
struct DirectRun {
  int64_t requests = 0;
  int64_t errors = 0;
  // Requests whose prompt, tokenized by the bench, had another length than the API's usage
  // reported (the comparison would not be of the same prompt): expected 0.
  int64_t prompt_mismatches = 0;
  LatencyStats ttft_s, tpot_s, e2e_s;
  // The part of the API's own work the bench can time apart: parse_completion_request (JSON,
  // chat template, tokenizer) on the same body, in the bench's thread.
  LatencyStats parse_s;
  // Per request, the API's figure minus the direct one's on the same prompt (the medians are
  // steadier than a difference of two medians when the cluster's own latency varies).
  LatencyStats ttft_paired_diff_s, tpot_paired_diff_s;
  std::vector<std::string> error_samples;
};

// One request as the client saw it, in completion order (what vLLM's --save-result lists).
struct RequestRecord {
  bool ok = false;
  int round = 0;       // the turn of its session (0: the first)
  double start_s = 0;  // sent, since the run's start
  int64_t cached_tokens = 0;
  std::string read_path;  // the reply's dualpath.read_path (pe, de, none, ...; empty: none given)
  int64_t input_len = 0, output_len = 0;  // the reply's usage (0 where it carried none)
  double ttft_s = 0, e2e_s = 0;
  std::vector<double> itl_s;  // the gaps between token chunks after the first
  std::string generated_text;
  std::string error;  // empty when ok
  // vLLM's TPOT: the time after the first token over the tokens after it (the stream's end marks
  // the last token: a modeled reply sends no text per token). Only with two tokens or more.
  bool has_tpot() const { return output_len > 1; }
  double tpot_s() const { return (e2e_s - ttft_s) / static_cast<double>(output_len - 1); }
};

struct ServeBenchRun {
  std::string mode;  // basic, full or oracle
  bool completions = false;  // the requests went to /v1/completions (a trace), not chat
  int64_t requests = 0;  // answered 200 with a complete stream
  int64_t errors = 0;    // everything else (an HTTP error, an error event, a cut stream)
  double duration_s = 0;
  int64_t output_tokens = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t storage_read_bytes = 0;
  double output_tokens_per_s = 0;
  double requests_per_s = 0;
  LatencyStats ttft_s, tpot_s, e2e_s;
  // TTFT split: the sessions' first turns (nothing cached: a whole prefill) and the later ones
  // (the hits the read paths load), since their tails have different causes.
  LatencyStats ttft_first_turn_s, ttft_later_turns_s;
  // The turns with a cached prefix (cached_tokens > 0): what the read paths and the DE DRAM tier
  // serve (the simulator's ttft_hit_s).
  LatencyStats ttft_hit_turns_s;
  std::map<std::string, int64_t> read_paths;  // dualpath.read_path -> requests
  std::vector<std::string> error_samples;     // the first few errors
  // Per session, the FNV-1a digest of every reply's text: equal across modes when the greedy
  // answers are the same.
  std::vector<uint64_t> session_digests;
  // `--direct` only: the same requests through the service's interface, and what the API adds
  // (API minus direct at p50, in ms; API over direct at p99).
  std::optional<DirectRun> direct;
  std::vector<RequestRecord> records;  // every request, in completion order
  // Per round (turn index of the sessions): how fast its first token came and how much of its
  // prompt was cached (LMCache's multi-round view: later rounds should hit).
  struct Round {
    int round = 0;
    int64_t requests = 0;
    LatencyStats ttft_s;
    double hit_ratio = 0;  // cached / prompt tokens
  };
  std::vector<Round> per_round;
  // With ServeBenchOptions::goodput: the successful requests that met every SLO, per second.
  std::optional<GoodputSlo> goodput_slo;
  int64_t good_requests = 0;
  double request_goodput = 0;
  // Trace replays: the turns whose reply had another length than the trace's (expected 0: the
  // requests ask for ignore_eos), and the simulator's prediction for the same plans and mode.
  int64_t output_len_mismatches = 0;
  double time_dilation = 1;
  std::optional<sim::SimResult> sim;
  double sim_output_tokens = 0;  // the plans' generated tokens (the simulator's tokens/s)

  Json to_json() const;
};

// Starts a fresh cluster for `config` in `mode` (an empty block store of its own, the API on a
// free loopback port), runs the sessions through it, and stops it.
Result<ServeBenchRun> run_serve_bench(const serve::ServeConfig& config,
                                      serve::ServeMode mode,
                                      const ServeBenchOptions& options);

// The guide's table: one column per run, and each run against the first (normally basic).
std::string serve_bench_table(const std::vector<ServeBenchRun>& runs);

// A trace replay's runs beside the simulator's prediction for the same sessions, in emulated
// seconds, with the hit ratios: the trace's (`trace_hits`), measured, simulated.
std::string trace_vs_sim_table(const std::vector<ServeBenchRun>& runs, double trace_hits);

// The run as vLLM's `vllm bench serve --save-result` writes it (vllm/benchmarks/serve.py, its
// field names and units: seconds in the per-request lists and `duration`, milliseconds in the
// `*_ms` statistics, ttft/tpot/itl/e2el with mean, median, std and p99), so that scripts written
// for vLLM's files read ours unchanged. Per-request lists cover every request (a failed one:
// zeros and its error); the statistics the successful ones.
struct VllmResultSetup {
  std::string model_id, tokenizer_id;
  int max_concurrency = 0;
};
Json vllm_result_json(const ServeBenchRun& run, const VllmResultSetup& setup);

// vLLM's "Serving Benchmark Result" block for the same run, from its vllm_result_json.
std::string vllm_result_block(const ServeBenchRun& run, const Json& vllm_result);

// The soak (`dualpath bench soak`): multi-turn sessions through the API at a steady load for a
// while, sampled every interval; at the end, whether anything drifted. A client thread runs
// sessions back to back (each `turns` turns, a new conversation after), `concurrency` of them.
struct SoakOptions {
  double minutes = 30;
  int concurrency = 8;
  int turns = 8;
  int64_t context_tokens = 2000;
  int64_t append_tokens = 128;
  int64_t max_tokens = 16;
  double interval_s = 10;
  int64_t store_capacity_bytes = 256ll << 20;  // so that the store's bytes plateau by evicting
  uint64_t seed = 1;
  std::string node_program;  // as ServeBenchOptions
  std::vector<std::string> node_args;
};

struct SoakSample {
  double t_s = 0;              // since the load started
  int64_t requests = 0;        // completed in this interval
  int64_t errors = 0;          // in this interval
  double output_tokens_per_s = 0;
  LatencyStats ttft_s;         // of this interval's requests
  int64_t rss_kb = 0;          // this process (scheduler + API) and every node process
  std::map<std::string, int64_t> rss_kb_by_process;  // "scheduler", "prefill0", "decode1", ...
  // The same RSS split as /proc/PID/status splits it: "anon" (heap, stacks, private maps),
  // "shmem" (shared memory: UCX segments, shared buffers), "file" (mapped files, the binary).
  std::map<std::string, std::map<std::string, int64_t>> rss_parts_kb_by_process;
  int64_t open_fds = 0;        // the same processes
  int64_t store_bytes = 0;     // block files under the data paths
};

struct SoakVerdict {
  std::string what;    // "lost requests", "rss", "open fds", "store bytes", "throughput"
  bool ok = true;
  std::string detail;  // the figures compared
};

struct SoakResult {
  std::vector<SoakSample> samples;
  int64_t requests = 0;
  int64_t errors = 0;
  std::vector<SoakVerdict> verdicts;
  std::vector<std::string> error_samples;
  bool ok() const;
  Json to_json() const;
};

// `on_sample` is called from the sampling thread after each interval.
Result<SoakResult> run_soak_bench(const serve::ServeConfig& config, const SoakOptions& options,
                                  const std::function<void(const SoakSample&)>& on_sample);
std::string soak_header();
std::string soak_row(const SoakSample& s);

// Deterministic English-looking ASCII text of exactly `bytes` bytes (words and spaces).
std::string bench_text(uint64_t seed, int64_t bytes);

}  // namespace dualpath::bench
