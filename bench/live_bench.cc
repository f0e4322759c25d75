#include "bench/live_bench.h"

#include <signal.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <thread>

#include "bench/session_stream.h"
#include "bench/hop_bytes_json.h"
#include "common/mutex.h"
#include "engine/engine_config.h"
#include "sim/experiment.h"
#include "sim/stop_rule.h"

namespace dualpath::bench {

namespace {

using Clock = std::chrono::steady_clock;

// FNV-1a over token ids.
uint64_t digest(uint64_t h, std::span<const int32_t> tokens) {
  for (int32_t t : tokens) {
    h ^= static_cast<uint32_t>(t);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// One completed turn, as the statistics need it (real seconds since the run's start).
struct TurnRecord {
  TurnResult result;
  double started_s = 0;
  double first_token_s = 0;    // the prefill's end
  double second_token_s = -1;  // the second token's arrival (-1: one token)
  double finished_s = 0;
};

}  // namespace

Result<LiveBenchResult> run_live_bench(serve::Cluster& cluster,
                                       const std::vector<sim::AgentPlan>& agents,
                                       const LiveBenchOptions& options) {
  const engine::EngineConfig& cfg = cluster.config().engine;
  DP_ASSIGN_OR_RETURN(engine::ModelKvShape shape, engine::model_kv_shape(cfg));
  const double dilation = cfg.live_time_dilation();
  const int P = cluster.prefill_nodes(), D = cluster.decode_nodes();
  int64_t total_turns = 0;
  for (const auto& a : agents) total_turns += static_cast<int64_t>(a.turns.size());

  struct AgentRun {
    std::vector<TurnRecord> turns;
    double start_s = 0, finish_s = 0;
    int64_t failed = 0;
    std::string error;
  };
  std::vector<AgentRun> runs(agents.size());
  struct Progress {
    Mutex mu;  // also serialises options.progress calls
    int64_t done DP_GUARDED_BY(mu) = 0;
  } progress;
  const auto start = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  // Online: the simulator's stop rule, checked every check interval of emulated time; once it
  // fires no turn starts (and no agent arrives) any more.
  struct StopState {
    explicit StopState(const sim::OnlineConfig& slo) : rule(slo) {}
    Mutex mu;
    CondVar cv;
    sim::OnlineStopRule rule DP_GUARDED_BY(mu);
    bool stopped DP_GUARDED_BY(mu) = false;
    bool agents_done DP_GUARDED_BY(mu) = false;
    double at_s DP_GUARDED_BY(mu) = -1;  // emulated
    std::string reason DP_GUARDED_BY(mu);
  } stop(options.slo);
  auto is_stopped = [&] {
    MutexLock lock(stop.mu);
    return stop.stopped;
  };

  auto run_agent = [&](size_t a) {
    AgentRun& run = runs[a];
    const sim::AgentPlan& plan = agents[a];
    if (options.online) {
      const auto arrival = start + from_seconds(plan.start_s * dilation);
      MutexLock lock(stop.mu);
      while (!stop.stopped) {
        if (!stop.cv.wait_until(lock, arrival)) break;
      }
    }
    run.start_s = seconds();
    SessionStream session(options.seed, static_cast<int64_t>(a), shape.vocab);
    for (size_t t = 0; t < plan.turns.size(); ++t) {
      if (options.online && is_stopped()) break;
      const workload::TurnShape& turn = plan.turns[t];
      // The turn keeps `context_tokens` of what came before (a trace's compaction cuts it).
      session.keep(turn.context_tokens);
      // What a store could hold: every context token but the last generated one, whose KV the
      // next prefill computes (so a context of whole blocks hits one block less).
      const int64_t oracle_hit = std::max<int64_t>(0, session.context_tokens() - 1);
      session.append_random(turn.prompt_tokens - session.context_tokens());
      TurnRequest request;
      request.tokens = session.prompt();
      request.gen_tokens = std::max<int64_t>(1, turn.gen_tokens);
      request.path = options.path;
      request.oracle_hit_tokens = oracle_hit;
      TurnRecord rec;
      rec.started_s = seconds();
      std::atomic<int64_t> arrived{0};  // relaxed: written and read on the link's reader thread
      request.on_tokens = [&](std::span<const int32_t> tokens) {
        const int64_t before =
            arrived.fetch_add(static_cast<int64_t>(tokens.size()), std::memory_order_relaxed);
        const double now = seconds();
        if (before == 0 && options.online) {
          MutexLock lock(stop.mu);
          stop.rule.add(now / dilation, (now - rec.started_s) / dilation);
        }
        if (before < 2 && before + static_cast<int64_t>(tokens.size()) >= 2) {
          rec.second_token_s = now;
        }
      };
      auto result = cluster.run_turn(std::move(request));
      if (!result.is_ok()) {
        run.failed += 1;
        run.error = fmt::format("agent {} turn {}: {}", a, t, result.status().to_string());
        break;
      }
      rec.first_token_s = rec.started_s + result->ttft_s;
      rec.finished_s = seconds();
      session.add_output(*result);
      rec.result = std::move(result).value();
      run.turns.push_back(std::move(rec));
      MutexLock lock(progress.mu);
      ++progress.done;
      if (options.progress) options.progress(progress.done, total_turns, seconds());
    }
    run.finish_s = seconds();
  };

  // The stop rule, on its own thread.
  std::thread monitor;
  if (options.online) {
    monitor = std::thread([&] {
      MutexLock lock(stop.mu);
      for (int64_t k = 1;; ++k) {
        const double at = static_cast<double>(k) * options.slo.check_interval_s;
        const auto check_at = start + from_seconds(at * dilation);
        while (!stop.agents_done) {
          if (!stop.cv.wait_until(lock, check_at)) break;
        }
        if (stop.agents_done) return;
        const std::string_view why = stop.rule.check(at);
        if (!why.empty()) {
          stop.stopped = true;
          stop.at_s = at;
          stop.reason = std::string(why);
          stop.cv.notify_all();
          return;
        }
      }
    });
  }

  // The fault, on its own thread, at its emulated time.
  std::thread fault;
  if (options.kill && cluster.local_nodes() != nullptr) {
    fault = std::thread([&] {
      const auto kill_at = start + from_seconds(options.kill_at_s * dilation);
      MutexLock lock(stop.mu);
      while (!stop.agents_done) {
        if (!stop.cv.wait_until(lock, kill_at)) break;
      }
      if (stop.agents_done) return;
      (void)cluster.local_nodes()->signal(*options.kill, SIGKILL);
    });
  }
  std::vector<std::thread> threads;
  for (size_t a = 0; a < agents.size(); ++a) threads.emplace_back(run_agent, a);
  for (auto& th : threads) th.join();
  {
    MutexLock lock(stop.mu);
    stop.agents_done = true;
  }
  stop.cv.notify_all();
  if (fault.joinable()) fault.join();
  if (monitor.joinable()) monitor.join();
  double stop_at_s = -1;  // emulated
  std::string stop_reason;
  {
    MutexLock lock(stop.mu);
    stop_at_s = stop.at_s;
    stop_reason = stop.reason;
  }

  LiveBenchResult r;
  r.time_dilation = dilation;
  r.agents = static_cast<int>(agents.size());
  r.prefill_nodes = P;
  r.decode_nodes = D;
  r.storage_read_by_node.assign(static_cast<size_t>(P + D), 0);
  std::vector<double> pe_busy(static_cast<size_t>(P), 0.0);
  std::vector<double> ttft, ttst, tpot, turn_times, queue, reads;
  // Storage bytes per window and node: each turn's reads land before its first token.
  const double window_real = options.balance_window_s * dilation;
  // The latencies' window (emulated): online the last one before the stop, as the simulator's.
  r.stop_reason = options.online ? (stop_at_s >= 0 ? stop_reason : "all_done") : "";
  double report_to = std::numeric_limits<double>::infinity(), report_from = -report_to;
  if (options.online) {
    double end = stop_at_s;
    if (end < 0) {
      for (const AgentRun& run : runs) end = std::max(end, run.finish_s / dilation);
    }
    report_to = end;
    report_from = std::max(0.0, end - options.slo.window_s);
    r.report_from_s = report_from;
    r.report_to_s = report_to;
  }
  auto reported = [&](double real_s) {
    const double t = real_s / dilation;
    return t > report_from && t <= report_to;
  };
  std::vector<std::vector<double>> window_bytes;
  for (const AgentRun& run : runs) {
    r.jct_real_s = std::max(r.jct_real_s, run.finish_s);
    r.agent_jct_s.push_back((run.finish_s - run.start_s) / dilation);
    r.failed_turns += run.failed;
    if (!run.error.empty() && r.errors.size() < 5) r.errors.push_back(run.error);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const TurnRecord& rec : run.turns) {
      const TurnResult& t = rec.result;
      h = digest(h, t.output_tokens);
      ++r.turns;
      r.prompt_tokens += t.prompt_tokens;
      r.hit_tokens += t.hit_tokens;
      r.bytes += t.bytes;
      if (t.path == sched::ReadPath::kPe) ++r.pe_path_turns;
      if (t.path == sched::ReadPath::kDe) ++r.de_path_turns;
      if (t.attempts > 1) ++r.retried_turns;
      if (t.migrated) ++r.migrated_turns;
      r.migrated_read_bytes += t.migrated_read_bytes;
      const size_t node = t.path == sched::ReadPath::kDe ? static_cast<size_t>(P + t.de.index)
                                                         : static_cast<size_t>(t.pe.index);
      r.storage_read_by_node[node] += t.bytes.storage_read;
      pe_busy[static_cast<size_t>(t.pe.index)] += t.prefill_s;
      if (window_real > 0) {
        const auto w = static_cast<size_t>(rec.first_token_s / window_real);
        if (window_bytes.size() <= w) window_bytes.resize(w + 1, std::vector<double>(P + D, 0.0));
        window_bytes[w][node] += static_cast<double>(t.bytes.storage_read);
      }
      r.persist_skipped_blocks += t.persist_skipped_blocks;
      turn_times.push_back((rec.finished_s - rec.started_s) / dilation);
      if (reported(rec.first_token_s)) {
        ttft.push_back(t.ttft_s / dilation);
        queue.push_back(t.queue_s * 1e3);
        if (t.read_s > 0) reads.push_back(t.read_s / dilation);
      }
      if (rec.second_token_s >= 0 && reported(rec.second_token_s))
        ttst.push_back((rec.second_token_s - rec.first_token_s) / dilation);
      if (t.output_tokens.size() > 1 && reported(rec.finished_s))
        tpot.push_back(t.tpot_s / dilation);
    }
    r.agent_output_digest.push_back(h);
  }
  r.jct_s = r.jct_real_s / dilation;
  r.ttft = summarize(ttft);
  r.ttst = summarize(ttst);
  r.tpot = summarize(tpot);
  r.turn_s = summarize(turn_times);
  r.queue_ms = summarize(queue);
  r.read_s = summarize(reads);
  r.ttft_p50_s = r.ttft.p50;
  r.ttft_p99_s = r.ttft.p99;
  r.ttft_mean_s = r.ttft.mean;
  r.tpot_p50_s = r.tpot.p50;
  r.tpot_p99_s = r.tpot.p99;
  // The simulator's verdict (sim::slo_met): the stop rule's, and no failed turn.
  r.slo_met = r.ttft.count > 0 && r.failed_turns == 0 &&
              sim::slo_met(options.slo, r.stop_reason, r.ttft.get(options.slo.slo_statistic),
                           r.tpot.get(options.slo.slo_statistic));
  // Balance over the nodes allowed to read: every node when both paths run, the prefill nodes
  // for the PE path alone.
  const bool dual = r.de_path_turns > 0;
  const size_t readers = dual ? static_cast<size_t>(P + D) : static_cast<size_t>(P);
  auto max_over_avg = [&](const std::vector<double>& v) {
    double sum = 0, mx = 0;
    for (size_t n = 0; n < readers; ++n) {
      sum += v[n];
      mx = std::max(mx, v[n]);
    }
    return std::pair{mx, sum / static_cast<double>(readers)};
  };
  {
    std::vector<double> all(r.storage_read_by_node.begin(), r.storage_read_by_node.end());
    auto [mx, avg] = max_over_avg(all);
    r.snic_max_over_avg_run = avg > 0 ? mx / avg : 0;
    // Windows of the busy period (the first 90 % of the run), byte-weighted.
    double mx_sum = 0, avg_sum = 0;
    for (size_t w = 0; w < window_bytes.size(); ++w) {
      if ((static_cast<double>(w) + 1) * window_real > 0.9 * r.jct_real_s) break;
      auto [wmx, wavg] = max_over_avg(window_bytes[w]);
      mx_sum += wmx;
      avg_sum += wavg;
    }
    r.snic_max_over_avg = avg_sum > 0 ? mx_sum / avg_sum : r.snic_max_over_avg_run;
  }
  {
    double sum = 0, mx = 0;
    for (double b : pe_busy) {
      sum += b;
      mx = std::max(mx, b);
    }
    r.pe_busy_max_over_avg = sum > 0 ? mx / (sum / static_cast<double>(pe_busy.size())) : 0;
  }
  return r;
}

using sim::latency_json;

Json LiveBenchResult::to_json() const {
  return Json{{"jct_s", jct_s},
              {"jct_real_s", jct_real_s},
              {"time_dilation", time_dilation},
              {"agents", agents},
              {"prefill_nodes", prefill_nodes},
              {"decode_nodes", decode_nodes},
              {"turns", turns},
              {"failed_turns", failed_turns},
              {"retried_turns", retried_turns},
              {"migrated_turns", migrated_turns},
              {"migrated_read_bytes", migrated_read_bytes},
              {"failed_over_turns", retried_turns},
              {"prompt_tokens", prompt_tokens},
              {"hit_tokens", hit_tokens},
              {"storage_read_bytes", bytes.storage_read},
              {"storage_read_bytes_by_node", storage_read_by_node},
              {"bytes", hop_bytes_json(bytes)},
              {"pe_path_turns", pe_path_turns},
              {"de_path_turns", de_path_turns},
              {"snic_max_over_avg", snic_max_over_avg},
              {"snic_max_over_avg_run", snic_max_over_avg_run},
              {"pe_busy_max_over_avg", pe_busy_max_over_avg},
              {"ttft_s", latency_json(ttft)},
              {"ttst_s", latency_json(ttst)},
              {"tpot_s", latency_json(tpot)},
              {"turn_s", latency_json(turn_s)},
              {"queue_ms_real", latency_json(queue_ms)},
              {"read_s", latency_json(read_s)},
              {"slo_met", slo_met},
              {"ttft_p50_s", ttft_p50_s},
              {"ttft_p99_s", ttft_p99_s},
              {"ttft_mean_s", ttft_mean_s},
              {"tpot_p50_s", tpot_p50_s},
              {"tpot_p99_s", tpot_p99_s},
              {"agent_jct_s", agent_jct_s},
              {"agent_output_digest", agent_output_digest},
              {"stop_reason", stop_reason},
              {"report_from_s", report_from_s},
              {"report_to_s", report_to_s},
              {"persist_skipped_blocks", persist_skipped_blocks},
              {"errors", errors}};
}

std::string LiveBenchResult::table() const {
  auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  std::string out;
  out +=
      fmt::format("  JCT                        {:.1f} s emulated ({:.1f} s real, dilation {})\n",
                  jct_s, jct_real_s, time_dilation);
  out += fmt::format("  cluster                    {}P{}D\n", prefill_nodes, decode_nodes);
  out += fmt::format("  agents, turns              {}, {} ({} PE path, {} DE path)\n", agents,
                     turns, pe_path_turns, de_path_turns);
  out +=
      fmt::format("  failed / retried / migrated {} / {} / {} turns (migrations read {:.1f} MiB)\n",
                  failed_turns, retried_turns, migrated_turns, mib(migrated_read_bytes));
  out += fmt::format("  prompt, hit tokens         {}, {} ({:.1f} % hit)\n", prompt_tokens,
                     hit_tokens, prompt_tokens ? 100.0 * hit_tokens / prompt_tokens : 0.0);
  std::string per_node;
  for (size_t i = 0; i < storage_read_by_node.size(); ++i) {
    const bool pe = static_cast<int>(i) < prefill_nodes;
    per_node +=
        fmt::format("{}{}{} {:.1f}", i ? ", " : "", pe ? "P" : "D",
                    pe ? i : i - static_cast<size_t>(prefill_nodes), mib(storage_read_by_node[i]));
  }
  out +=
      fmt::format("  storage read (MiB)         {:.1f} ({})\n", mib(bytes.storage_read), per_node);
  out += fmt::format("  storage NIC max/avg        {:.3f} over windows, {:.3f} over the run\n",
                     snic_max_over_avg, snic_max_over_avg_run);
  out += fmt::format("  PE busy max/avg            {:.3f}\n", pe_busy_max_over_avg);
  out += fmt::format(
      "  hops (MiB)                 pe_h2d {:.1f}, de_to_pe {:.1f}, pd_transfer {:.1f}, de_h2d "
      "{:.1f}, persist {:.1f}\n",
      mib(bytes.pe_h2d), mib(bytes.de_to_pe), mib(bytes.pd_transfer), mib(bytes.de_h2d),
      mib(bytes.persist));
  auto lat = [](const LatencyStats& l, double unit) {
    return fmt::format("{:.3f} / {:.3f} / {:.3f} / {:.3f}", l.mean * unit, l.p50 * unit,
                       l.p90 * unit, l.p99 * unit);
  };
  out += fmt::format("  TTFT mean/p50/p90/p99      {} s emulated\n", lat(ttft, 1));
  out += fmt::format("  queue mean/p50/p90/p99     {} ms real (waiting to be placed)\n", lat(queue_ms, 1));
  out += fmt::format("  read mean/p50/p90/p99      {} s emulated (placement to reads done)\n", lat(read_s, 1));
  out += fmt::format("  TTST mean/p50/p90/p99      {} s emulated\n", lat(ttst, 1));
  out += fmt::format("  TPOT mean/p50/p90/p99      {} ms emulated\n", lat(tpot, 1e3));
  out += fmt::format("  turn time p50 / max        {:.1f} / {:.1f} s emulated\n", turn_s.p50,
                     turn_s.max);
  if (!stop_reason.empty()) {
    out += fmt::format("  latencies over             {:.0f}-{:.0f} s emulated (stopped: {})\n",
                       report_from_s, report_to_s, stop_reason);
  }
  out += fmt::format("  SLO                        {}\n", slo_met ? "met" : "NOT met");
  if (persist_skipped_blocks > 0) {
    out += fmt::format("  blocks not persisted       {} (the cache degraded)\n",
                       persist_skipped_blocks);
  }
  for (const std::string& e : errors) out += "  error: " + e + "\n";
  return out;
}

}  // namespace dualpath::bench
