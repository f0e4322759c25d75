// Online serving in the simulator: Poisson agents, the stop rule, the SLO, the TTFT breakdown,
// the working set, SLO capacity and content-addressed trace replay (PAPER.md §9, §10.4, §10.8).

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include <unistd.h>

#include "sim/capacity.h"
#include "workload/test_trace_file.h"
#include "sim/cluster_sim.h"
#include "sim/experiment.h"
#include "workload/mooncake_reader.h"

namespace dualpath::sim {
namespace {

namespace fs = std::filesystem;

// DS 27B on 1P1D with the 32K dataset (60 turns per agent) and a shortened stop rule, so that a
// run takes a fraction of a second: the rule is the paper's, its windows are smaller.
SimConfig online_small(Mode mode, double aps) {
  SimConfig cfg = *default_sim_config("ds27b");
  cfg.scheduler.mode = mode;
  cfg.dataset = "32k";
  cfg.online.aps = aps;
  cfg.online.window_s = 100;
  cfg.online.lookback_s = 600;
  cfg.online.duration_s = 4000;
  return cfg;
}

TEST(OnlineSim, ReportsTheLastWindowAndItsBreakdownAddsUpToTheTtft) {
  for (Mode mode : {Mode::kBasic, Mode::kFull, Mode::kOracle}) {
    SCOPED_TRACE(std::string(mode_name(mode)));
    auto r = run_experiment(online_small(mode, 0.3));
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_TRUE(r->online);
    EXPECT_DOUBLE_EQ(r->aps, 0.3);
    EXPECT_TRUE(r->stop_reason == "steady_state" || r->stop_reason == "duration") << r->stop_reason;
    EXPECT_NEAR(r->report_to_s - r->report_from_s, 100, 1e-9);
    ASSERT_GT(r->ttft.count, 100);
    ASSERT_GT(r->tpot.count, 100);
    EXPECT_LE(r->ttft.p50, r->ttft.p90);
    EXPECT_LE(r->ttft.p90, r->ttft.p99);
    // The parts are gaps between one request's timestamps: they add up to its TTFT.
    EXPECT_NEAR(r->ttft_breakdown.total(), r->ttft.mean, 1e-4 * r->ttft.mean + 1e-6);
    EXPECT_NEAR(r->ttft_breakdown.schedule,
                r->ttft_breakdown.scheduler_queue + r->ttft_breakdown.read_queue +
                    r->ttft_breakdown.engine_queue,
                1e-9);
    EXPECT_GE(r->ttft_breakdown.prefill, 0);
    if (mode == Mode::kOracle) {
      EXPECT_EQ(r->ttft_breakdown.read, 0);
    }
    // The SLO verdict is the statistic of the reported window against the bounds.
    EXPECT_EQ(r->slo_met, r->ttft.mean <= 4.0 && r->tpot.mean <= 0.05);
    EXPECT_GT(r->agents_arrived, r->agents_finished);
    EXPECT_GT(r->working_set_bytes, 0);
    // The timeseries counts the agents still running when the run stops (it once counted only
    // those that had finished, so its last buckets fell towards zero).
    ASSERT_GE(r->timeseries.size(), 2u);
    const double last = r->timeseries[r->timeseries.size() - 2].running_agents;
    EXPECT_GT(last, 0.5 * r->running_agents_mean);
    EXPECT_LT(last, 1.5 * r->running_agents_mean);
  }
}

TEST(OnlineSim, HitTurnsAndFirstTurnsAreReportedApartAndTheSloCanJudgeHitTurnsOnly) {
  SimConfig cfg = online_small(Mode::kFull, 0.05);
  auto agents = *build_agents(cfg);
  // First turns of 30K uncached tokens (WEKA's carry up to 900K): far slower than the rest.
  for (AgentPlan& a : agents) {
    a.turns[0].prompt_tokens = 30000;
    a.turns[0].context_tokens = 0;
  }
  const SimResult all = *simulate(cfg, agents);
  EXPECT_EQ(all.slo_turns, "all");
  EXPECT_EQ(all.ttft_hit.count + all.ttft_first.count, all.ttft.count);
  ASSERT_GT(all.ttft_hit.count, 0);
  ASSERT_GT(all.ttft_first.count, 0);
  ASSERT_GT(all.ttft_first.mean, 3 * all.ttft_hit.mean);
  // An SLO between the hit turns' mean and the first turns': every turn breaks it on the mean,
  // the hit turns alone meet it.
  cfg.online.slo_ttft_s = 2 * all.ttft_hit.mean;
  cfg.online.slo_statistic = "p50";
  cfg.online.slo_turns = "hit";
  const SimResult judged_hit = *simulate(cfg, agents);
  EXPECT_EQ(judged_hit.slo_turns, "hit");
  EXPECT_EQ(judged_hit.ttft_hit.count + judged_hit.ttft_first.count, judged_hit.ttft.count);
  EXPECT_TRUE(judged_hit.slo_met) << judged_hit.stop_reason;
  cfg.online.slo_ttft_s = (all.ttft_hit.p50 + all.ttft_first.p50) / 2;
  cfg.online.slo_statistic = "p99";
  cfg.online.slo_turns = "all";
  const SimResult judged_all = *simulate(cfg, agents);
  EXPECT_FALSE(judged_all.slo_met) << judged_all.stop_reason;
}

TEST(OnlineSim, SessionAwareEvictionTakesEndedSessionsBeforeRunningOnes) {
  SimConfig cfg = online_small(Mode::kFull, 0.05);
  auto agents = *build_agents(cfg);
  const SimResult unbounded = *simulate(cfg, agents);
  ASSERT_GT(unbounded.agents_finished, 0);
  // Twice the running sessions' mean working set: the ended sessions' KV is what overflows it.
  cfg.store_capacity_bytes = 2 * unbounded.working_set_bytes;
  cfg.evict = "session";
  const SimResult session = *simulate(cfg, agents);
  EXPECT_GT(session.store.evicted_sessions, 0);
  EXPECT_EQ(session.store.evicted_running_sessions, 0);
  EXPECT_EQ(session.hit_tokens, unbounded.hit_tokens);
  cfg.evict = "lru";
  const SimResult lru = *simulate(cfg, agents);
  EXPECT_LE(lru.hit_tokens, unbounded.hit_tokens);
  EXPECT_GE(lru.store.evicted_running_sessions, session.store.evicted_running_sessions);
}

TEST(OnlineSim, PrefetchRestagesSessionsWhoseDramCopyExpiredDuringTheirThinkTime) {
  SimConfig cfg = online_small(Mode::kFull, 0.05);
  auto agents = *build_agents(cfg);
  for (AgentPlan& a : agents) a.think_s.assign(a.turns.size(), 30.0);  // 30 s between turns
  cfg.de_dram_bytes = 400e9;
  cfg.de_dram_ttl_s = 10;  // every copy expires in the gap
  const SimResult never = *simulate(cfg, agents);
  EXPECT_GT(never.dram_tier.expired, 0);
  EXPECT_EQ(never.dram_tier.hits, 0);
  EXPECT_EQ(never.prefetch_bytes, 0);
  // Predict stages each session to land by its expected return (30 s after its turn ended).
  cfg.prefetch = "predict";
  const SimResult predict = *simulate(cfg, agents);
  EXPECT_GT(predict.dram_tier.prefetches, 0);
  EXPECT_GT(predict.dram_tier.prefetch_used_bytes, 0);
  EXPECT_GT(predict.hit_source_tokens.de_dram, 0);
  EXPECT_LT(predict.storage_read_bytes, never.storage_read_bytes);
  EXPECT_LE(predict.prefetch_wasted_bytes + predict.dram_tier.prefetch_used_bytes,
            predict.prefetch_bytes + 1);
  // Demand reads are what the hits did not get from DRAM; prefetches are counted apart.
  const HitSources& h = predict.hit_source_tokens;
  EXPECT_NEAR(predict.storage_read_bytes,
              (h.pe_storage + h.de_storage) * static_cast<double>(cfg.model.stored_bytes_per_token()),
              1.0);
  // Always stages a copy again as soon as it expires, with a fresh TTL shorter than the rest of
  // the gap: it expires again before the session returns, every byte wasted.
  cfg.prefetch = "always";
  const SimResult always = *simulate(cfg, agents);
  EXPECT_GT(always.dram_tier.prefetches, predict.dram_tier.prefetches);
  EXPECT_GT(always.prefetch_wasted_bytes, predict.prefetch_wasted_bytes);
  EXPECT_LE(always.hit_source_tokens.de_dram, predict.hit_source_tokens.de_dram);
}

TEST(OnlineSim, AnOverloadedRunStopsAsSoonAsItsTtftBreaksTheSlo) {
  auto r = run_experiment(online_small(Mode::kBasic, 20.0));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->stop_reason, "ttft_slo");
  EXPECT_FALSE(r->slo_met);
  EXPECT_GT(r->ttft.mean, 4.0);
  EXPECT_LT(r->jct_s, 4000);
}

TEST(OnlineSim, TheDurationCapStopsARunThatNeverSettles) {
  SimConfig cfg = online_small(Mode::kFull, 0.3);
  cfg.online.duration_s = 500;  // shorter than lookback + window: the steady test cannot pass
  auto r = run_experiment(cfg);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->stop_reason, "duration");
  EXPECT_NEAR(r->jct_s, 500, 10);
}

