#include "transport/class_arbiter.h"

#include <algorithm>

namespace dualpath::transport {

const char* traffic_class_name(TrafficClass c) {
  return c == TrafficClass::kModel ? "model" : "kv";
}

ClassArbiter::ClassArbiter(uint32_t model_weight, uint32_t kv_weight)
    : weight_{static_cast<double>(std::max<uint32_t>(model_weight, 1)),
              static_cast<double>(std::max<uint32_t>(kv_weight, 1))} {}

std::optional<TrafficClass> ClassArbiter::pick(
    const std::array<bool, kTrafficClassCount>& backlogged) {
  std::optional<TrafficClass> best;
  for (int c = 0; c < kTrafficClassCount; ++c) {
    active_[c] = backlogged[c];
    if (!backlogged[c]) continue;
    // Ties go to the lower index, the model class.
    if (!best || virtual_time_[c] < virtual_time_[static_cast<int>(*best)]) {
      best = static_cast<TrafficClass>(c);
    }
  }
  return best;
}

void ClassArbiter::charge(TrafficClass c, uint64_t bytes) {
  virtual_time_[static_cast<int>(c)] += static_cast<double>(bytes) / weight_[static_cast<int>(c)];
}

void ClassArbiter::activate(TrafficClass c) {
  int i = static_cast<int>(c);
  if (active_[i]) return;
  // Catch up with the busiest class's clock: no credit for time spent idle.
  double floor = virtual_time_[i];
  for (int o = 0; o < kTrafficClassCount; ++o) {
    if (o != i && active_[o]) floor = std::max(floor, virtual_time_[o]);
  }
  virtual_time_[i] = floor;
  active_[i] = true;
}

}  // namespace dualpath::transport
