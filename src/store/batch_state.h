#pragma once
// BatchState: the shared state behind an IoBatch (internal to the store). The submitting thread
// fills it, the IoWorker completes its ops, and the handle waits on it.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "dualpath/status.h"
#include "store/aligned_buffer.h"
#include "store/block_key.h"
#include "store/io_worker.h"

namespace dualpath::store {
class FileStore;
}

namespace dualpath::store::internal {

class BatchState final : public IoGroup {
 public:
  enum class Kind { kRead, kWrite };

  // What the store needs to finish one request.
  struct Item {
    BlockKey key;
    int root = 0;
    std::string path;             // the block file
    std::string temp_path;        // writes: the file being written before its rename
    std::span<std::byte> buffer;  // reads: the caller's Full Block buffer
    bool pinned = false;          // reads: holds an index pin
    bool reserved = false;        // writes: holds a capacity reservation
  };

  BatchState(Kind kind, FileStore& store, IoWorker& worker, size_t requests)
      : items(requests),
        kind_(kind),
        store_(store),
        worker_(worker),
        results_(requests),
        remaining_(requests) {}

  // Worker thread. A write is finished here (published or cleaned up). A read's I/O is only
  // recorded: its checksum is verified by the thread that waits for the batch (wait_for/poll),
  // which is idle anyway, so that the I/O thread spends its time keeping the device busy.
  void on_op_done(IoOp& op) override;

  // Records request `i`'s outcome; the last one wakes waiters. Any thread.
  void complete(size_t i, Status status);
  // Hands the batch's ops to the worker (after the immediate outcomes are recorded).
  static void submit(std::shared_ptr<BatchState> self);

  // The handle's thread: verifies reads whose I/O is done, until all are or the time is up.
  Status wait_for(Duration timeout);
  // The handle's thread: verifies what is ready; OK when every request has its outcome.
  bool poll();
  void cancel_and_wait();

  Kind kind() const { return kind_; }
  // Read once every request has its outcome (wait_for or poll said so under the lock, and nothing
  // writes results_ after that), or for size(), which never changes: no lock.
  const std::vector<Status>& results() const DP_NO_THREAD_SAFETY_ANALYSIS { return results_; }

  std::vector<Item> items;  // filled by the submitting thread before the worker sees the batch
  AlignedBuffer scratch;    // header and tail pages of every op

 private:
  const Kind kind_;
  FileStore& store_;
  IoWorker& worker_;
  mutable Mutex mu_;
  CondVar cv_;
  // Verifies the checksums of reads whose I/O is done (without the lock: it takes time), then
  // records their outcomes (with it). Callers take `ready_reads_` under the lock, release it for
  // verify_reads and retake it for record_reads.
  std::vector<Status> verify_reads(std::span<IoOp* const> ready);
  void record_reads(std::span<IoOp* const> ready, std::vector<Status> outcomes) DP_REQUIRES(mu_);

  std::vector<Status> results_ DP_GUARDED_BY(mu_);     // until done: results()
  size_t remaining_ DP_GUARDED_BY(mu_) = 0;            // requests without an outcome
  std::vector<IoOp*> ready_reads_ DP_GUARDED_BY(mu_);  // I/O done, not verified yet
  size_t ops_in_io_ DP_GUARDED_BY(mu_) = 0;            // ops the worker has not finished
  bool submitted_ DP_GUARDED_BY(mu_) = false;          // the worker holds ops of this batch
  bool cancel_requested_ DP_GUARDED_BY(mu_) = false;
};

}  // namespace dualpath::store::internal
