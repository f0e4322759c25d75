#pragma once
// The discrete-event core: a min-heap of small POD events ordered by (time, sequence number).
// The sequence number makes ties deterministic, so a seed gives the same run byte for byte.
// Owned by the simulation thread.

#include <cstdint>
#include <queue>
#include <vector>

namespace dualpath::sim {

struct Event {
  double t = 0;      // simulated seconds
  uint64_t seq = 0;  // insertion order, breaks ties
  uint32_t kind = 0;
  uint32_t a = 0;    // an index (agent, engine, node, group)
  uint64_t b = 0;    // a version stamp (lazy invalidation) or a second index
};

class EventQueue {
 public:
  void push(double t, uint32_t kind, uint32_t a, uint64_t b = 0) {
    heap_.push(Event{t, next_seq_++, kind, a, b});
  }
  bool empty() const { return heap_.empty(); }
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    ++popped_;
    return e;
  }
  uint64_t popped() const { return popped_; }
  size_t size() const { return heap_.size(); }

 private:
  struct Later {
    bool operator()(const Event& x, const Event& y) const {
      return x.t != y.t ? x.t > y.t : x.seq > y.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t next_seq_ = 0;
  uint64_t popped_ = 0;
};

}  // namespace dualpath::sim
