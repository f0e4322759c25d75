#pragma once
// IoBatch: an outstanding batch of block reads or writes (FileStore::read / FileStore::write).
// Move-only RAII handle.
//
// Reads are verified (header and checksum) by the thread that calls wait_for or poll, so a
// read's outcome is known only through them.
//
// Each request of the batch ends with its own Status, in request order:
//   reads:  OK (the buffer holds the verified block), kNotFound (a miss: absent, evicted, or an
//           invalid file that was quarantined), kIoError, kAborted (cancelled);
//   writes: OK (published, or already stored), kResourceExhausted (disk full, or the capacity is
//           pinned by reads), kIoError, kAborted.
// On any non-OK read the buffer's contents are unspecified: never use them.
//
// Destruction cancels unfinished requests and blocks until the kernel has released every buffer,
// so no completion can touch freed memory; the buffers must outlive this object, and the
// FileStore must outlive every batch. Thread-compatible: one thread uses a handle at a time.

#include <cstddef>
#include <memory>
#include <span>

#include "dualpath/status.h"
#include "dualpath/units.h"

namespace dualpath::store {

namespace internal {
class BatchState;
}

class IoBatch {
 public:
  IoBatch() = default;  // an empty, finished batch
  IoBatch(IoBatch&&) noexcept;
  IoBatch& operator=(IoBatch&&) noexcept;
  IoBatch(const IoBatch&) = delete;
  IoBatch& operator=(const IoBatch&) = delete;
  ~IoBatch();

  // Blocks until every request has finished or `timeout` has passed. OK: all finished (look at
  // results()). kTimedOut: some are still running; call again, or destroy to cancel.
  Status wait_for(Duration timeout);
  // Non-blocking (it verifies reads whose I/O is done): OK when all finished, else
  // kInProgress.
  Status poll();

  size_t size() const;
  // Per-request outcomes; call only after wait_for/poll returned OK.
  std::span<const Status> results() const;
  size_t ok_count() const;

  // Cancels unfinished requests and waits for them (what the destructor does). Idempotent.
  void cancel_and_wait();

 private:
  friend class FileStore;
  explicit IoBatch(std::shared_ptr<internal::BatchState> state);
  // Co-owned with the IoWorker while the batch's ops run (see io_worker.h).
  std::shared_ptr<internal::BatchState> state_;
};

}  // namespace dualpath::store
