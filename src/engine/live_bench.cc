#include "engine/live_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "common/percentiles.h"
#include "engine/engine_config.h"
#include "engine/session_stream.h"

namespace dualpath::engine {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

Result<LiveBenchResult> run_live_bench(LocalCluster& cluster,
                                       const std::vector<std::vector<workload::TurnShape>>& agents,
                                       const LiveBenchOptions& options) {
  DP_ASSIGN_OR_RETURN(ModelKvShape shape, model_kv_shape(cluster.config()));
  const double dilation = cluster.config().compute == "modeled" ? cluster.config().time_dilation
                                                                 : 1.0;
  int64_t total_turns = 0;
  for (const auto& a : agents) total_turns += static_cast<int64_t>(a.size());

  struct AgentRun {
    std::vector<TurnResult> turns;
    double finish_s = 0;
    Status status;
  };
  std::vector<AgentRun> runs(agents.size());
  std::mutex progress_mu;
  int64_t done = 0;  // guarded by progress_mu
  const auto start = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  auto run_agent = [&](size_t a) {
    AgentRun& run = runs[a];
    SessionStream session(options.seed, static_cast<int64_t>(a), shape.vocab);
    for (size_t t = 0; t < agents[a].size(); ++t) {
      const workload::TurnShape& turn = agents[a][t];
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
      cluster.place_session(static_cast<int64_t>(a), request);
      request.oracle_hit_tokens = oracle_hit;
      auto result = cluster.run_turn(request);
      if (!result.is_ok()) {
        run.status = result.status().with_context(fmt::format("agent {} turn {}", a, t));
        return;
      }
      session.add_output(*result);
      run.turns.push_back(std::move(result).value());
      std::lock_guard lock(progress_mu);
      ++done;
      if (options.progress) options.progress(done, total_turns, seconds());
    }
    run.finish_s = seconds();
  };
  std::vector<std::thread> threads;
  for (size_t a = 0; a < agents.size(); ++a) threads.emplace_back(run_agent, a);
  for (auto& th : threads) th.join();
  for (const AgentRun& run : runs) DP_RETURN_IF_ERROR(run.status);

  LiveBenchResult r;
  r.time_dilation = dilation;
  r.agents = static_cast<int>(agents.size());
  r.storage_read_by_node.assign(1 + cluster.decode_nodes(), 0);
  std::vector<double> ttft, tpot;
  for (const AgentRun& run : runs) {
    r.jct_real_s = std::max(r.jct_real_s, run.finish_s);
    r.agent_jct_s.push_back(run.finish_s / dilation);
    for (const TurnResult& t : run.turns) {
      ++r.turns;
      r.prompt_tokens += t.prompt_tokens;
      r.hit_tokens += t.hit_tokens;
      r.bytes += t.bytes;
      if (t.path == sched::ReadPath::kPe) ++r.pe_path_turns;
      if (t.path == sched::ReadPath::kDe) ++r.de_path_turns;
      if (t.failed_over_from >= 0) ++r.failed_over_turns;
      r.storage_read_by_node[t.path == sched::ReadPath::kDe ? 1 + t.de_index : 0] +=
          t.bytes.storage_read;
      ttft.push_back(t.ttft_s / dilation);
      if (t.output_tokens.size() > 1) tpot.push_back(t.tpot_s / dilation);
    }
  }
  r.jct_s = r.jct_real_s / dilation;
  r.ttft_p50_s = percentile(ttft, 0.5);
  r.ttft_p99_s = percentile(ttft, 0.99);
  r.ttft_mean_s = mean(ttft);
  r.tpot_p50_s = percentile(tpot, 0.5);
  r.tpot_p99_s = percentile(tpot, 0.99);
  return r;
}

Json LiveBenchResult::to_json() const {
  return Json{{"jct_s", jct_s},
              {"jct_real_s", jct_real_s},
              {"time_dilation", time_dilation},
              {"agents", agents},
              {"turns", turns},
              {"prompt_tokens", prompt_tokens},
              {"hit_tokens", hit_tokens},
              {"storage_read_bytes", bytes.storage_read},
              {"storage_read_bytes_by_node", storage_read_by_node},
              {"bytes", bytes.to_json()},
              {"pe_path_turns", pe_path_turns},
              {"de_path_turns", de_path_turns},
              {"failed_over_turns", failed_over_turns},
              {"ttft_p50_s", ttft_p50_s},
              {"ttft_p99_s", ttft_p99_s},
              {"ttft_mean_s", ttft_mean_s},
              {"tpot_p50_s", tpot_p50_s},
              {"tpot_p99_s", tpot_p99_s},
              {"agent_jct_s", agent_jct_s}};
}

std::string LiveBenchResult::table() const {
  auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  std::string out;
  out += fmt::format("  JCT                        {:.1f} s emulated ({:.1f} s real, dilation {})\n",
                     jct_s, jct_real_s, time_dilation);
  out += fmt::format("  agents, turns              {}, {} ({} PE path, {} DE path)\n", agents,
                     turns, pe_path_turns, de_path_turns);
  out += fmt::format("  prompt, hit tokens         {}, {} ({:.1f} % hit)\n", prompt_tokens,
                     hit_tokens, prompt_tokens ? 100.0 * hit_tokens / prompt_tokens : 0.0);
  std::string per_node;
  for (size_t i = 0; i < storage_read_by_node.size(); ++i) {
    per_node += fmt::format("{}{} {:.1f}", i ? ", " : "", i == 0 ? "PE" : fmt::format("DE{}", i - 1),
                            mib(storage_read_by_node[i]));
  }
  out += fmt::format("  storage read (MiB)         {:.1f} ({})\n", mib(bytes.storage_read),
                     per_node);
  out += fmt::format(
      "  hops (MiB)                 pe_h2d {:.1f}, de_to_pe {:.1f}, pd_transfer {:.1f}, de_h2d "
      "{:.1f}, persist {:.1f}\n",
      mib(bytes.pe_h2d), mib(bytes.de_to_pe), mib(bytes.pd_transfer), mib(bytes.de_h2d),
      mib(bytes.persist));
  out += fmt::format("  TTFT p50 / p99 / mean      {:.3f} / {:.3f} / {:.3f} s emulated\n",
                     ttft_p50_s, ttft_p99_s, ttft_mean_s);
  out += fmt::format("  TPOT p50 / p99             {:.1f} / {:.1f} ms emulated\n", 1e3 * tpot_p50_s,
                     1e3 * tpot_p99_s);
  return out;
}

}  // namespace dualpath::engine
