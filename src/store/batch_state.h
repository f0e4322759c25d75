#pragma once
// BatchState: the shared state behind an IoBatch (internal to the store). The submitting thread
// fills it, the IoWorker completes its ops, and the handle waits on it.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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

  void on_op_done(IoOp& op) override;

  // Records request `i`'s outcome; the last one wakes waiters. Any thread.
  void complete(size_t i, Status status);
  // Hands the batch's ops to the worker (after the immediate outcomes are recorded).
  static void submit(std::shared_ptr<BatchState> self);

  Status wait_for(Duration timeout);
  bool done() const;
  void cancel_and_wait();

  Kind kind() const { return kind_; }
  const std::vector<Status>& results() const { return results_; }

  std::vector<Item> items;  // filled by the submitting thread before the worker sees the batch
  AlignedBuffer scratch;    // header and tail pages of every op

 private:
  const Kind kind_;
  FileStore& store_;
  IoWorker& worker_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Status> results_;    // guarded by mu_ until done
  size_t remaining_ = 0;           // guarded by mu_
  bool submitted_ = false;         // guarded by mu_: the worker holds ops of this batch
  bool cancel_requested_ = false;  // guarded by mu_
};

}  // namespace dualpath::store::internal