TEST(OnlineSim, SameSeedGivesTheSameJsonApartFromWallTime) {
  SimConfig cfg = online_small(Mode::kFull, 0.4);
  auto a = result_to_json(*run_experiment(cfg));
  auto b = result_to_json(*run_experiment(cfg));
  a.erase("wall_s");
  b.erase("wall_s");
  EXPECT_EQ(a.dump(), b.dump());
  cfg.seed = 7;
  auto c = result_to_json(*run_experiment(cfg));
  c.erase("wall_s");
  EXPECT_NE(a.dump(), c.dump());
}

// Physics: more load never makes the median first token come sooner. The same seed gives the
// same agents at every rate, with their arrival times scaled.
TEST(OnlineSim, TtftMedianDoesNotFallAsTheArrivalRateRises) {
  for (Mode mode : {Mode::kBasic, Mode::kFull}) {
    double prev = 0;
    for (double aps : {0.05, 0.15, 0.3, 0.45}) {
      auto r = run_experiment(online_small(mode, aps));
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      EXPECT_GE(r->ttft.p50, prev * 0.98) << mode_name(mode) << " at " << aps << " APS";
      prev = r->ttft.p50;
    }
  }
}

TEST(OnlineSim, WorkingSetGrowsWithTheArrivalRateAndTracksThePapersFormula) {
  double prev = 0;
  for (double aps : {0.1, 0.3}) {
    SimConfig cfg = online_small(Mode::kOracle, aps);
    auto r = run_experiment(cfg);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_GT(r->working_set_bytes, prev);
    prev = r->working_set_bytes;
    // aps * T * len / 2: same order as the measured KV of the running agents.
    EXPECT_GT(r->working_set_formula_bytes, 0.5 * r->working_set_bytes);
    EXPECT_LT(r->working_set_formula_bytes, 2.0 * r->working_set_bytes);
  }
}

