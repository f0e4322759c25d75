#include "transport/worker.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sys/resource.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>
#include <random>

#include "common/log.h"
#include "transport/ucx_status.h"
#include "transport/wire_format.h"
#include "transport/worker_core.h"

namespace dualpath::transport {
namespace {

// Blob tags: a blob of the wrong kind fails loudly instead of reaching UCX.
constexpr uint32_t kAddressMagic = 0x44505741;  // "DPWA": worker address
constexpr uint32_t kRegionMagic = 0x44505247;   // "DPRG": region descriptor

uint64_t random_worker_id() {
  std::random_device rd;
  uint64_t id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return id ^ static_cast<uint64_t>(getpid());
}

std::atomic<uint64_t> g_next_region_id{1};  // relaxed: only uniqueness matters

}  // namespace

// ---- Worker ----

Result<std::unique_ptr<Worker>> Worker::create(Context& context, WorkerOptions options) {
  if (options.default_timeout <= Duration::zero()) {
    return Status::invalid_argument("WorkerOptions::default_timeout must be positive");
  }
  if (options.poll_while_in_flight && *options.poll_while_in_flight < Duration::zero()) {
    return Status::invalid_argument("WorkerOptions::poll_while_in_flight must not be negative");
  }
  // The UCP worker is created on the progress thread that will own it.
  std::promise<Result<std::unique_ptr<WorkerCore>>> created;
  auto created_future = created.get_future();
  std::promise<WorkerCore*> started;  // hands the thread its core once the Worker exists
  auto started_future = started.get_future();
  std::string name = options.name;
  int nice = options.nice;
  Duration poll = options.poll_before_sleep;
  // WorkerOptions::poll_while_in_flight, resolved: the default depends on the transports.
  Duration busy = options.poll_while_in_flight.value_or(
      context.peer_failure_detection() ? kPollWhileInFlight : Duration::zero());
  std::thread thread(
      [&context, name, nice, poll, busy, &created, started = std::move(started_future)]() mutable {
        std::string thread_name = ("dp-" + name).substr(0, 15);
        pthread_setname_np(pthread_self(), thread_name.c_str());
        // Per-thread on Linux: setpriority on a thread id changes only that thread.
        if (nice != 0 && setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice) != 0) {
          DP_LOG_WARN("transport: worker '{}': cannot set nice {}: {}", name, nice,
                      std::strerror(errno));
        }
        ucp_worker_params_t params{};
        params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        params.thread_mode = UCS_THREAD_MODE_SINGLE;  // only this thread touches it
        ucp_worker_h w = nullptr;
        Status st = ucx_status(ucp_worker_create(context.native(), &params, &w),
                               fmt::format("ucp_worker_create for worker '{}'", name));
        if (!st.is_ok()) {
          created.set_value(st);
          return;
        }
        created.set_value(std::make_unique<WorkerCore>(context.native(), w, name, poll, busy));
        WorkerCore* core = started.get();
        if (core) core->run();
      });
  auto core_result = created_future.get();
  if (!core_result.is_ok()) {
    thread.join();
    return core_result.status();
  }
  std::unique_ptr<WorkerCore> core = std::move(core_result).value();
  WorkerCore* core_ptr = core.get();
  std::unique_ptr<Worker> worker(
      new Worker(context, std::move(options), std::move(core), random_worker_id()));
  worker->thread_ = std::move(thread);
  started.set_value(core_ptr);

  Status address_status;
  std::vector<std::byte> ucx_address;
  worker->run_sync([&] {
    ucp_address_t* addr = nullptr;
    size_t len = 0;
    address_status = ucx_status(ucp_worker_get_address(core_ptr->native(), &addr, &len),
                                "ucp_worker_get_address");
    if (address_status.is_ok()) {
      const auto* b = reinterpret_cast<const std::byte*>(addr);
      ucx_address.assign(b, b + len);
      ucp_worker_release_address(core_ptr->native(), addr);
    }
  });
  DP_RETURN_IF_ERROR(address_status);
  for (uint16_t id = 0; id < kMaxAmId; ++id) {
    Status st;
    std::string worker_name = worker->options_.name;
    worker->run_sync([&] {
      core_ptr->set_am_handler(
          id,
          [worker_name](const AmMessage& m) {
            DP_LOG_WARN("transport: worker '{}' dropped active message {} ({} bytes): no handler",
                        worker_name, m.id, m.data.size());
          },
          st);
    });
    DP_RETURN_IF_ERROR(st);
  }
  WireWriter w;
  w.u32(kAddressMagic);
  w.u64(worker->id_);
  w.u64(context.id());
  w.text(worker->options_.name);
  w.bytes(ucx_address);
  worker->address_ = w.finish();
  return worker;
}

