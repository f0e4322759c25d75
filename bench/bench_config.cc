#include "bench/bench_config.h"

#include <fmt/format.h>

#include "common/config.h"

namespace dualpath::bench {

Result<BenchConfigs> load_bench_configs(const std::string& path) {
  if (path.empty()) {
    return Status::invalid_argument(
        "--config is required: the cluster file both the live system and the simulator run, "
        "e.g. --config configs/emu-1p2d.toml");
  }
  DP_ASSIGN_OR_RETURN(Config file, Config::from_file(path));
  BenchConfigs c;
  // apply_config starts over from the defaults of the file's model.preset.
  DP_ASSIGN_OR_RETURN(c.sim, sim::default_sim_config("ds660b"));
  DP_RETURN_IF_ERROR(sim::apply_config(file, c.sim));
  if (c.sim.de_dram_bytes > 0 || c.sim.recompute != "never")
    return Status::invalid_argument(fmt::format(
        "{}: [cache] de_dram_gb = {} / recompute = '{}': the DE DRAM tier and read-or-recompute "
        "are modelled by the simulator only (dualpath sim, dualpath capacity); the live system "
        "does not have them yet, so a live-vs-simulator comparison would compare different "
        "systems: remove them from [cache] for bench live / bench serve",
        path, c.sim.de_dram_bytes / 1e9, c.sim.recompute));
  DP_RETURN_IF_ERROR(serve::apply_serve_config(file, c.live));
  file.ignore_section("online");  // read by the simulator's reader above
  DP_RETURN_IF_ERROR(file.finish());
  return c;
}

}  // namespace dualpath::bench
