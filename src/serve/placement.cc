#include "serve/placement.h"

#include <fmt/format.h>

namespace dualpath::serve {

Claim& Claim::operator=(Claim&& other) noexcept {
  if (this != &other) {
    finish_all();
    placer_ = std::exchange(other.placer_, nullptr);
    placement_ = other.placement_;
    request_ = other.request_;
    pe_read_ = std::exchange(other.pe_read_, false);
    de_read_ = std::exchange(other.de_read_, false);
    prefill_ = std::exchange(other.prefill_, false);
    turn_ = std::exchange(other.turn_, false);
  }
  return *this;
}

void Claim::pe_read_finished() {
  if (!std::exchange(pe_read_, false)) return;
  MutexLock lock(placer_->mu_);
  placer_->sched_->read_finished(placer_->pe_node_of(placement_.pe), placement_.pe_read_tokens);
}

void Claim::de_read_finished() {
  if (!std::exchange(de_read_, false)) return;
  MutexLock lock(placer_->mu_);
  placer_->sched_->read_finished(placer_->de_node_of(placement_.de), placement_.de_read_tokens);
}

void Claim::prefill_finished() {
  if (!std::exchange(prefill_, false)) return;
  MutexLock lock(placer_->mu_);
  placer_->sched_->prefill_finished(placement_.pe, request_.prompt_tokens, request_.pe_work());
}

void Claim::turn_finished() {
  if (!std::exchange(turn_, false)) return;
  // The paper's DE scheduler reserved the request's HBM; round robin reserves none live.
  const bool paper = placer_->params_.engines == sched::EnginePolicy::kPaper;
  MutexLock lock(placer_->mu_);
  placer_->sched_->turn_finished(placement_.de, request_.prompt_tokens + request_.gen_tokens,
                                 paper ? request_.hbm_need_bytes : 0.0);
}

void Claim::finish_all() {
  if (placer_ == nullptr) return;
  pe_read_finished();
  de_read_finished();
  prefill_finished();
  turn_finished();
  placer_ = nullptr;
}

Placer::Placer(const sched::ClusterShape& shape,
               const sched::ClusterSchedulerParams& params,
               Duration fetch_interval,
               const Clock& clock)
    : shape_(shape), params_(params), fetch_interval_(fetch_interval), clock_(clock) {
  auto s = std::make_unique<sched::ClusterScheduler>(shape, params);
  for (int pe = 0; pe < s->pe_engines(); ++pe) pe_node_.push_back(s->pe_node_of(pe));
  for (int de = 0; de < s->de_engines(); ++de) de_node_.push_back(s->de_node_of(de));
  for (int n = 0; n < s->nodes(); ++n) s->set_node_alive(n, false);  // until they register
  {
    MutexLock lock(mu_);
    sched_ = std::move(s);
  }
  {
    MutexLock lock(mu_);
    last_fetch_ = clock_.now() - fetch_interval_;
  }
  fetch_thread_ = std::thread([this] { fetch_loop(); });
}

Placer::~Placer() {
  shutdown();
  if (fetch_thread_.joinable()) fetch_thread_.join();
}

void Placer::shutdown() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    for (auto& [id, w] : waiters_) w->cv.notify_all();
  }
  cv_.notify_all();
}

void Placer::set_node_alive(int node, bool alive) {
  {
    MutexLock lock(mu_);
    sched_->set_node_alive(node, alive);
  }
  cv_.notify_all();  // a waiting turn may be placeable now
}

void Placer::set_reported_read_queue(int node, int64_t tokens) {
  MutexLock lock(mu_);
  sched_->set_reported_read_queue(node, tokens);
}

void Placer::with_scheduler(const std::function<void(sched::ClusterScheduler&)>& f) {
  MutexLock lock(mu_);
  f(*sched_);
}

Result<Claim> Placer::place(const sched::SchedRequest& request,
                            Duration deadline,
                            const std::function<bool()>& cancelled) {
  // A waiter looks at its cancel this often while no fetch wakes it.
  constexpr Duration kCancelPoll = std::chrono::milliseconds(10);
  const bool paper = params_.engines == sched::EnginePolicy::kPaper;
  Waiter waiter;
  std::optional<sched::Placement> placed;
  Status why;
  {
    MutexLock lock(mu_);
    if (paper) {
      waiters_[request.id] = &waiter;
      sched_->submit(request);
      if (kept_up_) fetch_locked();  // the engines keep up: fetched at once, here
      // Queued (by this fetch, or behind turns already waiting): the fetch loop fetches it at
      // the interval. Nothing else wakes that loop when the engines free up.
      if (!kept_up_) cv_.notify_all();
    }
    for (;;) {
      if (stopping_) {
        why = Status::aborted("the scheduler is shutting down");
        break;
      }
      if (cancelled && cancelled()) {
        why = Status::aborted("the turn was cancelled while it waited to be placed");
        break;
      }
      if (paper && waiter.placement) {
        placed = waiter.placement;
        break;
      }
      if (!paper) {
        if (auto p = sched_->submit(request)) {
          placed = p;
          break;
        }
      }
      const Duration now = clock_.now();
      if (now >= deadline) break;
      (void)clock_.wait_until(paper ? waiter.cv : cv_, lock, std::min(deadline, now + kCancelPoll));
    }
    if (paper) {
      waiters_.erase(request.id);
      if (!placed) sched_->cancel_queued(request.id);
    }
    if (!placed && why.is_ok()) {
      int pe_alive = 0, de_alive = 0;
      for (int n = 0; n < sched_->nodes(); ++n) {
        (n < shape_.prefill_nodes ? pe_alive : de_alive) += sched_->node_alive(n) ? 1 : 0;
      }
      why = Status::unavailable(fmt::format(
          "no engine took the turn in time ({} prefill and {} decode nodes alive of {} and {})",
          pe_alive, de_alive, shape_.prefill_nodes, shape_.decode_nodes));
    }
  }
  if (!placed) return why;
  Claim c;
  c.placer_ = this;
  c.placement_ = *placed;
  c.request_ = request;
  c.pe_read_ = placed->pe_read_tokens > 0;
  c.de_read_ = placed->de_read_tokens > 0;
  c.prefill_ = true;
  c.turn_ = true;
  return c;
}

void Placer::fetch_locked() {
  last_fetch_ = clock_.now();
  const sched::FetchResult fetched = sched_->fetch();
  kept_up_ = !sched_->has_queued();
  for (const sched::Placement& p : fetched.placed) {
    auto it = waiters_.find(p.request_id);
    if (it == waiters_.end()) continue;
    it->second->placement = p;
    it->second->cv.notify_one();
  }
}

void Placer::fetch_loop() {
  MutexLock lock(mu_);
  // Once a fetch leaves turns waiting (a loaded cluster), the groups fetch once per interval,
  // batching what arrives meanwhile; while they keep up, place() fetches on the turn's thread.
  for (;;) {
    while (!stopping_ && !sched_->has_queued()) cv_.wait(lock);  // submit() notifies
    if (stopping_) return;
    const Duration due = last_fetch_ + fetch_interval_;
    if (!kept_up_ && clock_.now() < due) {
      (void)clock_.wait_until(cv_, lock, due);
      continue;
    }
    fetch_locked();
  }
}

}  // namespace dualpath::serve