Worker::Worker(Context& context,
               WorkerOptions options,
               std::unique_ptr<WorkerCore> core,
               uint64_t id)
    : context_(context), options_(std::move(options)), core_(std::move(core)), id_(id) {}

Worker::~Worker() {
  core_->stop();
  if (thread_.joinable()) thread_.join();
  core_.reset();  // destroys the UCP worker; the owning thread has ended
}

void Worker::post(std::function<void()> task) { core_->post(std::move(task)); }

void Worker::run_sync(const std::function<void()>& fn) {
  if (on_progress_thread()) {
    fn();
    return;
  }
  std::promise<void> done;
  auto future = done.get_future();
  core_->post([&] {
    fn();
    done.set_value();
  });
  future.wait();
}

Result<std::unique_ptr<Endpoint>> Worker::connect(std::span<const std::byte> peer_address) {
  DP_ASSIGN_OR_RETURN(auto reader, WireReader::open(peer_address, "worker address"));
  DP_ASSIGN_OR_RETURN(uint32_t magic, reader.u32());
  if (magic != kAddressMagic) {
    return Status::invalid_argument(
        "the blob passed to Worker::connect is not a worker address (wrong tag); pass the "
        "peer's Worker::address()");
  }
  auto state = std::make_unique<EndpointState>();
  DP_ASSIGN_OR_RETURN(state->peer_worker_id, reader.u64());
  DP_ASSIGN_OR_RETURN(state->peer_context_id, reader.u64());
  DP_ASSIGN_OR_RETURN(state->peer_name, reader.text());
  DP_ASSIGN_OR_RETURN(auto ucx_address, reader.bytes());
  // The loopback endpoint (our own address) cannot lose its peer.
  state->peer_failure_mode = context_.peer_failure_detection() && state->peer_worker_id != id_;
  Status st;
  run_sync([&] { st = core_->create_endpoint(*state, ucx_address); });
  DP_RETURN_IF_ERROR(st);
  auto endpoint = std::unique_ptr<Endpoint>(new Endpoint(*this, std::move(state)));
  // Wait for the wireup: an empty flush completes once the connection is established. An
  // endpoint closed while its wireup is still in flight trips an assertion in UCX 1.13's tcp
  // transport (seen under load). A failure here surfaces on the endpoint's first operation.
  auto flush = submit_rma(RmaKind::kPut, *endpoint, {}, {});
  if (flush.is_ok()) {
    Status wired = flush->wait();
    if (!wired.is_ok()) {
      DP_LOG_DEBUG("transport: worker '{}': wireup to '{}': {}", options_.name,
                   endpoint->peer_name(), wired.to_string());
    }
  }
  return endpoint;
}

Result<std::unique_ptr<MemoryRegion>> Worker::register_memory(std::span<std::byte> buffer) {
  if (buffer.empty() || buffer.data() == nullptr) {
    return Status::invalid_argument("cannot register an empty buffer");
  }
  return map_memory(buffer.data(), buffer.size(), false);
}

Result<std::unique_ptr<MemoryRegion>> Worker::allocate_memory(uint64_t bytes) {
  if (bytes == 0) return Status::invalid_argument("cannot allocate an empty region");
  return map_memory(nullptr, bytes, true);
}

