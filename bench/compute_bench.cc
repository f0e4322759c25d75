#include "bench/compute_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include "common/percentiles.h"
#include "compute/cpu_model.h"
#include "compute/init_rng.h"

namespace dualpath::compute {
namespace {

std::vector<int32_t> bench_tokens(int64_t n, int32_t vocab, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(vocab));
  return t;
}

// Wall and thread-CPU seconds, read together.
struct Stopwatch {
  std::chrono::steady_clock::time_point wall0 = std::chrono::steady_clock::now();
  double cpu0 = thread_cpu_s();

  static double thread_cpu_s() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }
  double wall_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  }
  double cpu_s() const { return thread_cpu_s() - cpu0; }
};

ComputeBenchRow summarise(std::string model,
                          std::string phase,
                          int64_t tokens,
                          int64_t cached,
                          const std::vector<double>& rates,
                          const std::vector<double>& cpu_rates) {
  ComputeBenchRow r;
  r.model = std::move(model);
  r.phase = std::move(phase);
  r.tokens = tokens;
  r.cached_tokens = cached;
  r.repeats = static_cast<int>(rates.size());
  r.median_tokens_per_s = median(rates);
  r.min_tokens_per_s = *std::min_element(rates.begin(), rates.end());
  r.median_tokens_per_cpu_s = median(cpu_rates);
  return r;
}

}  // namespace

std::string ComputeBenchRow::to_line() const {
  return fmt::format(
      "compute_bench  backend=cpu  model={}  phase={}  tokens={}  cached={}  threads=1  "
      "repeats={}  median={:.0f} tok/s  min={:.0f} tok/s  per_cpu_s={:.0f} tok/s",
      model, phase, tokens, cached_tokens, repeats, median_tokens_per_s, min_tokens_per_s,
      median_tokens_per_cpu_s);
}

Result<std::vector<ComputeBenchRow>> run_compute_bench(const ComputeBenchOptions& o) {
  if (o.prompt_tokens < 1 || o.cached_tokens < 0 || o.repeats < 1 || o.decode_steps < 0 ||
      o.decode_context < 0) {
    return Status::invalid_argument(
        fmt::format("bench compute: --tokens {} and --repeats {} must be at least 1, --cached {}, "
                    "--decode-context {} and --decode-steps {} at least 0",
                    o.prompt_tokens, o.repeats, o.cached_tokens, o.decode_context, o.decode_steps));
  }
  std::vector<ComputeBenchRow> rows;
  for (const std::string& name : o.models) {
    DP_ASSIGN_OR_RETURN(CpuModelConfig config, cpu_model_preset(name));
    DP_ASSIGN_OR_RETURN(auto weights, random_weights(config, o.seed));
    CpuModel model(weights);
    const int64_t row = config.kv_floats_per_token_per_layer();

    // Cached KV: any floats of the right size (the throughput does not depend on the values).
    const int64_t ctx = std::max(o.cached_tokens, o.decode_context);
    std::vector<float> kv(static_cast<size_t>(ctx * row));
    SplitMix64 rng(o.seed);
    for (float& x : kv) x = rng.uniform_pm1();

    const auto prompt = bench_tokens(o.prompt_tokens, config.vocab, o.seed);
    std::vector<std::span<const float>> cached(
        config.layers,
        std::span<const float>(kv).first(static_cast<size_t>(o.cached_tokens * row)));
    std::vector<double> rates, cpu_rates;
    for (int r = 0; r < o.repeats; ++r) {
      const Stopwatch watch;
      DP_ASSIGN_OR_RETURN(auto out, model.prefill(cached, prompt, o.cached_tokens));
      rates.push_back(static_cast<double>(o.prompt_tokens) / watch.wall_s());
      cpu_rates.push_back(static_cast<double>(o.prompt_tokens) / watch.cpu_s());
    }
    rows.push_back(summarise(name, "prefill", o.prompt_tokens, o.cached_tokens, rates, cpu_rates));

    if (o.decode_steps > 0) {
      std::vector<std::span<const float>> context(
          config.layers,
          std::span<const float>(kv).first(static_cast<size_t>(o.decode_context * row)));
      rates.clear();
      cpu_rates.clear();
      for (int r = 0; r < o.repeats; ++r) {
        const Stopwatch watch;
        for (int s = 0; s < o.decode_steps; ++s) {
          DP_ASSIGN_OR_RETURN(auto out, model.decode(context, prompt[s % prompt.size()]));
        }
        rates.push_back(static_cast<double>(o.decode_steps) / watch.wall_s());
        cpu_rates.push_back(static_cast<double>(o.decode_steps) / watch.cpu_s());
      }
      rows.push_back(summarise(name, "decode", o.decode_steps, o.decode_context, rates, cpu_rates));
    }
  }
  return rows;
}

}  // namespace dualpath::compute