// Physics on random clusters: removing I/O never lowers the capacity, and DualPath's scheduler
// with both read paths never serves less than Basic. The search resolves 8 %, so each inequality
// is allowed that much slack. (Short windows keep the 27 runs a few seconds.)
TEST(OnlineSim, CapacityOfOracleAtLeastDualPathAtLeastBasicOnRandomClusters) {
  std::mt19937_64 rng(2026);
  CapacityOptions opt;
  opt.tolerance = 0.08;
  // Three random clusters; one under the sanitizers, where the nine capacity searches take 2 min.
#ifdef DP_SANITIZED
  const int clusters = 1;
#else
  const int clusters = 3;
#endif
  for (int i = 0; i < clusters; ++i) {
    SimConfig cfg = online_small(Mode::kBasic, 1);
    cfg.online.window_s = 50;
    cfg.online.lookback_s = 240;
    cfg.online.duration_s = 900;
    cfg.prefill_nodes = 1 + static_cast<int>(rng() % 2);
    cfg.decode_nodes = 1 + static_cast<int>(rng() % 2);
    cfg.hw.snic_bytes_per_s = (10 + static_cast<double>(rng() % 50)) * 1e9;
    cfg.seed = rng() % 1000;
    SCOPED_TRACE(fmt::format("{} snic {:.0f} GB/s seed {}", cfg.pd_label(),
                             cfg.hw.snic_bytes_per_s / 1e9, cfg.seed));
    double cap[3];
    int k = 0;
    for (Mode m : {Mode::kBasic, Mode::kFull, Mode::kOracle}) {
      cfg.scheduler.mode = m;
      auto c = find_capacity(cfg, opt);
      ASSERT_TRUE(c.is_ok()) << c.status().to_string();
      std::printf("%s %s: capacity %.3f APS in %zu probes, %.1f s wall\n", cfg.pd_label().c_str(),
                  std::string(mode_name(m)).c_str(), c->aps_capacity, c->probes.size(), c->wall_s);
      EXPECT_TRUE(c->at_capacity.slo_met);
      EXPECT_LE(c->aps_first_missed / c->aps_capacity - 1, opt.tolerance + 1e-12);
      cap[k++] = c->aps_capacity;
    }
    EXPECT_GE(cap[1], cap[0] * (1 - opt.tolerance)) << "DualPath below Basic";
    EXPECT_GE(cap[2], cap[1] * (1 - opt.tolerance)) << "Oracle below DualPath";
  }
}