Result<std::unique_ptr<MemoryRegion>> Worker::map_memory(std::byte* address,
                                                         uint64_t bytes,
                                                         bool allocate) {
  if (!allocate) {
    if (context_.overlaps_registration(address, bytes)) {
      return Status::invalid_argument(fmt::format(
          "buffer at {} ({} bytes) overlaps a region already registered with worker '{}'",
          static_cast<const void*>(address), bytes, options_.name));
    }
  }
  uint64_t region_id = g_next_region_id.fetch_add(1, std::memory_order_relaxed);
  Status st;
  ucp_mem_h memh = nullptr;
  std::vector<std::byte> rkey;
  run_sync([&] {
    ucp_mem_map_params_t params{};
    params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                        UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    params.address = address;
    params.length = bytes;
    params.flags = allocate ? UCP_MEM_MAP_ALLOCATE : 0;
    st = ucx_status(ucp_mem_map(context_.native(), &params, &memh),
                    fmt::format("ucp_mem_map of {} bytes", bytes));
    if (!st.is_ok()) return;
    if (allocate) {
      ucp_mem_attr_t attr{};
      attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
      st = ucx_status(ucp_mem_query(memh, &attr), "ucp_mem_query");
      address = static_cast<std::byte*>(attr.address);
    }
    void* packed = nullptr;
    size_t packed_size = 0;
    if (st.is_ok()) {
      st = ucx_status(ucp_rkey_pack(context_.native(), memh, &packed, &packed_size),
                      "ucp_rkey_pack");
    }
    if (!st.is_ok()) {
      ucp_mem_unmap(context_.native(), memh);
      return;
    }
    const auto* b = static_cast<const std::byte*>(packed);
    rkey.assign(b, b + packed_size);
    ucp_rkey_buffer_release(packed);
  });
  DP_RETURN_IF_ERROR(st);
  auto base = reinterpret_cast<uintptr_t>(address);
  WireWriter w;
  w.u32(kRegionMagic);
  w.u64(context_.id());
  w.u64(region_id);
  w.u64(base);
  w.u64(bytes);
  w.bytes(rkey);
  context_.add_registration(address, bytes, memh);
  return std::unique_ptr<MemoryRegion>(
      new MemoryRegion(*this, std::span(address, bytes), region_id, memh, w.finish()));
}

Result<std::unique_ptr<RemoteRegion>> Worker::import_region(const Endpoint& endpoint,
                                                            std::span<const std::byte> descriptor) {
  DP_ASSIGN_OR_RETURN(auto reader, WireReader::open(descriptor, "region descriptor"));
  DP_ASSIGN_OR_RETURN(uint32_t magic, reader.u32());
  if (magic != kRegionMagic) {
    return Status::invalid_argument(
        "the blob passed to Worker::import_region is not a region descriptor (wrong tag); pass "
        "the peer's MemoryRegion::descriptor()");
  }
  DP_ASSIGN_OR_RETURN(uint64_t owner, reader.u64());
  DP_ASSIGN_OR_RETURN(uint64_t region_id, reader.u64());
  DP_ASSIGN_OR_RETURN(uint64_t base, reader.u64());
  DP_ASSIGN_OR_RETURN(uint64_t length, reader.u64());
  DP_ASSIGN_OR_RETURN(auto rkey_bytes, reader.bytes());
  if (owner != endpoint.peer_context_id()) {
    return Status::invalid_argument(fmt::format(
        "region {} belongs to UCX context {:#x}, but the endpoint connects to peer '{}' (context "
        "{:#x}); a remote key only works through an endpoint to a worker of the context that "
        "registered it",
        region_id, owner, endpoint.peer_name(), endpoint.peer_context_id()));
  }
  if (&endpoint.worker() != this) {
    return Status::invalid_argument(
        fmt::format("the endpoint to '{}' belongs to worker '{}', not '{}'", endpoint.peer_name(),
                    endpoint.worker().name(), options_.name));
  }
  Status st = endpoint.health();
  ucp_rkey_h rkey = nullptr;
  if (st.is_ok()) {
    run_sync([&] {
      if (endpoint.state().ep == nullptr) {
        st = Status::failed_precondition("the endpoint is closed");
        return;
      }
      st = ucx_status(ucp_ep_rkey_unpack(endpoint.state().ep, rkey_bytes.data(), &rkey),
                      fmt::format("ucp_ep_rkey_unpack of region {} from '{}'", region_id,
                                  endpoint.peer_name()));
    });
  }
  DP_RETURN_IF_ERROR(st);
  return std::unique_ptr<RemoteRegion>(
      new RemoteRegion(endpoint, owner, region_id, base, length, rkey));
}

