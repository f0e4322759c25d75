#pragma once
// PsServer: egalitarian processor sharing in O(log n) per arrival or departure.
//
// Every active job is served at the same per-job rate r(t) (work units per second): a link of
// bandwidth R shared by n flows has r = R / n; a decode engine serves each request one token
// per iteration, r = 1 / step_time(n, context). The server keeps a virtual clock V that advances
// at r(t); a job that joins at V0 needing w units finishes when V reaches V0 + w. Departures are
// therefore in order of V0 + w, and the next one is due at now + (min(V0 + w) - V) / r. Exact for
// piecewise-constant rates, which is what a discrete-event simulation produces.
//
// Up to `max_active` jobs are served at once; the rest wait in FIFO order (a bounded I/O queue
// depth). Owned by the simulation thread.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <utility>

#include "sim/dary_heap.h"

namespace dualpath::sim {

class PsServer {
 public:
  explicit PsServer(size_t max_active = std::numeric_limits<size_t>::max())
      : max_active_(max_active) {}

  // Brings the virtual clock to `now` at the current rate. Call before any change.
  void advance(double now) {
    if (now > last_ && !active_.empty()) v_ += (now - last_) * rate_;
    last_ = now;
  }
  // Queues a job; it is served once fewer than max_active jobs are active. Returns whether its
  // service starts now (false: it waits behind others). Call advance() first. `tag` rides with
  // the job to pop() (the caller's datum, so that a departure needs no lookup; active jobs only).
  bool add(uint32_t job, double work, uint32_t tag = 0) {
    ++version_;
    if (active_.size() < max_active_) {
      active_.push(Job{v_ + work, seq_++, job, tag});
      return true;
    }
    waiting_.push_back({job, work});
    return false;
  }
  // The per-job service rate from now on. Call advance() first.
  void set_rate(double per_job_rate) {
    rate_ = per_job_rate;
    ++version_;
  }
  // Simulated time of the next departure; +inf when idle or stalled (rate 0).
  double next_departure() const {
    if (active_.empty() || rate_ <= 0) return std::numeric_limits<double>::infinity();
    double dv = active_.top().v_finish - v_;
    return last_ + (dv > 0 ? dv / rate_ : 0.0);
  }
  // Removes the job due next (call at next_departure(), after advance()) and admits a waiter,
  // whose id goes to *admitted when given (left unchanged when no job was waiting).
  uint32_t pop(uint32_t* admitted = nullptr, uint32_t* tag = nullptr) {
    const Job j = active_.top();
    if (tag != nullptr) *tag = j.tag;
    active_.pop();
    if (j.v_finish > v_) v_ = j.v_finish;  // absorb rounding: it is done now
    if (!waiting_.empty() && active_.size() < max_active_) {
      auto [job, work] = waiting_.front();
      waiting_.pop_front();
      active_.push(Job{v_ + work, seq_++, job, 0});
      if (admitted != nullptr) *admitted = job;
    }
    ++version_;
    return j.job;
  }

  size_t active() const { return active_.size(); }
  size_t waiting() const { return waiting_.size(); }
  bool idle() const { return active_.empty(); }
  // Bumped on every change; a scheduled departure event carries it, stale ones are dropped.
  uint64_t version() const { return version_; }

 private:
  struct Job {
    double v_finish;
    uint64_t seq;
    uint32_t job;
    uint32_t tag;
  };
  struct KeyOf {  // v_finish >= 0: virtual time starts at 0 and only grows
    OrderKey operator()(const Job& j) const { return order_key(j.v_finish, j.seq); }
  };
  size_t max_active_;
  DaryHeap<Job, KeyOf> active_;
  std::deque<std::pair<uint32_t, double>> waiting_;
  double v_ = 0;
  double last_ = 0;
  double rate_ = 0;
  uint64_t seq_ = 0;
  uint64_t version_ = 0;
};

}  // namespace dualpath::sim
