#pragma once
// Worker: one UCP worker and the progress thread that owns it.
//
// Threads: each Worker runs exactly one progress thread ("dp-<name>"). It owns the UCP worker
// (UCS_THREAD_MODE_SINGLE): every UCX call of this worker, its endpoints, regions and remote
// keys runs there. Other threads hand it work through its inbox (a mutex-guarded queue plus an
// eventfd). When idle the thread sleeps in ppoll() on the UCX event fd and the inbox's eventfd
// (UCP_FEATURE_WAKEUP + ucp_worker_arm): it never spins, so a dozen processes can share two
// cores. Completion callbacks and active-message handlers run on the progress thread.
//
// Every public method is thread-safe. Methods that return a handle or a Status (connect,
// register_memory, import_region, set_am_handler) block until the progress thread has done the
// work; transfers (put, get, send_am) validate their arguments on the calling thread, queue the
// work and return an Operation at once.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dualpath/result.h"
#include "dualpath/units.h"
#include "transport/context.h"
#include "transport/endpoint.h"
#include "transport/memory_region.h"
#include "transport/operation.h"

namespace dualpath::transport {

class WorkerCore;

struct WorkerOptions {
  // Names the progress thread and appears in errors and in address blobs.
  std::string name = "worker";
  // Deadline of an operation whose OpOptions::timeout is zero. A transfer that takes longer
  // fails with kTimedOut and its endpoint is closed (the peer is presumed lost).
  Duration default_timeout = std::chrono::seconds(10);
  // Nice value of the progress thread (0: inherit). A KV-class worker in emulation runs at 19:
  // on a machine without a NIC, its progress thread does the NIC's work (the copies), and the
  // kernel scheduler then plays the NIC's priority arbiter, letting model-class threads run
  // first (CFS weight 15 vs 1024, close to the paper's 99:1; docs/transport.md "Isolation").
  int nice = 0;
  // How long the progress thread keeps polling after its last event before it sleeps (0: it
  // sleeps at once). Polling saves a wake-up per message in a stream, at the price of CPU time
  // that other threads on the same cores then lack; measured both ways in docs/transport.md
  // ("Active messages vs ucp_am_bw"), so it is off by default.
  Duration poll_before_sleep = Duration::zero();
  // The same, but only while the worker has transfers in flight (our sends, puts and gets not
  // yet complete, or rendezvous active messages being received) or had within this time; a
  // worker without recent transfers sleeps at once (unless poll_before_sleep says otherwise).
  // Unset: kPollWhileInFlight when the context has network transports
  // (Context::peer_failure_detection(), e.g. tcp), zero when it has only shared memory. Over
  // tcp a streaming transfer otherwise sleeps and wakes tens of times per message in both
  // processes (each time the socket buffer fills or drains); over shared memory on few shared
  // cores the polling thread takes CPU time from the thread doing the copy. Measured in
  // docs/transport.md ("Active messages vs ucp_am_bw").
  std::optional<Duration> poll_while_in_flight = std::nullopt;
};

// WorkerOptions::poll_while_in_flight on contexts with network transports.
inline constexpr Duration kPollWhileInFlight = std::chrono::microseconds(200);

// One piece of a put or a get: `local` lies inside a MemoryRegion of this worker (the source of
// a put, the destination of a get); the remote range is [remote_offset_bytes,
// remote_offset_bytes + local.size()) of `remote`.
struct RmaRequest {
  std::span<std::byte> local;
  const RemoteRegion* remote = nullptr;
  uint64_t remote_offset_bytes = 0;
};

// A validated RmaRequest in UCX terms, ready to post (used by the traffic manager).
struct RmaOp {
  std::byte* local = nullptr;
  uint64_t length_bytes = 0;
  uint64_t remote_address = 0;
  ucp_rkey* rkey = nullptr;
  ucp_mem* local_memh = nullptr;
};

enum class RmaKind { kPut, kGet };

// Active-message ids are below this bound. The worker installs a handler for every id at
// creation (messages nobody asked for are dropped with a warning): UCX 1.13 crashes on a message
// whose id has no handler.
inline constexpr uint16_t kMaxAmId = 64;

// A received active message. The spans are valid only during the handler call.
struct AmMessage {
  uint16_t id = 0;
  std::span<const std::byte> header;
  std::span<const std::byte> data;
};
// Runs on the progress thread; must not block (post longer work elsewhere).
using AmHandler = std::function<void(const AmMessage&)>;

// Checks an active message's id (< kMaxAmId) and its endpoint's health.
Status check_am_target(const Endpoint& endpoint, uint16_t am_id);

class Worker {
 public:
  // Creates the UCP worker (wakeup enabled) and starts its progress thread.
  static Result<std::unique_ptr<Worker>> create(Context& context, WorkerOptions options);
  // Stops the progress thread. Endpoints, regions and operations must be gone by then.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  const std::string& name() const { return options_.name; }
  uint64_t id() const { return id_; }
  Duration default_timeout() const { return options_.default_timeout; }
  // This worker's address blob (worker id, name, UCX address) for peers' connect().
  const std::vector<std::byte>& address() const { return address_; }