Result<std::vector<RmaOp>> Worker::resolve(const Endpoint& endpoint,
                                           std::span<const RmaRequest> requests,
                                           std::string_view verb) const {
  DP_RETURN_IF_ERROR(endpoint.health(), "{} to peer '{}'", verb, endpoint.peer_name());
  if (&endpoint.worker() != this) {
    return Status::invalid_argument(fmt::format("{}: the endpoint to '{}' belongs to worker '{}'",
                                                verb, endpoint.peer_name(),
                                                endpoint.worker().name()));
  }
  std::vector<RmaOp> ops;
  ops.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const RmaRequest& r = requests[i];
    if (r.remote == nullptr) {
      return Status::invalid_argument(fmt::format("{} request {}: no remote region", verb, i));
    }
    if (&r.remote->endpoint() != &endpoint) {
      return Status::invalid_argument(fmt::format(
          "{} request {}: remote region {} was imported for the endpoint to '{}', not for this "
          "endpoint to '{}'; its remote key is not valid here (import it for this endpoint)",
          verb, i, r.remote->region_id(), r.remote->endpoint().peer_name(), endpoint.peer_name()));
    }
    if (r.local.empty()) {
      return Status::invalid_argument(fmt::format("{} request {}: empty local buffer", verb, i));
    }
    uint64_t len = r.local.size();
    if (r.remote_offset_bytes > r.remote->length_bytes() ||
        len > r.remote->length_bytes() - r.remote_offset_bytes) {
      return Status::out_of_range(fmt::format(
          "{} request {}: remote range [{}, {}) is outside region {} of peer '{}' ({} bytes)", verb,
          i, r.remote_offset_bytes, r.remote_offset_bytes + len, r.remote->region_id(),
          endpoint.peer_name(), r.remote->length_bytes()));
    }
    ucp_mem* memh = find_registration(r.local.data(), len);
    if (memh == nullptr) {
      return Status::invalid_argument(fmt::format(
          "{} request {}: local buffer [{}, +{} bytes) is not inside a memory region registered "
          "with worker '{}'; register it with Worker::register_memory first (the NIC can only "
          "reach registered memory)",
          verb, i, static_cast<const void*>(r.local.data()), len, options_.name));
    }
    ops.push_back(RmaOp{r.local.data(), len, r.remote->base_address() + r.remote_offset_bytes,
                        r.remote->native(), memh});
  }
  return ops;
}

Operation Worker::make_operation(OpOptions& options,
                                 std::chrono::steady_clock::time_point& deadline) {
  Duration timeout =
      options.timeout > Duration::zero() ? options.timeout : options_.default_timeout;
  deadline = std::chrono::steady_clock::now() + timeout;
  return Operation(std::make_shared<OpState>(std::move(options.on_complete), thread_.get_id()));
}

Result<Operation> Worker::put(Endpoint& endpoint,
                              std::span<const RmaRequest> requests,
                              OpOptions options) {
  return submit_rma(RmaKind::kPut, endpoint, requests, std::move(options));
}

Result<Operation> Worker::get(Endpoint& endpoint,
                              std::span<const RmaRequest> requests,
                              OpOptions options) {
  return submit_rma(RmaKind::kGet, endpoint, requests, std::move(options));
}

Result<Operation> Worker::submit_rma(RmaKind kind,
                                     Endpoint& endpoint,
                                     std::span<const RmaRequest> requests,
                                     OpOptions options) {
  DP_ASSIGN_OR_RETURN(auto ops, resolve(endpoint, requests, kind == RmaKind::kPut ? "put" : "get"));
  SteadyTime deadline;
  Operation op = make_operation(options, deadline);
  std::shared_ptr<OpState> state = op.state();
  EndpointState* ep = &endpoint.state();
  core_->post([core = core_.get(), kind, ep, ops = std::move(ops), deadline, state]() mutable {
    core->start_rma(kind, *ep, std::move(ops), deadline,
                    [state](const Status& s) { state->complete(s); });
  });
  return op;
}

