#pragma once
// ApiMetrics: the Prometheus metrics of `dualpath serve` (GET /metrics), through prometheus-cpp,
// named as vLLM names its own under the `dualpath:` prefix (docs/api.md lists each one):
//   histograms  time_to_first_token_seconds, inter_token_latency_seconds,
//               e2e_request_latency_seconds, request_queue_time_seconds
//   counters    prompt_tokens_total, generation_tokens_total, prompt_tokens_cached_total,
//               kv_read_bytes_total{path="pe|de|de_dram",node}, requests_total{status},
//               request_migrations_total
//   gauges      storage_read_queue_bytes{node}, node_up{node,role}, dram_buffer_used_bytes{node},
//               dram_tier_used_bytes{node}, node_last_report_age_seconds{node},
//               lease_ttl_seconds, num_requests_running
// The gauges are set at each scrape: the nodes' from their load reports as the registry holds
// them, num_requests_running from the API's admission count. GET /dashboard's page reads these
// same values (it parses /metrics): one source for both. Thread-safe.

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
  // The text exposition (format 0.0.4) with the gauges set from `nodes`, the API's requests in
  // flight and the scheduler's lease (scheduler.lease_ttl_ms).
  std::string scrape(const std::vector<NodeStatus>& nodes,
                     int64_t requests_running,
                     Duration lease_ttl);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram *ttft_, *itl_, *e2e_, *queue_;
  prometheus::Counter *prompt_tokens_, *generation_tokens_, *cached_tokens_, *migrations_;
  prometheus::Family<prometheus::Counter>* kv_read_bytes_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Gauge>* read_queue_;
  prometheus::Family<prometheus::Gauge>* node_up_;
  prometheus::Family<prometheus::Gauge>* dram_used_;
  prometheus::Family<prometheus::Gauge>* dram_tier_used_;
  prometheus::Family<prometheus::Gauge>* report_age_;
  prometheus::Gauge *lease_ttl_, *requests_running_;
};

// "prefill0", "decode1": a node's label value.
std::string node_label(const engine::NodeId& id);

}  // namespace dualpath::serve
