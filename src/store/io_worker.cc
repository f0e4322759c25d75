#include "store/io_worker.h"

#include <fmt/format.h>
#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>

#include "common/log.h"

namespace dualpath::store {
namespace {

// user_data tags. Op pointers are 8-byte aligned, so bit 0 marks the linked fsync of a write
// and the small values below can never be an op.
constexpr uint64_t kCancelTag = 0;
constexpr uint64_t kWakeTag = 2;
constexpr uint64_t kFsyncBit = 1;

// Every op takes at most two SQEs (writev + fsync); one more for the wake read, and room for
// cancels of every op.
unsigned ring_entries(int queue_depth) {
  unsigned need = static_cast<unsigned>(queue_depth) * 3 + 2;
  unsigned entries = 8;
  while (entries < need) entries *= 2;
  return entries;
}

}  // namespace

IoWorker::IoWorker(int queue_depth,
                   TokenBucket* read_limiter,
                   TokenBucket* write_limiter,
                   Clock* clock)
    : queue_depth_(queue_depth),
      read_limiter_(read_limiter),
      write_limiter_(write_limiter),
      clock_(clock),
      ring_(std::make_unique<io_uring>()) {}

TokenBucket* IoWorker::limiter_for(const IoOp& op) const {
  TokenBucket* b = op.kind == IoOp::Kind::kReadv ? read_limiter_ : write_limiter_;
  return b != nullptr && !b->unlimited() ? b : nullptr;
}

Result<std::unique_ptr<IoWorker>> IoWorker::start(int queue_depth,
                                                  TokenBucket* read_limiter,
                                                  TokenBucket* write_limiter,
                                                  Clock* clock) {
  if (queue_depth < 1 || queue_depth > 4096) {
    return Status::invalid_argument(fmt::format(
        "queue_depth {} is out of range; use 1 to 4096 (64 is a good start)", queue_depth));
  }
  std::unique_ptr<IoWorker> w(new IoWorker(queue_depth, read_limiter, write_limiter, clock));
  w->wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (w->wake_fd_ < 0) {
    int err = errno;
    return Status::io_error(fmt::format("eventfd failed: {} (errno {})", std::strerror(err), err));
  }
  // The ring is made on the worker thread: with SINGLE_ISSUER its creator is its only submitter.
  std::promise<Status> ready;
  auto ready_future = ready.get_future();
  w->thread_ = std::thread([p = w.get(), &ready] {
    Status s = p->init_ring();
    const bool ok = s.is_ok();
    ready.set_value(std::move(s));
    if (ok) p->run();
  });
  Status s = ready_future.get();
  if (!s.is_ok()) {
    w->thread_.join();
    w->ring_.reset();
    return s;
  }
  return w;
}

Status IoWorker::init_ring() {
  // Completions are handled only when this thread asks for them (DEFER_TASKRUN): no
  // inter-processor interrupt per completion, which costs a VM exit on virtual machines and was
  // worth about 10% of small-read IOPS on our test VM. Older kernels refuse the flags; plain
  // rings work everywhere since 5.1.
  const unsigned entries = ring_entries(queue_depth_);
  int rc = io_uring_queue_init(
      entries, ring_.get(),
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN);
  if (rc == -EINVAL) rc = io_uring_queue_init(entries, ring_.get(), 0);
  if (rc < 0) {
    return Status::unavailable(fmt::format(
        "io_uring_queue_init({} entries) failed: {} (errno {}); io_uring may be disabled "
        "(see /proc/sys/kernel/io_uring_disabled) or the memlock limit too low (ulimit -l)",
        entries, std::strerror(-rc), -rc));
  }
  ring_ready_ = true;
  return Status::ok();
}

IoWorker::~IoWorker() {
  if (thread_.joinable()) {
    {
      MutexLock lock(mu_);
      stop_ = true;
    }
    uint64_t one = 1;
    ssize_t n = ::write(wake_fd_, &one, sizeof(one));
    (void)n;  // the eventfd counter cannot overflow with one write per call
    thread_.join();
  }
  if (ring_ready_) io_uring_queue_exit(ring_.get());
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void IoWorker::submit(std::shared_ptr<IoGroup> group) {
  {
    MutexLock lock(mu_);
    incoming_.push_back(std::move(group));
  }
  uint64_t one = 1;
  ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  (void)n;
}

void IoWorker::cancel(IoGroup* group) {
  {
    MutexLock lock(mu_);
    cancels_.push_back(group);
  }
  uint64_t one = 1;
  ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  (void)n;
}

void IoWorker::take_incoming() {
  std::vector<std::shared_ptr<IoGroup>> incoming;
  std::vector<IoGroup*> cancels;
  {
    MutexLock lock(mu_);
    incoming.swap(incoming_);
    cancels.swap(cancels_);
    stopping_ = stop_;
  }
  for (auto& g : incoming) {
    IoGroup* raw = g.get();
    PendingGroup queued{raw, {}};
    for (IoOp& op : raw->ops) {
      op.group = raw;
      queued.ops.push_back(&op);
    }
    if (!queued.ops.empty()) pending_.push_back(std::move(queued));
    groups_[raw] = GroupState{std::move(g), raw->ops.size()};
    if (raw->ops.empty()) groups_.erase(raw);
  }
  if (stopping_) {
    // The store is closing: nothing new starts; what is in flight finishes.
    for (auto& [raw, state] : groups_) cancels.push_back(raw);
  }
  for (IoGroup* g : cancels) {
    if (groups_.count(g) == 0) continue;  // already finished
    auto queued = std::find_if(pending_.begin(), pending_.end(),
                               [g](const PendingGroup& p) { return p.group == g; });
    if (queued != pending_.end()) {
      std::deque<IoOp*> ops = std::move(queued->ops);
      pending_.erase(queued);
      for (IoOp* op : ops) {
        op->result = -ECANCELED;
        op->fsync_result = -ECANCELED;
        finish(*op);
      }
    }
    auto it = groups_.find(g);
    if (it == groups_.end()) continue;
    for (IoOp& op : it->second.group->ops) {
      if (op.pending_cqes == 0 || op.cancel_sent) continue;
      io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
      if (sqe == nullptr) {
        io_uring_submit(ring_.get());
        sqe = io_uring_get_sqe(ring_.get());
      }
      if (sqe == nullptr) break;  // the ring is full; the ops will finish on their own
      // Reads of regular files often cannot be cancelled once issued; we still wait for them.
      io_uring_prep_cancel64(sqe, reinterpret_cast<uint64_t>(&op), 0);
      io_uring_sqe_set_data64(sqe, kCancelTag);
      op.cancel_sent = true;
    }
  }
}

void IoWorker::fill_ring(Duration* next_start) {
  while (in_flight_ops_ < queue_depth_) {
    // The first group in line of each direction may start its next op, when its limiter lets it.
    auto next = pending_.end();
    bool seen_read = false, seen_write = false;
    for (auto it = pending_.begin(); it != pending_.end() && !(seen_read && seen_write); ++it) {
      IoOp* op = it->ops.front();
      bool& seen = op->kind == IoOp::Kind::kReadv ? seen_read : seen_write;
      if (seen) continue;
      seen = true;
      if (TokenBucket* limiter = limiter_for(*op)) {
        if (!op->reserved) {
          op->not_before =
              limiter->reserve(op->nic_bytes > 0 ? op->nic_bytes : op->io_bytes, clock_->now());
          op->reserved = true;
        }
        if (op->not_before > clock_->now()) {
          if (*next_start == Duration{0} || op->not_before < *next_start) {
            *next_start = op->not_before;
          }
          continue;
        }
      }
      next = it;
      break;
    }
    if (next == pending_.end()) return;
    IoOp* op = next->ops.front();
    const int sqes = op->kind == IoOp::Kind::kWritevFsync ? 2 : 1;
    if (io_uring_sq_space_left(ring_.get()) < static_cast<unsigned>(sqes)) {
      io_uring_submit(ring_.get());
      if (io_uring_sq_space_left(ring_.get()) < static_cast<unsigned>(sqes)) return;
    }
    // This group's next op is the next group's turn: it goes to the back of the line.
    PendingGroup group = std::move(*next);
    pending_.erase(next);
    group.ops.pop_front();
    if (!group.ops.empty()) pending_.push_back(std::move(group));
    io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
    if (op->kind == IoOp::Kind::kReadv) {
      io_uring_prep_readv(sqe, op->fd, op->iov.data(), static_cast<unsigned>(op->iov_count),
                          static_cast<uint64_t>(op->offset_bytes));
      io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(op));
    } else {
      io_uring_prep_writev(sqe, op->fd, op->iov.data(), static_cast<unsigned>(op->iov_count),
                           static_cast<uint64_t>(op->offset_bytes));
      io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(op));
    }
    if (op->kind == IoOp::Kind::kWritevFsync) {
      // The link runs the fsync only after a complete write; a short or failed write cancels it.
      sqe->flags |= IOSQE_IO_LINK;
      io_uring_sqe* sync = io_uring_get_sqe(ring_.get());
      io_uring_prep_fsync(sync, op->fd, 0);
      io_uring_sqe_set_data64(sync, reinterpret_cast<uint64_t>(op) | kFsyncBit);
    }
    op->pending_cqes = sqes;
    in_flight_sqes_ += sqes;
    ++in_flight_ops_;
  }
}