Status check_am_target(const Endpoint& endpoint, uint16_t am_id) {
  if (am_id >= kMaxAmId) {
    return Status::invalid_argument(
        fmt::format("active message id {} is not below kMaxAmId ({}); the peer could not handle it",
                    am_id, kMaxAmId));
  }
  DP_RETURN_IF_ERROR(endpoint.health(), "active message {} to '{}'", am_id, endpoint.peer_name());
  return Status::ok();
}

Result<Operation> Worker::send_am(Endpoint& endpoint,
                                  uint16_t am_id,
                                  std::span<const std::byte> header,
                                  std::span<const std::byte> data,
                                  OpOptions options) {
  DP_RETURN_IF_ERROR(check_am_target(endpoint, am_id));
  if (&endpoint.worker() != this) {
    return Status::invalid_argument("send_am: the endpoint belongs to another worker");
  }
  ucp_mem* memh = data.empty() ? nullptr : find_registration(data.data(), data.size());
  SteadyTime deadline;
  Operation op = make_operation(options, deadline);
  std::shared_ptr<OpState> state = op.state();
  EndpointState* ep = &endpoint.state();
  std::vector<std::byte> header_copy(header.begin(), header.end());
  core_->post([core = core_.get(), ep, am_id, header_copy = std::move(header_copy), data, memh,
               deadline, state]() mutable {
    core->start_am(*ep, am_id, std::move(header_copy), data, memh, deadline,
                   [state](const Status& s) { state->complete(s); });
  });
  return op;
}

Status Worker::set_am_handler(uint16_t am_id, AmHandler handler) {
  if (!handler) return Status::invalid_argument("set_am_handler: empty handler");
  if (am_id >= kMaxAmId) {
    return Status::invalid_argument(
        fmt::format("active message id {} is not below kMaxAmId ({})", am_id, kMaxAmId));
  }
  Status st;
  run_sync([&] { core_->set_am_handler(am_id, std::move(handler), st); });
  return st;
}

// ---- Endpoint ----

Endpoint::Endpoint(Worker& worker, std::unique_ptr<EndpointState> state)
    : worker_(worker), state_(std::move(state)) {}

Endpoint::~Endpoint() {
  worker_.run_sync([&] { state_->core->close_endpoint(*state_); });
}

const std::string& Endpoint::peer_name() const { return state_->peer_name; }
uint64_t Endpoint::peer_worker_id() const { return state_->peer_worker_id; }
uint64_t Endpoint::peer_context_id() const { return state_->peer_context_id; }
Status Endpoint::health() const { return state_->health(); }

// ---- MemoryRegion ----

MemoryRegion::MemoryRegion(Worker& worker,
                           std::span<std::byte> buffer,
                           uint64_t id,
                           ucp_mem* memh,
                           std::vector<std::byte> descriptor)
    : worker_(worker), buffer_(buffer), id_(id), memh_(memh), descriptor_(std::move(descriptor)) {}

MemoryRegion::~MemoryRegion() {
  worker_.context_.remove_registration(buffer_.data());
  worker_.run_sync([&] { ucp_mem_unmap(worker_.context_.native(), memh_); });
}

// ---- RemoteRegion ----

RemoteRegion::RemoteRegion(const Endpoint& endpoint,
                           uint64_t owner_context_id,
                           uint64_t region_id,
                           uint64_t base_address,
                           uint64_t length_bytes,
                           ucp_rkey* rkey)
    : endpoint_(endpoint),
      owner_context_id_(owner_context_id),
      region_id_(region_id),
      base_address_(base_address),
      length_bytes_(length_bytes),
      rkey_(rkey) {}

RemoteRegion::~RemoteRegion() {
  endpoint_.worker().run_sync([&] { ucp_rkey_destroy(rkey_); });
}

}  // namespace dualpath::transport
