#include "sim/cluster_sim.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "sim/experiment.h"

namespace dualpath::sim {
namespace {

SimConfig small(Mode mode, int agents = 48) {
  SimConfig cfg = *default_sim_config("ds660b");
  cfg.scheduler.mode = mode;
  cfg.agents = agents;
  cfg.dataset = "32k";
  return cfg;
}

double expected_hit_bytes(const SimConfig& cfg, const std::vector<AgentPlan>& agents) {
  double bytes = 0;
  for (const auto& a : agents) {
    for (const auto& t : a.turns) {
      int64_t hit =
          std::min(t.context_tokens, t.prompt_tokens) / cfg.block_tokens * cfg.block_tokens;
      bytes += static_cast<double>(hit) * static_cast<double>(cfg.model.stored_bytes_per_token());
    }
  }
  return bytes;
}

TEST(ClusterSim, EveryTurnFinishesAndEveryHitIsReadExactlyOnce) {
  for (Mode mode : {Mode::kBasic, Mode::kLayerwise, Mode::kDualPath, Mode::kFull, Mode::kSplit}) {
    SimConfig cfg = small(mode);
    auto agents = build_agents(cfg);
    ASSERT_TRUE(agents.is_ok()) << agents.status().to_string();
    int64_t turns = 0;
    for (const auto& a : *agents) turns += static_cast<int64_t>(a.turns.size());
    auto r = simulate(cfg, *agents);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->turns, turns) << mode_name(mode);
    EXPECT_NEAR(r->storage_read_bytes / expected_hit_bytes(cfg, *agents), 1.0, 1e-9)
        << mode_name(mode);
  }
}

TEST(ClusterSim, HopBytesFollowThePapersAccounting) {
  SimConfig cfg = small(Mode::kFull);
  auto agents = *build_agents(cfg);
  auto r = *simulate(cfg, agents);
  const HopBytes& h = r.hops;
  // PE path: storage -> PE buffer -> PE HBM; DE path: storage -> DE buffer -> PE HBM.
  EXPECT_NEAR(h.pe_h2d, h.storage_read_pe, 1.0);
  EXPECT_NEAR(h.de_to_pe, h.storage_read_de, 1.0);
  // Decode start copies every prompt's KV once into DE HBM.
  double prompt_bytes = r.prompt_tokens * static_cast<double>(cfg.model.stored_bytes_per_token());
  EXPECT_NEAR(h.de_h2d / prompt_bytes, 1.0, 1e-9);
  // PE -> DE buffer: hit + miss on the PE path, miss only on the DE path: prompt - DE-side hits.
  EXPECT_NEAR((h.pd_transfer + h.storage_read_de) / prompt_bytes, 1.0, 1e-9);
  EXPECT_GT(r.pe_path_turns, 0);
  EXPECT_GT(r.de_path_turns, 0);
}

TEST(ClusterSim, SplitReadsReadEveryHitOnceWithBothSidesInOneRequest) {
  SimConfig cfg = small(Mode::kSplit);
  auto agents = *build_agents(cfg);
  auto r = *simulate(cfg, agents);
  const HopBytes& h = r.hops;
  EXPECT_NEAR(r.storage_read_bytes / expected_hit_bytes(cfg, agents), 1.0, 1e-9);
  EXPECT_GT(r.split_path_turns, 0);
  EXPECT_GT(r.split_read_bytes_pe, 0);
  EXPECT_GT(r.split_read_bytes_de, 0);
  EXPECT_LE(r.split_read_bytes_pe, h.storage_read_pe + 1.0);
  EXPECT_LE(r.split_read_bytes_de, h.storage_read_de + 1.0);
  // Each side's part arrives in PE HBM by its own hop, and only the PE side's part (with the
  // miss KV) crosses to the DE buffer.
  EXPECT_NEAR(h.pe_h2d, h.storage_read_pe, 1.0);
  EXPECT_NEAR(h.de_to_pe, h.storage_read_de, 1.0);
  double prompt_bytes = r.prompt_tokens * static_cast<double>(cfg.model.stored_bytes_per_token());
  EXPECT_NEAR((h.pd_transfer + h.storage_read_de) / prompt_bytes, 1.0, 1e-9);
  EXPECT_EQ(r.pe_path_turns + r.de_path_turns + r.split_path_turns, r.turns);
  // The JSON names them.
  const auto j = result_to_json(r);
  EXPECT_EQ(j.at("split_requests").get<int64_t>(), r.split_path_turns);
  EXPECT_GT(j.at("split_read_bytes").at("de").get<double>(), 0);
}

// Every hit token comes from exactly one source: storage on one side, a DE's DRAM or recompute.
void expect_hit_sources_add_up(const SimConfig& cfg, const SimResult& r) {
  const HitSources& h = r.hit_source_tokens;
  EXPECT_NEAR(h.de_dram + h.pe_storage + h.de_storage + h.recompute, r.hit_tokens, 0.5);
  const double bpt = static_cast<double>(cfg.model.stored_bytes_per_token());
  EXPECT_NEAR(r.storage_read_bytes, (h.pe_storage + h.de_storage) * bpt, 1.0);
  // The DE pushes what it read and what its DRAM held.
  EXPECT_NEAR(r.hops.de_to_pe, r.hops.storage_read_de + h.de_dram * bpt, 1.0);
}

TEST(ClusterSim, TheDramTierServesLaterTurnsWithoutStorageReads) {
  SimConfig cfg = small(Mode::kFull);
  auto agents = *build_agents(cfg);
  const SimResult off = *simulate(cfg, agents);
  EXPECT_EQ(off.hit_source_tokens.de_dram, 0);
  EXPECT_FALSE(off.dram_tier.enabled);
  expect_hit_sources_add_up(cfg, off);

  cfg.de_dram_bytes = 400e9;
  const SimResult on = *simulate(cfg, agents);
  expect_hit_sources_add_up(cfg, on);
  EXPECT_EQ(on.turns, off.turns);
  EXPECT_EQ(on.hit_tokens, off.hit_tokens);
  EXPECT_GT(on.dram_tier.hits, 0);
  EXPECT_GT(on.hit_source_tokens.de_dram, 0.5 * on.hit_tokens);
  EXPECT_LT(on.storage_read_bytes, 0.5 * off.storage_read_bytes);
  EXPECT_LE(on.dram_tier.peak_bytes, 400e9 * cfg.decode_nodes);
  // The same KV reaches the DE's HBM at decode start and is persisted alike.
  EXPECT_NEAR(on.hops.de_h2d, off.hops.de_h2d, 1.0);
  EXPECT_NEAR(on.storage_write_bytes, off.storage_write_bytes, 1.0);

  // A tier under pressure (a few sessions per node): copies are evicted while other turns wait
  // for placement with theirs; every hit still has exactly one source, and the tier never holds
  // more than its budget.
  cfg.de_dram_bytes = 4 * 32000.0 * static_cast<double>(cfg.model.stored_bytes_per_token());
  const SimResult tight = *simulate(cfg, agents);
  expect_hit_sources_add_up(cfg, tight);
  EXPECT_GT(tight.dram_tier.evicted, 0);
  EXPECT_GT(tight.dram_tier.hits, 0);
  EXPECT_LE(tight.dram_tier.peak_bytes, cfg.de_dram_bytes * cfg.decode_nodes + 1);

  // A tier too small for any session keeps nothing.
  cfg.de_dram_bytes = 1e6;
  const SimResult tiny = *simulate(cfg, agents);
  EXPECT_EQ(tiny.dram_tier.hits, 0);
  EXPECT_EQ(tiny.hit_source_tokens.de_dram, 0);
  EXPECT_NEAR(tiny.storage_read_bytes, off.storage_read_bytes, 1.0);
}

TEST(ClusterSim, AutoRecomputeOnlyWhenReadingIsSlowerAndEveryHitHasOneSource) {
  SimConfig cfg = small(Mode::kFull, 256);
  auto agents = *build_agents(cfg);
  cfg.recompute = "auto";
  const SimResult fast = *simulate(cfg, agents);
  expect_hit_sources_add_up(cfg, fast);
  // A storage NIC a hundred times slower: reading 32K contexts behind a queue takes longer than
  // computing them, so some hits are recomputed.
  cfg.hw.snic_bytes_per_s /= 100;
  const SimResult slow = *simulate(cfg, agents);
  expect_hit_sources_add_up(cfg, slow);
  EXPECT_GT(slow.recompute_turns, fast.recompute_turns);
  EXPECT_GT(slow.hit_source_tokens.recompute, 0);
  cfg.recompute = "never";
  const SimResult never = *simulate(cfg, agents);
  EXPECT_EQ(never.recompute_turns, 0);
  EXPECT_LT(slow.jct_s, never.jct_s);
  // Always: nothing is read, every hit is computed.
  cfg.recompute = "always";
  const SimResult always = *simulate(cfg, agents);
  expect_hit_sources_add_up(cfg, always);
  EXPECT_EQ(always.storage_read_bytes, 0);
  EXPECT_NEAR(always.hit_source_tokens.recompute, never.hit_tokens, 0.5);
}

TEST(ClusterSim, ABoundedStoreEvictsWholeSessionsWhoseNextTurnsRecompute) {
  SimConfig cfg = small(Mode::kFull);
  auto agents = *build_agents(cfg);
  const SimResult unbounded = *simulate(cfg, agents);
  EXPECT_FALSE(unbounded.store.bounded);
  // Room for everything: nothing evicted, the same run.
  cfg.store_capacity_bytes = 1e15;
  const SimResult roomy = *simulate(cfg, agents);
  EXPECT_EQ(roomy.store.evicted_sessions, 0);
  EXPECT_EQ(roomy.hit_tokens, unbounded.hit_tokens);
  EXPECT_EQ(roomy.jct_s, unbounded.jct_s);
  // A store for a few sessions: evictions, fewer hits, less read, every hit still one source.
  cfg.store_capacity_bytes = 10 * 32000.0 * static_cast<double>(cfg.model.stored_bytes_per_token());
  for (const char* policy : {"lru", "session"}) {
    SCOPED_TRACE(policy);
    cfg.evict = policy;
    const SimResult small_store = *simulate(cfg, agents);
    EXPECT_GT(small_store.store.evicted_sessions, 0);
    EXPECT_GT(small_store.store.evicted_bytes, 0);
    EXPECT_LE(small_store.store.peak_bytes, cfg.store_capacity_bytes);
    EXPECT_LT(small_store.hit_tokens, unbounded.hit_tokens);
    EXPECT_LT(small_store.storage_read_bytes, unbounded.storage_read_bytes);
    EXPECT_EQ(small_store.turns, unbounded.turns);
    expect_hit_sources_add_up(cfg, small_store);
  }
}

TEST(ClusterSim, BasicAndLayerwiseReadOnlyOnThePrefillSide) {
  for (Mode mode : {Mode::kBasic, Mode::kLayerwise}) {
    auto r = *run_experiment(small(mode));
    EXPECT_GT(r.hops.storage_read_pe, 0);
    EXPECT_EQ(r.hops.storage_read_de, 0) << mode_name(mode);
    EXPECT_EQ(r.de_path_turns, 0);
  }
}

TEST(ClusterSim, OracleMovesNoKvBytes) {
  auto r = *run_experiment(small(Mode::kOracle));
  EXPECT_EQ(r.storage_read_bytes, 0);
  EXPECT_EQ(r.hops.de_h2d + r.hops.pd_transfer + r.hops.pe_h2d + r.hops.persist, 0);
}

TEST(ClusterSim, PassStatisticsSayWhetherTheQuotaOrTheQueueEndedABatch) {
  SimConfig cfg = small(Mode::kFull);
  auto r = *run_experiment(cfg);
  EXPECT_GE(r.batched_requests_per_engine_pass, 1.0);
  EXPECT_LE(r.batched_requests_per_engine_pass, r.ready_requests_per_engine_pass);
  EXPECT_GE(r.quota_bound_fraction, 0.0);
  EXPECT_LE(r.quota_bound_fraction, 1.0);
  // A quota below one token's attention cuts nearly every batch (to one token: only a request
  // with one token left then runs whole); one no batch reaches (an hour) cuts none.
  cfg.scheduler.quota_s = 1e-7;
  EXPECT_GT(run_experiment(cfg)->quota_bound_fraction, 0.99);
  cfg.scheduler.quota_s = 3600;  // the largest the config accepts
  auto unbounded = *run_experiment(cfg);
  EXPECT_EQ(unbounded.quota_bound_fraction, 0.0);
  EXPECT_DOUBLE_EQ(unbounded.batched_requests_per_engine_pass,
                   unbounded.ready_requests_per_engine_pass);
  // Basic batches by HBM capacity, never by the quota.
  EXPECT_EQ(run_experiment(small(Mode::kBasic))->quota_bound_fraction, 0.0);
}

TEST(ClusterSim, SameSeedGivesTheSameJsonApartFromWallTime) {
  SimConfig cfg = small(Mode::kFull, 32);
  auto a = result_to_json(*run_experiment(cfg), true);
  auto b = result_to_json(*run_experiment(cfg), true);
  a.erase("wall_s");
  b.erase("wall_s");
  EXPECT_EQ(a.dump(), b.dump());
  cfg.seed = 2;
  auto c = result_to_json(*run_experiment(cfg), true);
  c.erase("wall_s");
  EXPECT_NE(a.dump(), c.dump());
}

TEST(ClusterSim, DualPathBeatsBasicWhenThePrefillStorageNicIsTheBottleneck) {
  SimConfig cfg = small(Mode::kBasic, 256);
  cfg.dataset = "64k";
  double basic = run_experiment(cfg)->jct_s;
  cfg.scheduler.mode = Mode::kFull;
  double full = run_experiment(cfg)->jct_s;
  EXPECT_LT(full, basic);
}

// Physics: no run beats its own I/O, compute or longest-agent floor, on random configurations.
TEST(ClusterSim, NoRunBeatsItsIoComputeOrChainFloor) {
  std::mt19937_64 rng(12345);
  const char* models[] = {"ds660b", "ds27b", "qwen32b"};
  const char* datasets[] = {"32k", "48k", "64k"};
  for (int i = 0; i < 10; ++i) {
    const char* m = models[rng() % 3];
    SimConfig cfg = *default_sim_config(m);
    cfg.scheduler.mode = static_cast<Mode>(rng() % 5);
    cfg.prefill_nodes = 1 + static_cast<int>(rng() % 3);
    cfg.decode_nodes = 1 + static_cast<int>(rng() % 3);
    if (std::string(m) == "ds660b") {  // 671 GB of weights need two nodes per EP group (each)
      cfg.prefill_nodes = std::max(2, cfg.prefill_nodes / 2 * 2);
      cfg.decode_nodes = std::max(2, cfg.decode_nodes / 2 * 2);
    }
    cfg.hw.snic_bytes_per_s = (5 + static_cast<double>(rng() % 60)) * 1e9;
    cfg.agents = 8 + static_cast<int>(rng() % 64);
    cfg.dataset = datasets[rng() % 3];
    cfg.seed = rng() % 1000;
    auto r = run_experiment(cfg);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    SCOPED_TRACE(fmt::format("{} {} {} agents={} snic={:.0f}GB/s", m, cfg.pd_label(),
                             mode_name(cfg.scheduler.mode), cfg.agents, cfg.hw.snic_bytes_per_s / 1e9));
    EXPECT_GE(r->jct_s, r->io_floor_s * (1 - 1e-9));
    EXPECT_GE(r->jct_s, r->compute_floor_s * (1 - 1e-9));
    EXPECT_GE(r->jct_s, r->chain_floor_s * (1 - 1e-9));
  }
}

// A handful of agents on a 2P4D cluster barely queue: the job takes about as long as its longest
// agent alone, far above the throughput floors; with many agents the throughput floors bind.
TEST(ClusterSim, FewAgentsFinishNearTheirLongestAgentAlone) {
  SimConfig cfg = *default_sim_config("ds660b");
  cfg.scheduler.mode = Mode::kFull;
  cfg.agents = 4;
  auto few = run_experiment(cfg);
  ASSERT_TRUE(few.is_ok()) << few.status().to_string();
  EXPECT_GE(few->jct_s, few->chain_floor_s);
  EXPECT_LT(few->jct_s, 1.2 * few->chain_floor_s);
  EXPECT_GT(few->chain_floor_s, 10 * std::max(few->io_floor_s, few->compute_floor_s));

  cfg.agents = 2048;
  auto many = run_experiment(cfg);
  ASSERT_TRUE(many.is_ok()) << many.status().to_string();
  EXPECT_GT(many->compute_floor_s, many->chain_floor_s);
}

TEST(ClusterSim, RejectsZeroAgents) {
  SimConfig cfg = small(Mode::kFull);
  cfg.agents = 0;
  auto r = run_experiment(cfg);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("agents"), std::string::npos);
}

