#pragma once
// IoWorker: one I/O thread that owns one io_uring ring (STYLE.md: each I/O thread owns its ring).
//
// Threads: the worker thread runs every submission and completion of its ring. It sleeps in
// io_uring_submit_and_wait_timeout and wakes on (a) a completion, (b) a write to its eventfd,
// which submit()/cancel()/the destructor do, or (c) the time at which the rate limiter lets the
// next operation start. Work reaches it only through the incoming queue (mu_).
//
// An IoGroup is a set of block I/Os submitted together (a batch). The worker co-owns each group
// (std::shared_ptr, with the batch handle) until all of the group's ops have completed, and calls
// IoGroup::on_op_done on the worker thread once per op. Every op passes its direction's rate
// limiter first (reads and writes each have one: a full-duplex storage NIC). Groups waiting at
// once are served round robin, an op at a time (fair shares, not FIFO), within each direction: a
// write waiting for its limiter does not hold up a read behind it, nor a read a write.

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dualpath/result.h"
#include "dualpath/units.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/token_bucket.h"

struct io_uring;

namespace dualpath::store {

class IoGroup;

// One block file's I/O: a readv, or a writev, normally linked to an fsync (write, then make it
// durable).
struct IoOp {
  enum class Kind { kReadv, kWritevFsync, kWritev };
  Kind kind = Kind::kReadv;
  int fd = -1;
  int64_t offset_bytes = 0;
  std::array<iovec, 4> iov{};
  int iov_count = 0;
  int64_t io_bytes = 0;  // the sum of the iov lengths: a complete transfer returns this
  // What the rate limiter charges (0: io_bytes): the KV the block carries, not the file's header
  // and padding, which the modeled storage NIC does not carry at a scaled KV size.
  int64_t nic_bytes = 0;
  size_t tag = 0;        // the group's own index for the op (which request it serves)

  // Filled by the worker.
  int result = 0;        // bytes transferred or -errno (-ECANCELED when cancelled)
  int fsync_result = 0;  // kWritevFsync only
  IoGroup* group = nullptr;
  int pending_cqes = 0;
  bool cancel_sent = false;
  bool reserved = false;   // has its rate-limiter slot
  Duration not_before{0};  // when the rate limiter lets it start
};

class IoGroup {
 public:
  virtual ~IoGroup() = default;
  // Called on the worker thread when `op` has finished, was cancelled (result -ECANCELED) or
  // failed. Must not block for long: it delays every other op of the worker.
  virtual void on_op_done(IoOp& op) = 0;

  // The ops the worker runs; filled before submit() and not resized afterwards.
  std::vector<IoOp> ops;
};

class IoWorker {
 public:
  // Starts the thread. `queue_depth` ops may be in flight at once. The limiters of reads and of
  // writes (either may be null: unlimited) must outlive the worker. kUnavailable when io_uring
  // cannot be set up (e.g. disabled by sysctl).
  static Result<std::unique_ptr<IoWorker>> start(int queue_depth, TokenBucket* read_limiter,
                                                  TokenBucket* write_limiter, Clock* clock);
  // Cancels what is still queued, waits for what is in flight, then joins the thread.
  ~IoWorker();
  IoWorker(const IoWorker&) = delete;
  IoWorker& operator=(const IoWorker&) = delete;

  // Queues every op of `group` (ops with fd < 0 are skipped by the caller, not put in ops).
  // Thread-safe; never blocks on I/O.
  void submit(std::shared_ptr<IoGroup> group);
  // Asks the worker to abort the group's queued ops and to cancel its in-flight ones. Each still
  // gets its on_op_done call. Thread-safe; returns at once.
  void cancel(IoGroup* group);

 private:
  IoWorker(int queue_depth, TokenBucket* read_limiter, TokenBucket* write_limiter, Clock* clock);
  // The limiter `op` passes (null: none).
  TokenBucket* limiter_for(const IoOp& op) const;
  Status init_ring();
  void run();
  void take_incoming();
  void fill_ring(Duration* next_start);
  void reap();
  void finish(IoOp& op);
  void arm_wake();

  const int queue_depth_;
  TokenBucket* const read_limiter_;
  TokenBucket* const write_limiter_;
  Clock* const clock_;  // the limiters' time; set whenever one is
  std::unique_ptr<io_uring> ring_;
  bool ring_ready_ = false;  // io_uring_queue_init succeeded
  int wake_fd_ = -1;
  uint64_t wake_buffer_ = 0;  // worker thread: target of the armed eventfd read
  bool wake_armed_ = false;   // worker thread

  Mutex mu_;
  std::vector<std::shared_ptr<IoGroup>> incoming_ DP_GUARDED_BY(mu_);
  std::vector<IoGroup*> cancels_ DP_GUARDED_BY(mu_);
  bool stop_ DP_GUARDED_BY(mu_) = false;

  // Worker-thread state.
  struct GroupState {
    std::shared_ptr<IoGroup> group;  // co-owned with the batch handle until every op is done
    size_t outstanding = 0;
  };
  std::unordered_map<IoGroup*, GroupState> groups_;
  // Ops not yet started, one queue per group, served round robin (one op of each group in
  // turn): concurrent batches share the device and its rate limiter as requests share a storage
  // NIC (processor sharing, as the simulator models it), so a one-block write never waits behind
  // a 100-block read that came first.
  struct PendingGroup {
    IoGroup* group = nullptr;
    std::deque<IoOp*> ops;
  };
  std::deque<PendingGroup> pending_;
  int in_flight_sqes_ = 0;  // SQEs whose CQE has not been reaped (cancels and wake excluded)
  int in_flight_ops_ = 0;   // ops submitted to the kernel and not yet finished
  bool stopping_ = false;

  std::thread thread_;
};

}  // namespace dualpath::store
