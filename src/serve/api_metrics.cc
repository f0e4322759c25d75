#include "serve/api_metrics.h"

#include <fmt/format.h>
#include <prometheus/text_serializer.h>

#include <sstream>

namespace dualpath::serve {
namespace {

// vLLM's buckets for the same histograms.
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,  0.75,
    1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const prometheus::Histogram::BucketBoundaries kTokenBuckets = {
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0};

// A metric family registered under `name`.
template <typename Builder>
auto* family(Builder builder, prometheus::Registry& r, const std::string& name,
             const std::string& help) {
  return &builder.Name(name).Help(help).Register(r);
}

prometheus::Histogram* histogram(prometheus::Registry& r, const std::string& name,
                                 const std::string& help,
                                 const prometheus::Histogram::BucketBoundaries& buckets) {
  return &family(prometheus::BuildHistogram(), r, name, help)->Add({}, buckets);
}

prometheus::Counter* counter(prometheus::Registry& r, const std::string& name,
                             const std::string& help) {
  return &family(prometheus::BuildCounter(), r, name, help)->Add({});
}

}  // namespace

std::string node_label(const engine::NodeId& id) {
  return fmt::format("{}{}", id.role == engine::NodeRole::kPrefill ? "prefill" : "decode",
                     id.index);
}

ApiMetrics::ApiMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  ttft_ = histogram(r, "dualpath:time_to_first_token_seconds",
                    "Time from the request's arrival to its first token.", kLatencyBuckets);
  itl_ = histogram(r, "dualpath:inter_token_latency_seconds",
                   "Time between output tokens (the turn's mean, once per token).", kTokenBuckets);
  e2e_ = histogram(r, "dualpath:e2e_request_latency_seconds",
                   "Time from the request's arrival to its last token.", kLatencyBuckets);
  queue_ = histogram(r, "dualpath:request_queue_time_seconds",
                     "Time the request waited in the central scheduler's queue.", kLatencyBuckets);
  prompt_tokens_ = counter(r, "dualpath:prompt_tokens_total", "Prompt tokens of finished turns.");
  generation_tokens_ =
      counter(r, "dualpath:generation_tokens_total", "Output tokens returned to clients.");
  cached_tokens_ = counter(r, "dualpath:prompt_tokens_cached_total",
                           "Prompt tokens whose KV was loaded from the store (hits).");
  migrations_ = counter(r, "dualpath:request_migrations_total",
                        "Turns whose decode moved to another node after a failure.");
  kv_read_bytes_ = family(prometheus::BuildCounter(), r, "dualpath:kv_read_bytes_total",
                          "Cached KV bytes read from the store by read path and node, and (path "
                          "de_dram) served from a decode node's DRAM tier.");
  requests_ = family(prometheus::BuildCounter(), r, "dualpath:requests_total",
                     "API requests by outcome (HTTP status, or cancelled).");
  read_queue_ = family(prometheus::BuildGauge(), r, "dualpath:storage_read_queue_bytes",
                       "Bytes waiting or in flight on the node's storage NIC.");
  node_up_ = family(prometheus::BuildGauge(), r, "dualpath:node_up",
                    "1 while the node holds its lease, 0 once it is dead.");
  dram_used_ = family(prometheus::BuildGauge(), r, "dualpath:dram_buffer_used_bytes",
                      "The node's DRAM buffer (PE or DE buffer) in use.");
  dram_tier_used_ = family(prometheus::BuildGauge(), r, "dualpath:dram_tier_used_bytes",
                           "A decode node's DRAM tier of sessions' KV in use ([cache] de_dram_gb; "
                           "0 without one).");
  report_age_ = family(prometheus::BuildGauge(), r, "dualpath:node_last_report_age_seconds",
                       "Seconds since the node's last load report (its lease lapses past "
                       "dualpath:lease_ttl_seconds).");
  lease_ttl_ = &family(prometheus::BuildGauge(), r, "dualpath:lease_ttl_seconds",
                       "scheduler.lease_ttl_ms: a node without a load report for this long is "
                       "declared dead.")
                    ->Add({});
  requests_running_ = &family(prometheus::BuildGauge(), r, "dualpath:num_requests_running",
                              "API requests in flight: chat and completion requests admitted "
                              "and not yet answered.")
                           ->Add({});
}

void ApiMetrics::count_request(const std::string& status) {
  requests_->Add({{"status", status}}).Increment();
}

void ApiMetrics::observe_turn(const TurnResult& r, int64_t completion_tokens, double e2e_s) {
  ttft_->Observe(r.ttft_s);
  e2e_->Observe(e2e_s);
  queue_->Observe(r.queue_s);
  for (int64_t i = 1; i < completion_tokens; ++i) itl_->Observe(r.tpot_s);
  prompt_tokens_->Increment(static_cast<double>(r.prompt_tokens));
  generation_tokens_->Increment(static_cast<double>(completion_tokens));
  cached_tokens_->Increment(static_cast<double>(r.hit_tokens));
  if (r.migrated) migrations_->Increment();
  // By the side that read it: a split read counts on both.
  if (r.pe_read_bytes > 0) {
    kv_read_bytes_->Add({{"path", "pe"}, {"node", node_label(r.pe)}})
        .Increment(static_cast<double>(r.pe_read_bytes));
  }
  if (r.de_read_bytes > 0) {
    kv_read_bytes_->Add({{"path", "de"}, {"node", node_label(r.de)}})
        .Increment(static_cast<double>(r.de_read_bytes));
  }
  // Served from the decode node's DRAM tier (issue 35): no storage read.
  if (r.bytes.de_dram > 0) {
    kv_read_bytes_->Add({{"path", "de_dram"}, {"node", node_label(r.de)}})
        .Increment(static_cast<double>(r.bytes.de_dram));
  }
}

std::string ApiMetrics::scrape(const std::vector<NodeStatus>& nodes,
                               int64_t requests_running,
                               Duration lease_ttl) {
  requests_running_->Set(static_cast<double>(requests_running));
  lease_ttl_->Set(std::chrono::duration<double>(lease_ttl).count());
  for (const NodeStatus& n : nodes) {
    const std::string node = node_label(n.id);
    report_age_->Add({{"node", node}}).Set(n.last_report_age_s);
    read_queue_->Add({{"node", node}}).Set(static_cast<double>(n.report.read_queue_bytes));
    dram_used_->Add({{"node", node}}).Set(static_cast<double>(n.report.dram_used_bytes));
    dram_tier_used_->Add({{"node", node}}).Set(static_cast<double>(n.report.dram_tier_bytes));
    node_up_
        ->Add({{"node", node},
               {"role", n.id.role == engine::NodeRole::kPrefill ? "prefill" : "decode"}})
        .Set(n.alive ? 1 : 0);
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace dualpath::serve
