#pragma once
// A node of the cluster as the scheduler service reports it (/health, /metrics, tests).

#include <cstdint>
#include <string>

#include "engine/engine_types.h"

namespace dualpath::serve {

// One registered node, as the service sees it.
struct NodeStatus {
  engine::NodeId id;
  bool alive = false;
  std::string host;
  int64_t pid = 0;
  std::string control_address;
  engine::LoadReport report;
  int64_t registrations = 0;  // how often it has registered (re-registrations after restarts)
  double last_report_age_s = 0;
};

}  // namespace dualpath::serve
