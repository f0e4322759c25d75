// One plan, two call sites (issue 31): a simulator run's recorded arrivals and load snapshots
// give byte-identical turn plans through the live service's call site (serve::TurnPlanner for
// the requests, a ClusterScheduler with serve::scheduler_params, sched::plan_turn), and the
// service derives the scheduler's parameters from a config exactly as the simulator does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>

#include "sched/cluster_scheduler.h"
#include "sched/turn_plan.h"
#include "serve/scheduler_service.h"
#include "serve/turn_planner.h"
#include "sim/cluster_sim.h"
#include "sim/experiment.h"

namespace dualpath::serve {
namespace {

std::string config_path(const char* name) {
  return std::string(std::getenv("DUALPATH_SOURCE_DIR")) + "/configs/" + name;
}

TEST(SharedPlan, ASimulatorRunsPlansReplayByteIdenticallyThroughTheServicesCallSite) {
  // The paper's modes, and full with issue 35's DE DRAM tier and read-or-recompute (the
  // simulator's tier residency as the requests' input; recompute_auto from the same [cache]).
  using Case = std::pair<ServeMode, bool>;  // (mode, with [cache])
  for (auto [mode, cache] : {Case{ServeMode::kFull, false}, Case{ServeMode::kBasic, false},
                             Case{ServeMode::kOracle, false}, Case{ServeMode::kSplit, false},
                             Case{ServeMode::kFull, true}}) {
    SCOPED_TRACE(std::string(serve_mode_name(mode)) + (cache ? " with [cache]" : ""));
    // The simulator on emu-2p4d's cluster, recording its scheduler's calls and its plans.
    auto file_or = Config::from_file(config_path("emu-2p4d.toml"));
    ASSERT_TRUE(file_or.is_ok());
    Config file = std::move(file_or).value();
    auto sc_or = sim::default_sim_config("ds660b");
    ASSERT_TRUE(sc_or.is_ok());
    sim::SimConfig sc = *sc_or;
    sim::ignore_live_sections(file);
    ASSERT_TRUE(sim::apply_config(file, sc).is_ok());
    sc.scheduler.mode = mode;
    sc.agents = 32;
    if (cache) {
      sc.de_dram_bytes = 400e9;
      sc.recompute = "auto";
    }
    std::vector<sched::SchedulerEvent> log;
    std::vector<std::string> sim_plans;
    std::optional<sched::ClusterSchedulerParams> sim_params;
    sim::SimOptions opt;
    opt.on_scheduler = [&](sched::ClusterScheduler& s) {
      sim_params = s.params();
      s.record_to(&log);
    };
    opt.on_plan = [&](const sched::TurnPlan& p) { sim_plans.push_back(sched::to_string(p)); };
    auto r = sim::run_experiment(sc, opt);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    ASSERT_GT(sim_plans.size(), 500u);

    // The live service on the same file, with an engine per GPU as the simulator has, and the
    // simulator's workload (bench live gives the service its typical turn the same way).
    auto live_or = read_serve_config(config_path("emu-2p4d.toml"));
    ASSERT_TRUE(live_or.is_ok()) << live_or.status().to_string();
    ServeConfig live = *live_or;
    live.scheduler.mode = mode;
    if (cache) {
      live.cache.de_dram_bytes = 400e9;
      live.cache.recompute = "auto";
    }
    live.engine.engines_per_node = live.engine.hardware.gpus_per_node;
    live.typical_turn = sim::typical_turn(*sim::build_agents(sc));
    auto params = scheduler_params(live);
    auto shape = scheduler_shape(live);
    ASSERT_TRUE(params.is_ok() && shape.is_ok()) << params.status().to_string();
    // Derived once: the same alpha, beta, policies as the simulator's from the same file.
    EXPECT_EQ(params->pe.alpha_tokens, sim_params->pe.alpha_tokens);
    EXPECT_EQ(params->pe.beta_tokens, sim_params->pe.beta_tokens);
    EXPECT_EQ(params->engines, sim_params->engines);
    EXPECT_EQ(params->paths, sim_params->paths);
    EXPECT_EQ(params->de.z_factor, sim_params->de.z_factor);
    EXPECT_EQ(params->split_min_tokens, sim_params->split_min_tokens);
    EXPECT_EQ(params->recompute_auto, cache);
    EXPECT_EQ(params->recompute_auto, sim_params->recompute_auto);
    EXPECT_EQ(params->read_tokens_per_s, sim_params->read_tokens_per_s);
    // The DE HBM budget is an input: the live node's arena, the simulator's GPU; the plans
    // are compared with the simulator's.
    sched::ClusterSchedulerParams p = *params;
    p.de_hbm_bytes = sim_params->de_hbm_bytes;
    p.de_group_hbm_bytes = sim_params->de_group_hbm_bytes;
    sched::ClusterScheduler service_side(*shape, p);
    const model::CostModel cost(*model::model_preset(live.engine.model), live.engine.hardware,
                                live.engine.efficiency);
    auto planner = make_turn_planner(live, &cost);
    ASSERT_TRUE(planner.is_ok()) << planner.status().to_string();
    planner->costs.de_hbm_budget_bytes = sim_params->de_hbm_bytes;

    // Replay: every arrival through the service's request builder, every other call as
    // recorded, every placement through plan_turn.
    std::map<int64_t, sched::SchedRequest> requests;
    std::vector<std::string> live_plans;
    auto plan_of = [&](const sched::Placement& pl) {
      live_plans.push_back(sched::to_string(sched::plan_turn(requests.at(pl.request_id), pl)));
    };
    for (const sched::SchedulerEvent& e : log) {
      using K = sched::SchedulerEvent::Kind;
      switch (e.kind) {
        case K::kSubmit: {
          const sched::SchedRequest& rec = e.request;
          const sched::SchedRequest req =
              planner->request(rec.id, rec.prompt_tokens, rec.gen_tokens, rec.hit_tokens,
                               rec.path, rec.dram_node, rec.dram_tokens);
          ASSERT_EQ(req.hit_tokens, rec.hit_tokens);
          ASSERT_EQ(req.dram_tokens, rec.dram_tokens);
          ASSERT_EQ(req.recompute_extra_s, rec.recompute_extra_s);
          ASSERT_EQ(req.hbm_need_bytes, rec.hbm_need_bytes);
          ASSERT_EQ(req.pe_work_s, rec.pe_work_s);
          requests[req.id] = req;
          if (auto placed = service_side.submit(req)) plan_of(*placed);
          break;
        }
        case K::kFetch:
          for (const sched::Placement& pl : service_side.fetch().placed) plan_of(pl);
          break;
        case K::kReadFinished:
          service_side.read_finished(e.index, e.tokens);
          break;
        case K::kPrefillFinished:
          service_side.prefill_finished(e.index, e.tokens, e.bytes);
          break;
        case K::kTurnFinished:
          service_side.turn_finished(e.index, e.tokens, e.bytes);
          break;
        case K::kReserveHbm:
          service_side.reserve_hbm(e.index, e.bytes);
          break;
        case K::kReportedReadQueue:
          service_side.set_reported_read_queue(e.index, e.tokens);
          break;
        case K::kNodeAlive:
          service_side.set_node_alive(e.index, e.alive);
          break;
      }
    }
    if (cache) {
      // The tier's input did reach the plans (the replay would pass vacuously otherwise).
      const auto from_dram =
          std::count_if(sim_plans.begin(), sim_plans.end(), [](const std::string& plan) {
            return plan.find("de_dram [") != std::string::npos;
          });
      EXPECT_GT(from_dram, 100) << "of " << sim_plans.size() << " plans";
    }
    ASSERT_EQ(live_plans.size(), sim_plans.size());
    for (size_t i = 0; i < sim_plans.size(); ++i) {
      ASSERT_EQ(live_plans[i], sim_plans[i]) << "plan " << i;
    }
  }
}

}  // namespace
}  // namespace dualpath::serve
