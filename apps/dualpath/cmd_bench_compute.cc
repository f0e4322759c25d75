// dualpath bench compute: prefill and decode tokens/s of the CPU reference transformer on one
// core (issue 5). The logic lives in bench/compute_bench.{h,cc}.

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/dualpath/command.h"
#include "bench/compute_bench.h"

namespace dualpath::app {
namespace {

void setup(CLI::App& parent, int& exit_code) {
  auto opt = std::make_shared<compute::ComputeBenchOptions>();
  auto json_path = std::make_shared<std::string>();
  CLI::App* cmd = parent.add_subcommand(
      "compute",
      "CPU reference transformer throughput on one thread: prefill tokens/s over an optional\n"
      "cached prefix, and decode steps/s at a given context; median and slowest of --repeats.\n"
      "Example: dualpath bench compute --model tiny,small --tokens 512 --cached 4096");
  cmd->add_option("--model", opt->models, "Presets to run, comma-separated (default tiny,small)")
      ->delimiter(',');
  cmd->add_option("--tokens", opt->prompt_tokens, "New tokens per prefill (default 512)");
  cmd->add_option("--cached", opt->cached_tokens,
                  "Cached tokens every prefill attends to (default 0)");
  cmd->add_option("--decode-context", opt->decode_context,
                  "Context tokens of the decode steps (default 4096)");
  cmd->add_option("--decode-steps", opt->decode_steps,
                  "Decode steps per repeat; 0 skips decode (default 16)");
  cmd->add_option("--repeats", opt->repeats, "Repeats per case (default 5)");
  cmd->add_option("--seed", opt->seed, "Weight seed (default 1)");
  cmd->add_option("--json", *json_path, "Write the rows here as JSON (a `rows` array)");
  cmd->callback([=, &exit_code] {
    auto rows = compute::run_compute_bench(*opt);
    if (!rows.is_ok()) {
      std::fprintf(stderr, "dualpath: bench compute: %s\n", rows.status().to_string().c_str());
      exit_code = rows.status().is_invalid_argument() ? 2 : 1;
      return;
    }
    nlohmann::json j = {{"rows", nlohmann::json::array()}};
    for (const auto& r : *rows) {
      std::printf("%s\n", r.to_line().c_str());
      j["rows"].push_back({{"backend", "cpu"},
                           {"model", r.model},
                           {"phase", r.phase},
                           {"tokens", r.tokens},
                           {"cached_tokens", r.cached_tokens},
                           {"repeats", r.repeats},
                           {"median_tokens_per_s", r.median_tokens_per_s},
                           {"min_tokens_per_s", r.min_tokens_per_s},
                           {"median_tokens_per_cpu_s", r.median_tokens_per_cpu_s}});
    }
    if (!json_path->empty()) {
      std::ofstream out(*json_path);
      out << j.dump(2) << "\n";
      if (!out) {
        std::fprintf(stderr, "dualpath: bench compute: cannot write '%s'; check the path\n",
                     json_path->c_str());
        exit_code = 1;
        return;
      }
    }
    exit_code = 0;
  });
}

DP_REGISTER_COMMAND("bench", "compute", setup);

}  // namespace
}  // namespace dualpath::app
