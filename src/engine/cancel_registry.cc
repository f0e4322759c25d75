#include "engine/cancel_registry.h"

namespace dualpath::engine {

void CancelRegistry::prune(Duration now) {
  for (auto it = early_.begin(); it != early_.end();) {
    it = now - it->second > remember_for_ ? early_.erase(it) : std::next(it);
  }
}

void CancelRegistry::begin(uint64_t request_id) {
  MutexLock lock(mu_);
  const bool early = early_.erase(request_id) > 0;
  running_[request_id] = early;
}

void CancelRegistry::end(uint64_t request_id) {
  MutexLock lock(mu_);
  running_.erase(request_id);
  stops_.erase(request_id);
}

void CancelRegistry::cancel(uint64_t request_id) {
  MutexLock lock(mu_);
  auto it = running_.find(request_id);
  if (it != running_.end()) {
    it->second = true;
    return;
  }
  const Duration now = clock_.now();
  prune(now);
  early_[request_id] = now;
}

void CancelRegistry::stop(uint64_t request_id) {
  MutexLock lock(mu_);
  if (running_.count(request_id) > 0) stops_.insert(request_id);
}

bool CancelRegistry::stop_requested(uint64_t request_id) const {
  MutexLock lock(mu_);
  return stops_.count(request_id) > 0;
}

void CancelRegistry::cancel_all() {
  MutexLock lock(mu_);
  for (auto& [id, flag] : running_) flag = true;
}

bool CancelRegistry::cancelled(uint64_t request_id) const {
  MutexLock lock(mu_);
  auto it = running_.find(request_id);
  if (it != running_.end()) return it->second;
  return early_.count(request_id) > 0;
}

size_t CancelRegistry::running() const {
  MutexLock lock(mu_);
  return running_.size();
}

}  // namespace dualpath::engine
