// One policy, two call sites (issue 17 "Shared policy"): the decisions the simulator's cluster
// scheduler made on a run replay identically through a scheduler built the way the service
// builds its own (serve::scheduler_shape, the service's mode policies). Neither rewrites the
// policy: both are sched::ClusterScheduler.
#include <gtest/gtest.h>

#include "sched/cluster_scheduler.h"
#include "serve/scheduler_service.h"
#include "sim/experiment.h"

namespace dualpath::serve {
namespace {

TEST(SharedPolicy, ASimulatorRunsDecisionsReplayThroughTheServicesScheduler) {
  const std::pair<sim::Mode, ServeMode> modes[] = {{sim::Mode::kFull, ServeMode::kFull},
                                                   {sim::Mode::kBasic, ServeMode::kBasic},
                                                   {sim::Mode::kOracle, ServeMode::kOracle}};
  for (auto [sim_mode, serve_mode] : modes) {
    SCOPED_TRACE(std::string(serve_mode_name(serve_mode)));
    sim::SimConfig sc = *sim::default_sim_config("ds660b");
    sc.dataset = "32k";
    sc.agents = 64;
    sc.scheduler.mode = sim_mode;
    std::vector<sched::SchedulerEvent> log;
    std::optional<sched::ClusterShape> sim_shape;
    std::optional<sched::ClusterSchedulerParams> sim_params;
    sim::SimOptions opt;
    opt.on_scheduler = [&](sched::ClusterScheduler& s) {
      sim_shape = s.shape();
      sim_params = s.params();
      s.record_to(&log);
    };
    auto r = sim::run_experiment(sc, opt);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    ASSERT_GT(log.size(), 1000u);

    // The live cluster of the same shape: 2P4D, an engine per GPU, the same EP groups.
    ServeConfig live;
    live.engine.prefill_nodes = sc.prefill_nodes;
    live.engine.decode_nodes = sc.decode_nodes;
    live.engine.engines_per_node = sc.hw.gpus_per_node;
    live.engine.pe_ep_nodes = sc.pe_ep_nodes;
    live.engine.de_ep_nodes = sc.de_ep_nodes;
    live.scheduler.mode = serve_mode;
    auto shape = scheduler_shape(live);
    ASSERT_TRUE(shape.is_ok());
    EXPECT_EQ(shape->prefill_nodes, sim_shape->prefill_nodes);
    EXPECT_EQ(shape->decode_nodes, sim_shape->decode_nodes);
    EXPECT_EQ(shape->pe_engines_per_node, sim_shape->pe_engines_per_node);
    EXPECT_EQ(shape->de_engines_per_node, sim_shape->de_engines_per_node);
    EXPECT_EQ(shape->pe_ep_nodes, sim_shape->pe_ep_nodes);
    EXPECT_EQ(shape->de_ep_nodes, sim_shape->de_ep_nodes);
    // The mode's policies are the simulator's for the same mode.
    EXPECT_EQ(live.engine_policy(), sim_params->engines);
    EXPECT_EQ(live.path_policy(), sim_params->paths);
    // Alpha, beta and the HBM budget are inputs (the service derives them from its nodes, the
    // simulator from its workload): with the simulator's, every decision is the same.
    sched::ClusterSchedulerParams params = *sim_params;
    params.engines = live.engine_policy();
    params.paths = live.path_policy();
    sched::ClusterScheduler service_side(*shape, params);
    EXPECT_EQ(sched::replay_log(log, service_side), 0);
  }
}

}  // namespace
}  // namespace dualpath::serve
