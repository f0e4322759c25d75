#pragma once
// ClassArbiter: picks which traffic class sends next when both have work (issue 4; PAPER.md §7).
//
// Weighted fair queueing by bytes (start-time fair queueing): each class has a virtual time that
// advances by bytes/weight when it sends; the backlogged class with the smaller virtual time
// goes next. With weights 99:1 the model class gets 99 % of the bytes while both are busy, the
// KV class still gets 1 % (never starved), and an idle class's share goes to the other (work
// conserving). A class that wakes from idle starts at the busy class's virtual time, so it
// cannot claim credit for the time it was idle. Thread-compatible; pure logic.

#include <array>
#include <cstdint>
#include <optional>

namespace dualpath::transport {

enum class TrafficClass : uint8_t { kModel = 0, kKv = 1 };
inline constexpr int kTrafficClassCount = 2;
const char* traffic_class_name(TrafficClass c);

class ClassArbiter {
 public:
  ClassArbiter(uint32_t model_weight, uint32_t kv_weight);

  // The class to serve next among those with work (`backlogged[c]`), or none.
  std::optional<TrafficClass> pick(const std::array<bool, kTrafficClassCount>& backlogged);
  // Records that `c` sent `bytes`.
  void charge(TrafficClass c, uint64_t bytes);
  // Tells the arbiter that `c` has work again after having none.
  void activate(TrafficClass c);

 private:
  std::array<double, kTrafficClassCount> weight_;
  std::array<double, kTrafficClassCount> virtual_time_{};
  std::array<bool, kTrafficClassCount> active_{};
};

}  // namespace dualpath::transport
