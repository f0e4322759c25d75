#include "sched/pd_controller.h"

#include <algorithm>

#include "sched/cluster_scheduler.h"

namespace dualpath::sched {

PdLayout static_pd_layout(int nodes, int prefill_nodes, int pe_ep_nodes, int de_ep_nodes) {
  PdLayout l;
  l.prefill_nodes = prefill_nodes;
  l.decode_nodes = nodes - prefill_nodes;
  auto add = [&](bool prefill, int first, int count, int per_group) {
    for (int size : ep_group_sizes(count, std::min(per_group, count))) {
      l.groups.push_back({prefill, first, size});
      first += size;
    }
  };
  add(true, 0, prefill_nodes, pe_ep_nodes);
  add(false, prefill_nodes, nodes - prefill_nodes, de_ep_nodes);
  return l;
}

PdPressure pd_pressure(const ClusterScheduler& s) {
  PdPressure p;
  const int pes = s.live_pe_engines();
  p.prefill_backlog_s = pes > 0 ? s.outstanding_pe_work() / pes : 0.0;
  p.committed_backlog_s = pes > 0 ? s.assigned_pe_work() / pes : 0.0;
  p.decode_waiting = static_cast<int64_t>(s.waiting_for_de());
  p.decode_hbm_used = s.de_hbm_used_fraction();
  return p;
}

int decide_pd(const PdControllerParams& params, const PdPressure& pressure, int current,
              int layouts, double since_change_s, double switch_s) {
  if (since_change_s < params.hold_s) return current;
  const bool decode_has_room =
      pressure.decode_waiting == 0 && pressure.decode_hbm_used < params.decode_room;
  const double uncommitted = pressure.prefill_backlog_s - pressure.committed_backlog_s;
  const bool pays_off = uncommitted > 2 * (pressure.committed_backlog_s + switch_s);
  if (pressure.prefill_backlog_s > params.prefill_high_s && decode_has_room && pays_off &&
      current + 1 < layouts)
    return current + 1;
  if (pressure.decode_waiting > 0 && pressure.prefill_backlog_s < params.prefill_low_s &&
      current > 0)
    return current - 1;
  return current;
}

}  // namespace dualpath::sched