// DS 660B's 17 GB of replicated weights plus the routed experts over one 8-GPU node (82 GB) do
// not fit in 80 GB; two nodes do. The error names the key and the group size that fits.
TEST(ClusterSim, RejectsAnEpGroupTooSmallForTheWeights) {
  SimConfig cfg = small(Mode::kFull);
  cfg.pe_ep_nodes = 1;
  Status s = cfg.validate();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("cluster.pe_ep_nodes = 1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("(2 nodes"), std::string::npos) << s.message();
  // Replicated weights alone over the HBM: no group size helps, and the error says so.
  cfg.pe_ep_nodes = 2;
  cfg.hbm_reserved_bytes = 70e9;
  s = cfg.validate();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("at any EP size"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace dualpath::sim

namespace dualpath::sim {
namespace {

// Adaptive P/D: DS 27B on 3 nodes (EP groups of one node) from the prefill-heavy 2P1D. The
// controller hands a node to decode once decode fills; every turn still finishes, every hit is
// read once, and the split always accounts for all 3 nodes.
TEST(ClusterSimAdaptive, AChangeDrainsRestartsAndLosesNoTurn) {
  SimConfig cfg = *default_sim_config("ds27b");
  cfg.dataset = "48k";
  cfg.agents = 1024;  // enough to fill the decode node (docs/sched.md's run)
  cfg.prefill_nodes = 2;
  cfg.decode_nodes = 1;
  cfg.adaptive.enabled = true;
  ASSERT_TRUE(cfg.validate().is_ok()) << cfg.validate().to_string();
  auto agents = *build_agents(cfg);
  int64_t turns = 0;
  for (const auto& a : agents) turns += static_cast<int64_t>(a.turns.size());
  auto r = simulate(cfg, agents);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->turns, turns);
  EXPECT_NEAR(r->storage_read_bytes / expected_hit_bytes(cfg, agents), 1.0, 1e-9);
  ASSERT_TRUE(r->adaptive_pd);
  ASSERT_FALSE(r->role_changes.empty());
  const RoleChange& c = r->role_changes.front();
  EXPECT_EQ(c.node, 1);  // the second prefill node becomes the second decode node
  EXPECT_EQ(c.from, "prefill");
  EXPECT_EQ(c.to, "decode");
  EXPECT_NEAR(c.switch_s, cfg.adaptive.switch_s, 1e-9);  // same EP size: no reload
  EXPECT_GE(c.drain_s, 0);
  ASSERT_GE(r->pd_over_time.size(), 3u);
  EXPECT_EQ(r->pd_over_time.front().prefill_nodes, 2);
  for (const PdPoint& p : r->pd_over_time)
    EXPECT_EQ(p.prefill_nodes + p.decode_nodes + p.switching_nodes, 3) << p.t_s;
  EXPECT_EQ(r->pd_over_time.back().prefill_nodes, 1);
  EXPECT_EQ(r->pd_over_time.back().decode_nodes, 2);
  // The JSON contract (issue 20's interface): role_changes with time, node, from, to, and
  // pd_over_time.
  const auto j = result_to_json(*r);
  ASSERT_EQ(j.at("role_changes").size(), r->role_changes.size());
  const auto& jc = j.at("role_changes").at(0);
  EXPECT_DOUBLE_EQ(jc.at("time").get<double>(), c.t_s);
  EXPECT_EQ(jc.at("node").get<int>(), 1);
  EXPECT_EQ(jc.at("from").get<std::string>(), "prefill");
  EXPECT_EQ(jc.at("to").get<std::string>(), "decode");
  EXPECT_EQ(j.at("pd_over_time").size(), r->pd_over_time.size());
  EXPECT_EQ(j.at("pd_over_time").at(0).at("prefill_nodes").get<int>(), 2);
  // Deterministic: the same run again gives the same JCT and changes.
  auto again = simulate(cfg, agents);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->jct_s, r->jct_s);
  EXPECT_EQ(again->role_changes.size(), r->role_changes.size());
}

TEST(ClusterSimAdaptive, ANewEpSizeReloadsTheWeightsAndRoundRobinModesAreRefused) {
  SimConfig cfg = *default_sim_config("ds660b");
  cfg.dataset = "64k";
  cfg.agents = 1024;
  cfg.prefill_nodes = 4;
  cfg.decode_nodes = 2;
  cfg.adaptive.enabled = true;
  auto r = simulate(cfg, *build_agents(cfg));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  // 4P2D -> 2P4D: nodes 2, 3 change role; nodes 4, 5 go from an EP-16 to an EP-32 decode group.
  ASSERT_EQ(r->role_changes.size(), 2u);
  ASSERT_EQ(r->ep_regroups.size(), 2u);
  EXPECT_EQ(r->ep_regroups[0].ep_gpus_from, 16);
  EXPECT_EQ(r->ep_regroups[0].ep_gpus_to, 32);
  EXPECT_GT(r->ep_regroups[0].switch_s, cfg.adaptive.switch_s);  // + the weight reload

  cfg.scheduler.mode = Mode::kBasic;
  Status s = cfg.validate();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("adaptive.enabled"), std::string::npos) << s.message();
}

TEST(SimConfig, ALastEpGroupTooSmallForTheWeightsIsRefusedWithTheFix) {
  SimConfig cfg = *default_sim_config("ds660b");  // prefill EP groups of 2 nodes
  cfg.prefill_nodes = 3;
  cfg.decode_nodes = 3;
  cfg.fit_ep_groups();
  Status s = cfg.validate();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("last group of 1 node"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cluster.pe_ep_nodes"), std::string::npos) << s.message();
  cfg.pe_ep_nodes = 3;
  EXPECT_TRUE(cfg.validate().is_ok()) << cfg.validate().to_string();
}

}  // namespace
}  // namespace dualpath::sim