TEST(CapacityOverSeeds, SummarisesTheMedianAndTheRangeAndShowsTheMiddleSeed) {
  auto seed_cap = [](uint64_t seed, double aps) {
    SeedCapacity s;
    s.seed = seed;
    s.result.aps_capacity = aps;
    s.result.wall_s = 1;
    return s;
  };
  // Odd count: the middle value, and the seed that gave it.
  auto odd = summarize_seeds({seed_cap(1, 0.30), seed_cap(2, 0.20), seed_cap(3, 0.25)});
  EXPECT_DOUBLE_EQ(odd.median_aps, 0.25);
  EXPECT_DOUBLE_EQ(odd.min_aps, 0.20);
  EXPECT_DOUBLE_EQ(odd.max_aps, 0.30);
  EXPECT_EQ(odd.seeds[odd.median_seed].seed, 3u);
  EXPECT_DOUBLE_EQ(odd.wall_s, 3);
  // Even count: the mean of the middle two; the run shown is the lower middle one's.
  auto even = summarize_seeds({seed_cap(7, 0.4), seed_cap(8, 0.1), seed_cap(9, 0.2), seed_cap(10, 0.3)});
  EXPECT_DOUBLE_EQ(even.median_aps, 0.25);
  EXPECT_EQ(even.seeds[even.median_seed].seed, 9u);
  // One seed: itself.
  auto one = summarize_seeds({seed_cap(5, 0.7)});
  EXPECT_DOUBLE_EQ(one.median_aps, 0.7);
  EXPECT_DOUBLE_EQ(one.min_aps, 0.7);
  EXPECT_EQ(one.median_seed, 0u);
}

TEST(CapacityOverSeeds, EachSeedIsItsOwnWorkloadDrawAndTheMedianLiesAmongThem) {
  CapacityOptions opt;
  opt.tolerance = 0.08;
  std::vector<SeedCapacity> found;
  for (uint64_t seed : {11u, 12u, 13u}) {
    SimConfig cfg = online_small(Mode::kBasic, 1);
    cfg.online.window_s = 50;
    cfg.online.lookback_s = 240;
    cfg.online.duration_s = 900;
    cfg.seed = seed;
    auto c = find_capacity(cfg, opt);
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    found.push_back({seed, std::move(c).value()});
  }
  auto all = summarize_seeds(found);
  EXPECT_LE(all.min_aps, all.median_aps);
  EXPECT_LE(all.median_aps, all.max_aps);
  // The draws differ: the three searches do not all probe the same rates.
  const bool same = found[0].result.probes.size() == found[1].result.probes.size() &&
                    found[1].result.probes.size() == found[2].result.probes.size() &&
                    found[0].result.aps_capacity == found[1].result.aps_capacity &&
                    found[1].result.aps_capacity == found[2].result.aps_capacity &&
                    found[0].result.estimate_aps == found[1].result.estimate_aps;
  EXPECT_FALSE(same) << "three seeds gave one workload";
}

