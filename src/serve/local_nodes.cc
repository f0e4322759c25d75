#include "serve/local_nodes.h"

#include <signal.h>

#include <fmt/format.h>

namespace dualpath::serve {

Result<std::unique_ptr<LocalNodes>> LocalNodes::start(const LocalNodesOptions& options) {
  std::unique_ptr<LocalNodes> n(new LocalNodes(options));
  n->prefill_.resize(static_cast<size_t>(options.prefill_nodes));
  n->decode_.resize(static_cast<size_t>(options.decode_nodes));
  for (int i = 0; i < options.prefill_nodes; ++i)
    DP_RETURN_IF_ERROR(n->spawn({engine::NodeRole::kPrefill, i}));
  for (int i = 0; i < options.decode_nodes; ++i)
    DP_RETURN_IF_ERROR(n->spawn({engine::NodeRole::kDecode, i}));
  return n;
}

LocalNodes::~LocalNodes() { stop(std::chrono::seconds(5)); }

Subprocess& LocalNodes::process(const engine::NodeId& id) {
  auto& v = id.role == engine::NodeRole::kPrefill ? prefill_ : decode_;
  return v.at(static_cast<size_t>(id.index));
}

Status LocalNodes::spawn(const engine::NodeId& id) {
  SpawnOptions o;
  o.argv = {options_.program};
  o.argv.insert(o.argv.end(), options_.args.begin(), options_.args.end());
  for (const std::string& a : {std::string("--scheduler"), options_.scheduler,
                               std::string("--role"), std::string(engine::role_name(id.role)),
                               std::string("--index"), std::to_string(id.index)}) {
    o.argv.push_back(a);
  }
  if (!options_.cluster_key.empty()) {
    o.argv.push_back("--cluster-key");
    o.argv.push_back(options_.cluster_key);
  }
  o.die_with_parent = true;
  auto child = Subprocess::spawn(o);
  if (!child.is_ok()) {
    return child.status().with_context(
        fmt::format("cannot start {} ('{}')", id.name(), options_.program));
  }
  process(id) = std::move(child).value();
  return Status::ok();
}

pid_t LocalNodes::pid(const engine::NodeId& id) {
  Subprocess& p = process(id);
  return p.running() ? p.pid() : -1;
}

Status LocalNodes::signal(const engine::NodeId& id, int sig) {
  Subprocess& p = process(id);
  if (!p.running()) return Status::failed_precondition(fmt::format("{} is not running", id.name()));
  p.signal(sig);
  return Status::ok();
}

Status LocalNodes::wait_exit(const engine::NodeId& id, Duration timeout) {
  auto s = process(id).wait_for(timeout);
  return s.is_ok() ? Status::ok() : s.status();
}

Status LocalNodes::restart(const engine::NodeId& id) {
  if (process(id).running()) {
    return Status::failed_precondition(fmt::format("{} is still running", id.name()));
  }
  return spawn(id);
}

std::vector<std::pair<engine::NodeId, std::string>> LocalNodes::exited() {
  std::vector<std::pair<engine::NodeId, std::string>> out;
  for (auto role : {engine::NodeRole::kPrefill, engine::NodeRole::kDecode}) {
    auto& v = role == engine::NodeRole::kPrefill ? prefill_ : decode_;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].pid() > 0 && !v[i].running() && v[i].exit_status()) {
        out.emplace_back(engine::NodeId{role, static_cast<int>(i)},
                         Subprocess::describe(*v[i].exit_status()));
      }
    }
  }
  return out;
}

void LocalNodes::stop(Duration grace) {
  for (auto* v : {&prefill_, &decode_}) {
    for (Subprocess& p : *v) {
      if (p.running()) p.signal(SIGTERM);
    }
  }
  for (auto* v : {&prefill_, &decode_}) {
    for (Subprocess& p : *v) {
      if (p.running() && !p.wait_for(grace).is_ok()) p.stop(SIGKILL, Duration(0));
    }
  }
}

}  // namespace dualpath::serve
