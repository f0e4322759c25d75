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
  // t >= 0 (simulated time starts at 0 and never runs back).
  void push(double t, uint32_t kind, uint32_t a, uint64_t b = 0) {
    if (t == now_) {
      now_events_.push_back(Event{t, next_seq_++, kind, a, b});
    } else {
      heap_.push(Slot{order_key(t, next_seq_++), kind, a, b});
    }
  }
  bool empty() const { return heap_.empty() && now_head_ == now_events_.size(); }
  Event pop() {
    ++popped_;
    if (now_head_ < now_events_.size() && (heap_.empty() || top_time() != now_)) {
      const Event e = now_events_[now_head_++];
      if (now_head_ == now_events_.size()) {
        now_events_.clear();
        now_head_ = 0;
      }
      return e;
    }
    const Event e = event_of(heap_.top());
    heap_.pop();
    now_ = e.t;
    return e;
  }
  // The event pop() returns next, or nullptr when none (for prefetching what it will touch).
  const Event* peek() {
    if (now_head_ < now_events_.size() && (heap_.empty() || top_time() != now_))
      return &now_events_[now_head_];
    if (heap_.empty()) return nullptr;
    peeked_ = event_of(heap_.top());
    return &peeked_;
  }
  uint64_t popped() const { return popped_; }
  size_t size() const { return heap_.size() + (now_events_.size() - now_head_); }

 private:
  // An event in the heap: its (t, seq) as one key.
  struct Slot {
    OrderKey key;
    uint32_t kind, a;
    uint64_t b;
  };
  struct KeyOf {
    OrderKey operator()(const Slot& s) const { return s.key; }
  };
  static Event event_of(const Slot& s) {
    return Event{order_key_time(s.key), order_key_seq(s.key), s.kind, s.a, s.b};
  }
  double top_time() const { return order_key_time(heap_.top().key); }
  DaryHeap<Slot, KeyOf> heap_;
  Event peeked_;
  double now_ = -std::numeric_limits<double>::infinity();  // the time of the last pop
  std::vector<Event> now_events_;  // due at now_, in push order, from now_head_ on
  size_t now_head_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t popped_ = 0;
};

}  // namespace dualpath::sim
