#pragma once
// A seam for injecting file-operation failures into FileStore (tests; LevelDB's fault-injection
// Env in spirit). The store asks the injector at each operation on a block file and, when it
// says so, treats the operation as failed with that errno (or, for a read or a write, as a
// short transfer) after the real call. Production stores have none (FileStoreOptions::faults).
// Thread-safe implementations only: the store calls it from its I/O thread and its callers'.

#include <cerrno>
#include <cstdint>
#include <random>
#include <string>

#include "common/mutex.h"

namespace dualpath::store {

enum class FileOp {
  kOpenRead,   // open a block file to read it
  kRead,       // its readv completes
  kCreate,     // create the temp file of a write
  kAllocate,   // posix_fallocate its space
  kWrite,      // its writev completes
  kFsync,      // its fsync completes
  kRename,     // publish it by rename
};
const char* file_op_name(FileOp op);

struct Fault {
  int error = 0;            // errno to fail with; 0: none
  int64_t short_bytes = -1;  // kRead / kWrite: transfer this many bytes instead (>= 0)
  bool active() const { return error != 0 || short_bytes >= 0; }
};

class IoFaults {
 public:
  virtual ~IoFaults() = default;
  virtual Fault on(FileOp op, const std::string& path) = 0;
};

// Fails every `op` (or every op when `op` is unset) with `fault`, the first `count` times (-1:
// always). Counts what it injected.
class FixedFaults final : public IoFaults {
 public:
  FixedFaults(FileOp op, Fault fault, int64_t count = -1) : op_(op), fault_(fault), left_(count) {}
  Fault on(FileOp op, const std::string&) override {
    if (op != op_) return {};
    MutexLock lock(mu_);
    if (left_ == 0) return {};
    if (left_ > 0) --left_;
    ++injected_;
    return fault_;
  }
  int64_t injected() const {
    MutexLock lock(mu_);
    return injected_;
  }

 private:
  const FileOp op_;
  const Fault fault_;
  mutable Mutex mu_;
  int64_t left_ DP_GUARDED_BY(mu_);
  int64_t injected_ DP_GUARDED_BY(mu_) = 0;
};

// Fails each read, write, fsync and rename with probability `p` (EIO; ENOSPC for writes),
// seeded, so a run is repeatable given the same order of operations.
class RandomFaults final : public IoFaults {
 public:
  RandomFaults(double p, uint64_t seed) : p_(p), rng_(seed) {}
  Fault on(FileOp op, const std::string&) override {
    if (op == FileOp::kOpenRead || op == FileOp::kCreate || op == FileOp::kAllocate) return {};
    MutexLock lock(mu_);
    if (std::uniform_real_distribution<double>(0, 1)(rng_) >= p_) return {};
    ++injected_;
    return {op == FileOp::kWrite ? ENOSPC : EIO, -1};
  }
  int64_t injected() const {
    MutexLock lock(mu_);
    return injected_;
  }

 private:
  const double p_;
  mutable Mutex mu_;
  std::mt19937_64 rng_ DP_GUARDED_BY(mu_);
  int64_t injected_ DP_GUARDED_BY(mu_) = 0;
};

}  // namespace dualpath::store
