#pragma once
// ApiMetrics: the Prometheus metrics of `dualpath serve` (GET /metrics), through prometheus-cpp,
// named as vLLM names its own under the `dualpath:` prefix (docs/api.md lists each one):
//   histograms  time_to_first_token_seconds, inter_token_latency_seconds,
//               e2e_request_latency_seconds, request_queue_time_seconds
//   counters    prompt_tokens_total, generation_tokens_total, prompt_tokens_cached_total,
//               kv_read_bytes_total{path="pe|de",node}, requests_total{status},
//               request_migrations_total
//   gauges      storage_read_queue_bytes{node}, node_up{node,role}, dram_buffer_used_bytes{node}
// The gauges are set from the nodes' load reports at each scrape. Thread-safe.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>
#include <vector>

#include "serve/scheduler_service.h"

namespace dualpath::serve {

class ApiMetrics {
 public:
  ApiMetrics();
  // A finished request: its HTTP status ("200", "400", ..., "cancelled").
  void count_request(const std::string& status);
  // A turn that ran: latencies and tokens (completion tokens as returned, after stops).
  void observe_turn(const TurnResult& r, int64_t completion_tokens, double e2e_s);
  // The text exposition (format 0.0.4) with the gauges set from `nodes`.
  std::string scrape(const std::vector<NodeStatus>& nodes);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram *ttft_, *itl_, *e2e_, *queue_;
  prometheus::Counter *prompt_tokens_, *generation_tokens_, *cached_tokens_, *migrations_;
  prometheus::Family<prometheus::Counter>* kv_read_bytes_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Gauge>* read_queue_;
  prometheus::Family<prometheus::Gauge>* node_up_;
  prometheus::Family<prometheus::Gauge>* dram_used_;
};

// "prefill0", "decode1": a node's label value.
std::string node_label(const engine::NodeId& id);

}  // namespace dualpath::serve
