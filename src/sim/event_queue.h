#pragma once
// The discrete-event core: a min-heap of small POD events ordered by (time, sequence number).
// The sequence number makes ties deterministic, so a seed gives the same run byte for byte.
// Owned by the simulation thread.

#include <cstdint>
#include <limits>
#include <vector>

#include "sim/dary_heap.h"

namespace dualpath::sim {

struct Event {
  double t = 0;      // simulated seconds
  uint64_t seq = 0;  // insertion order, breaks ties
  uint32_t kind = 0;
  uint32_t a = 0;    // an index (agent, engine, node, group)
  uint64_t b = 0;    // a version stamp (lazy invalidation) or a second index
};

// Events due at the time of the last pop (a turn's next arrival after no think time, an oracle
// decode start) skip the heap: they go after every event the heap holds for that time (those
// were pushed before it became the present, so their sequence numbers are smaller) and among
// themselves in order of push, which is the order the heap would give them.
class EventQueue {
 public:
  void push(double t, uint32_t kind, uint32_t a, uint64_t b = 0) {
    const Event e{t, next_seq_++, kind, a, b};
    if (t == now_) {
      now_events_.push_back(e);
    } else {
      heap_.push(e);
    }
  }
  bool empty() const { return heap_.empty() && now_head_ == now_events_.size(); }
  Event pop() {
    ++popped_;
    if (now_head_ < now_events_.size() && (heap_.empty() || heap_.top().t != now_)) {
      const Event e = now_events_[now_head_++];
      if (now_head_ == now_events_.size()) {
        now_events_.clear();
        now_head_ = 0;
      }
      return e;
    }
    const Event e = heap_.top();
    heap_.pop();
    now_ = e.t;
    return e;
  }
  // The event pop() returns next, or nullptr when none (for prefetching what it will touch).
  const Event* peek() const {
    if (now_head_ < now_events_.size() && (heap_.empty() || heap_.top().t != now_))
      return &now_events_[now_head_];
    return heap_.empty() ? nullptr : &heap_.top();
  }
  uint64_t popped() const { return popped_; }
  size_t size() const { return heap_.size() + (now_events_.size() - now_head_); }

 private:
  struct Earlier {
    bool operator()(const Event& x, const Event& y) const {
      return x.t != y.t ? x.t < y.t : x.seq < y.seq;
    }
  };
  DaryHeap<Event, Earlier> heap_;
  double now_ = -std::numeric_limits<double>::infinity();  // the time of the last pop
  std::vector<Event> now_events_;  // due at now_, in push order, from now_head_ on
  size_t now_head_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t popped_ = 0;
};

}  // namespace dualpath::sim