void IoWorker::arm_wake() {
  if (wake_armed_) return;
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  if (sqe == nullptr) {
    io_uring_submit(ring_.get());
    sqe = io_uring_get_sqe(ring_.get());
  }
  if (sqe == nullptr) return;  // retried on the next loop
  io_uring_prep_read(sqe, wake_fd_, &wake_buffer_, sizeof(wake_buffer_), 0);
  io_uring_sqe_set_data64(sqe, kWakeTag);
  wake_armed_ = true;
}

void IoWorker::finish(IoOp& op) {
  IoGroup* g = op.group;
  auto it = groups_.find(g);
  // on_op_done may complete the batch; the worker's reference keeps the group alive until the
  // erase below, whatever the handle does meanwhile.
  g->on_op_done(op);
  if (it != groups_.end() && --it->second.outstanding == 0) groups_.erase(it);
}

void IoWorker::reap() {
  io_uring_cqe* cqe = nullptr;
  unsigned head = 0;
  unsigned seen = 0;
  std::vector<IoOp*> done;
  io_uring_for_each_cqe(ring_.get(), head, cqe) {
    ++seen;
    const uint64_t data = io_uring_cqe_get_data64(cqe);
    if (data == kCancelTag) continue;
    if (data == kWakeTag) {
      wake_armed_ = false;
      continue;
    }
    IoOp* op = reinterpret_cast<IoOp*>(data & ~kFsyncBit);
    if (data & kFsyncBit) {
      op->fsync_result = cqe->res;
    } else {
      op->result = cqe->res;
    }
    --in_flight_sqes_;
    if (--op->pending_cqes == 0) {
      --in_flight_ops_;
      done.push_back(op);
    }
  }
  io_uring_cq_advance(ring_.get(), seen);
  if (done.empty()) return;
  // Refill the ring before finishing the done ops: finishing verifies checksums, and the device
  // should not idle meanwhile.
  Duration ignored{0};
  fill_ring(&ignored);
  io_uring_submit(ring_.get());
  for (IoOp* op : done) finish(*op);
}

void IoWorker::run() {
  for (;;) {
    take_incoming();
    if (stopping_ && groups_.empty() && in_flight_sqes_ == 0) break;
    Duration next_start{0};
    fill_ring(&next_start);
    arm_wake();
    io_uring_cqe* cqe = nullptr;
    if (next_start > Duration{0}) {
      const Duration wait = next_start - clock_->now();
      __kernel_timespec ts{};
      const int64_t ns = std::max<int64_t>(wait.count(), 1000);
      ts.tv_sec = ns / 1000000000;
      ts.tv_nsec = ns % 1000000000;
      io_uring_submit_and_wait_timeout(ring_.get(), &cqe, 1, &ts, nullptr);
    } else {
      io_uring_submit_and_wait_timeout(ring_.get(), &cqe, 1, nullptr, nullptr);
    }
    reap();
  }
}

}  // namespace dualpath::store