  // Connects to a peer from its address blob; connecting to our own address gives the local
  // (loopback) endpoint used for host<->"HBM" copies. kInvalidArgument for a malformed blob.
  Result<std::unique_ptr<Endpoint>> connect(std::span<const std::byte> peer_address);

  // Registers `buffer` (owned by the caller) for RMA. kInvalidArgument for an empty buffer or one
  // overlapping an existing registration.
  Result<std::unique_ptr<MemoryRegion>> register_memory(std::span<std::byte> buffer);

  // Allocates `bytes` of host memory through UCX and registers it: the memory the peer can map
  // directly on shared memory (posix/sysv segments), so shm puts are a single memcpy instead of
  // a cross-process copy. Owned by the region. Prefer it for buffers peers write into (DRAM
  // buffers, the "HBM" arena on a CPU machine).
  Result<std::unique_ptr<MemoryRegion>> allocate_memory(uint64_t bytes);

  // Unpacks a peer's MemoryRegion::descriptor() for use through `endpoint`. kInvalidArgument when
  // the descriptor is corrupted or belongs to a worker other than the endpoint's peer.
  Result<std::unique_ptr<RemoteRegion>> import_region(const Endpoint& endpoint,
                                                      std::span<const std::byte> descriptor);

  // Posts every request, then one flush: the doorbell batch of PAPER.md §7. Completes when all
  // data is at the target (remote completion). Errors (as the returned Status): an unregistered
  // local span, a remote range out of bounds, a region of another endpoint, a failed endpoint.
  Result<Operation> put(Endpoint& endpoint, std::span<const RmaRequest> requests, OpOptions = {});
  // Like put, in the other direction. Over TCP a get is emulated in software by the target's
  // progress thread (about 1 GB/s here); prefer a put from the other side where possible.
  Result<Operation> get(Endpoint& endpoint, std::span<const RmaRequest> requests, OpOptions = {});
  // Sends an active message. `header` is copied; `data` must stay valid until completion, which
  // means the buffers may be reused (messages on one endpoint arrive in order).
  Result<Operation> send_am(Endpoint& endpoint,
                            uint16_t am_id,
                            std::span<const std::byte> header,
                            std::span<const std::byte> data,
                            OpOptions = {});
  // Installs the handler for messages with `am_id` < kMaxAmId (replacing any previous one).
  Status set_am_handler(uint16_t am_id, AmHandler handler);

  // Validates requests into UCX terms (the checks listed at put()); `verb` names the operation in
  // errors. Thread-safe.
  Result<std::vector<RmaOp>> resolve(const Endpoint& endpoint,
                                     std::span<const RmaRequest> requests,
                                     std::string_view verb) const;
  // Looks up the registration holding [data, data + size) in this worker's context: its UCX
  // memory handle, or null.
  ucp_mem* find_registration(const std::byte* data, size_t size) const {
    return context_.find_registration(data, size);
  }
  Context& context() const { return context_; }

  // Runs `task` on the progress thread, after the tasks queued before it.
  void post(std::function<void()> task);
  bool on_progress_thread() const { return std::this_thread::get_id() == thread_.get_id(); }
  std::thread::id progress_thread_id() const { return thread_.get_id(); }
  // The progress-thread side, for the traffic manager (transport/ internal).
  WorkerCore& core() { return *core_; }

 private:
  friend class Endpoint;
  friend class MemoryRegion;
  friend class RemoteRegion;

  Worker(Context& context, WorkerOptions options, std::unique_ptr<WorkerCore> core, uint64_t id);
  Result<Operation> submit_rma(RmaKind kind,
                               Endpoint& endpoint,
                               std::span<const RmaRequest> requests,
                               OpOptions options);
  // Maps (registers, or with `allocate` allocates) memory and packs its descriptor.
  Result<std::unique_ptr<MemoryRegion>> map_memory(std::byte* address,
                                                   uint64_t bytes,
                                                   bool allocate);
  // Runs `fn` on the progress thread and waits for it (inline when already there).
  void run_sync(const std::function<void()>& fn);
  Operation make_operation(OpOptions& options, std::chrono::steady_clock::time_point& deadline);

  Context& context_;
  WorkerOptions options_;
  std::unique_ptr<WorkerCore> core_;
  uint64_t id_;
  std::vector<std::byte> address_;
  std::thread thread_;
};

}  // namespace dualpath::transport