TEST(OnlineSim, CapacitySaysPlainlyWhenNoRateMeetsTheSlo) {
  SimConfig cfg = online_small(Mode::kFull, 1);
  cfg.online.slo_tpot_s = 0.001;  // no decode step is this fast
  auto c = find_capacity(cfg);
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("no arrival rate meets the SLO"), std::string::npos)
      << c.status().message();
}

using TraceFile = workload::TestTraceFile;

// A content-addressed store: a request hits the leading blocks that earlier requests stored, so
// an arrival before its predecessor finished misses what one after it hits.
TEST(OnlineSim, TraceRequestsHitOnlyWhatEarlierRequestsHaveStored) {
  // B repeats A's two full blocks and adds one; C, long after, repeats all of B.
  const std::string a =
      R"({"timestamp": 0, "input_length": 1024, "output_length": 8, "hash_ids": [1, 2]})";
  for (auto [b_ms, want_b_hit] : {std::pair{100000, 1024}, std::pair{1, 0}}) {
    TraceFile f(
        a + "\n" +
        fmt::format(R"({{"timestamp": {}, "input_length": 1500, )"
                    R"("output_length": 8, "hash_ids": [1, 2, 3]}})",
                    b_ms) +
        "\n" +
        R"({"timestamp": 900000, "input_length": 1500, "output_length": 8, "hash_ids": [1, 2, 3]})" +
        "\n");
    SimConfig cfg = *default_sim_config("ds27b");
    cfg.dataset = "mooncake:" + f.path();
    auto r = run_experiment(cfg);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->stop_reason, "trace_end");
    EXPECT_EQ(r->turns, 3);
    // C hits A's two blocks (B's third block is partial: 1500 = 2 x 512 + 476, never stored).
    EXPECT_DOUBLE_EQ(r->hit_tokens, want_b_hit + 1024) << "B at " << b_ms << " ms";
    EXPECT_EQ(r->stored_blocks, 2);
    EXPECT_NEAR(r->trace_static_hit_ratio, 2048.0 / 4024.0, 1e-12);
  }
}

TEST(OnlineSim, SlowedDownRealTraceHitsExactlyWhatItsSourceCounts) {
  const char* shared = std::getenv("DUALPATH_SHARED_DIR");
  const std::string path =
      shared ? std::string(shared) + "/traces/mooncake_fast25/synthetic_trace.jsonl" : "";
  if (path.empty() || !fs::exists(path)) GTEST_SKIP() << "shared/traces not found";
  SimConfig cfg = *default_sim_config("ds27b");
  cfg.dataset = "mooncake:" + path;
  // At 1/100 of its rate a request has finished and stored its blocks before the next arrives,
  // so the replay hits the trace's own count (SOURCE.md: 65.0 %), but for the 11 pairs of
  // requests with the same timestamp, which cannot reuse each other's blocks.
  cfg.online.time_scale = 100;
  cfg.online.duration_s = 1e7;
  auto r = run_experiment(cfg);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_LE(r->hit_ratio, r->trace_static_hit_ratio);
  EXPECT_NEAR(r->hit_ratio, r->trace_static_hit_ratio, 0.003);
  EXPECT_NEAR(r->trace_static_hit_ratio, 0.650, 0.002);
  // At its own rate it hits less, never more.
  cfg.online.time_scale = 1;
  auto fast = run_experiment(cfg);
  ASSERT_TRUE(fast.is_ok()) << fast.status().to_string();
  EXPECT_LE(fast->hit_ratio, fast->trace_static_hit_ratio);
}

}  // namespace
}  // namespace dualpath::sim
