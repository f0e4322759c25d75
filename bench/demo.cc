#include "bench/demo.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/mutex.h"
#include "compute/init_rng.h"
#include "engine/engine_config.h"
#include "bench/session_stream.h"
#include "bench/hop_bytes_json.h"

namespace dualpath::bench {

namespace {

int64_t uniform(compute::SplitMix64& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(hi - lo + 1));
}

}  // namespace

Result<DemoReport> run_demo(serve::Cluster& cluster,
                            const DemoOptions& options,
                            const std::function<void(const DemoTurn&)>& progress) {
  // The vocabulary bounds the random token ids.
  DP_ASSIGN_OR_RETURN(engine::ModelKvShape shape, engine::model_kv_shape(cluster.config().engine));
  const auto start = std::chrono::steady_clock::now();
  std::vector<SessionStream> sessions;
  sessions.reserve(static_cast<size_t>(options.sessions));
  for (int s = 0; s < options.sessions; ++s) sessions.emplace_back(options.seed, s, shape.vocab);
  std::vector<std::vector<DemoTurn>> done(options.sessions);
  Mutex progress_mu;  // serialises the progress calls
  auto run_turn = [&](int s, int t) -> Status {
    SessionStream& session = sessions[static_cast<size_t>(s)];
    const int64_t append =
        t == 0 ? options.first_prompt_tokens
               : uniform(session.rng(), options.min_append_tokens, options.max_append_tokens);
    session.append_random(append);
    TurnRequest request;
    request.tokens = session.prompt();
    request.gen_tokens = uniform(session.rng(), options.min_gen_tokens, options.max_gen_tokens);
    request.path = options.path;
    auto result = cluster.run_turn(request);
    if (!result.is_ok()) {
      return result.status().with_context(fmt::format("session {} turn {}", s, t));
    }
    session.add_output(*result);
    done[s].push_back(DemoTurn{s, t, std::move(result).value()});
    if (progress) {
      MutexLock lock(progress_mu);
      progress(done[s].back());
    }
    return Status::ok();
  };
  if (options.concurrent && options.sessions > 1) {
    std::vector<Status> failures(options.sessions);
    std::vector<std::thread> threads;
    for (int s = 0; s < options.sessions; ++s) {
      threads.emplace_back([&, s] {
        for (int t = 0; t < options.turns && failures[s].is_ok(); ++t) failures[s] = run_turn(s, t);
      });
    }
    for (auto& th : threads) th.join();
    for (const Status& f : failures) DP_RETURN_IF_ERROR(f);
  } else {
    for (int t = 0; t < options.turns; ++t) {
      for (int s = 0; s < options.sessions; ++s) DP_RETURN_IF_ERROR(run_turn(s, t));
    }
  }
  DemoReport report;
  for (int t = 0; t < options.turns; ++t) {
    for (int s = 0; s < options.sessions; ++s) report.turns.push_back(std::move(done[s][t]));
  }
  report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

Json DemoReport::to_json() const {
  Json sessions = Json::array();
  for (const DemoTurn& t : turns) {
    while (static_cast<int>(sessions.size()) <= t.session) {
      sessions.push_back(Json{{"session", sessions.size()}, {"turns", Json::array()}});
    }
    const TurnResult& r = t.result;
    sessions[t.session]["turns"].push_back(Json{{"turn", t.turn},
                                                {"prompt_tokens", r.prompt_tokens},
                                                {"hit_tokens", r.hit_tokens},
                                                {"path", sched::read_path_name(r.path)},
                                                {"output_tokens", r.output_tokens},
                                                {"bytes", hop_bytes_json(r.bytes)},
                                                {"pe_read_bytes", r.pe_read_bytes},
                                                {"de_read_bytes", r.de_read_bytes},
                                                {"ttft_s", r.ttft_s},
                                                {"tpot_s", r.tpot_s},
                                                {"decode_node", r.de.index},
                                                {"decode_engine", r.de_engine},
                                                {"prefill_node", r.pe.index},
                                                {"prefill_engine", r.pe_engine},
                                                {"attempts", r.attempts},
                                                {"layer_timeline_s", [&] {
                                                   Json tl = Json::array();
                                                   for (const auto& [l, c] : r.layer_timeline)
                                                     tl.push_back({l, c});
                                                   return tl;
                                                 }()}});
  }
  return Json{{"wall_s", wall_s}, {"sessions", sessions}};
}

std::string DemoReport::table() const {
  struct Row {
    int turns = 0;
    int64_t context = 0, prompt = 0, hit = 0;
    int pe = 0, de = 0, split = 0, rc = 0;
    HopBytes bytes;
    double ttft = 0, tpot = 0;
  };
  std::vector<Row> rows;
  Row total;
  for (const DemoTurn& t : turns) {
    if (static_cast<int>(rows.size()) <= t.session) rows.resize(t.session + 1);
    for (Row* row : {&rows[t.session], &total}) {
      const TurnResult& r = t.result;
      row->turns++;
      row->context = std::max(row->context, r.prompt_tokens);
      row->prompt += r.prompt_tokens;
      row->hit += r.hit_tokens;
      (r.path == sched::ReadPath::kPe      ? row->pe
       : r.path == sched::ReadPath::kDe    ? row->de
       : r.path == sched::ReadPath::kSplit ? row->split
                                           : row->rc)++;
      row->bytes += r.bytes;
      row->ttft += r.ttft_s;
      row->tpot += r.tpot_s;
    }
  }
  auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  std::string out =
      fmt::format("{:>7} {:>5} {:>7} {:>6} {:>11} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
                  "session", "turns", "context", "hit%", "pe/de/sp/rc", "read", "pe_h2d", "de_to_pe",
                  "pd_xfer", "de_h2d", "persist", "TTFT ms", "TPOT ms");
  auto line = [&](const std::string& name, const Row& r) {
    out += fmt::format(
        "{:>7} {:>5} {:>7} {:>5.1f}% {:>11} {:>7.1f}M {:>7.1f}M {:>7.1f}M {:>7.1f}M {:>7.1f}M "
        "{:>7.1f}M {:>8.1f} {:>8.2f}\n",
        name, r.turns, r.context, r.prompt ? 100.0 * r.hit / r.prompt : 0.0,
        fmt::format("{}/{}/{}/{}", r.pe, r.de, r.split, r.rc), mib(r.bytes.storage_read), mib(r.bytes.pe_h2d),
        mib(r.bytes.de_to_pe), mib(r.bytes.pd_transfer), mib(r.bytes.de_h2d), mib(r.bytes.persist),
        r.turns ? 1e3 * r.ttft / r.turns : 0.0, r.turns ? 1e3 * r.tpot / r.turns : 0.0);
  };
  for (size_t s = 0; s < rows.size(); ++s) line(std::to_string(s), rows[s]);
  line("all", total);
  return out;
}

}  // namespace dualpath::bench
