#include "serve/cluster.h"

#include <fmt/format.h>

namespace dualpath::serve {

Result<std::unique_ptr<Cluster>> Cluster::start(ClusterOptions options) {
  std::unique_ptr<Cluster> c(new Cluster());
  // The nodes this process starts get an ephemeral credential unless the config names one: the
  // control plane is mutual TLS either way.
  if (options.spawn_nodes && options.config.scheduler.cluster_key.empty()) {
    options.config.ephemeral_credential = true;
  }
  DP_ASSIGN_OR_RETURN(c->service_, SchedulerService::start(options.config));
  if (options.spawn_nodes) {
    LocalNodesOptions n;
    n.program = options.node_program;
    n.args = options.node_args;
    // Local nodes connect over loopback whatever host the scheduler binds.
    n.scheduler = fmt::format("127.0.0.1:{}", c->service_->port());
    if (options.config.scheduler.host != "0.0.0.0" &&
        options.config.scheduler.host != "127.0.0.1") {
      n.scheduler = c->service_->address();
    }
    n.cluster_key = c->service_->cluster_key_path();
    n.prefill_nodes = options.config.engine.prefill_nodes;
    n.decode_nodes = options.config.engine.decode_nodes;
    DP_ASSIGN_OR_RETURN(c->nodes_, LocalNodes::start(n));
  }
  Status ready = c->service_->wait_ready(options.ready_timeout);
  if (!ready.is_ok()) {
    if (c->nodes_) {
      for (const auto& [id, how] : c->nodes_->exited()) {
        ready = ready.with_context(fmt::format("{} exited ({})", id.name(), how));
      }
    }
    return ready;
  }
  return c;
}

Cluster::~Cluster() {
  if (service_) service_->shutdown();  // the nodes get "quit" and exit
  if (nodes_) nodes_->stop(std::chrono::seconds(5));
  service_.reset();
}

}  // namespace dualpath::serve
