#pragma once
// Context: one UCP context (the UCX library instance: transports, devices, memory domains).
//
// A traffic class maps onto the network's QoS through the context's UCX settings (IB service
// level, RoCE traffic class; docs/transport.md "Production mapping"), so an engine that wants
// the NIC to arbitrate its two classes creates one Context per class.
// Thread-safe after create(); workers and memory registrations made from it must be destroyed
// before it.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "dualpath/result.h"

struct ucp_context;  // UCX's opaque types; only transport/*.cc sees their definitions.
struct ucp_mem;

namespace dualpath::transport {

struct ContextOptions {
  // UCX_TLS: the transports, e.g. "sm,self" or "tcp,self" or "rc,self". Empty: the environment's
  // UCX_TLS, else every transport UCX finds.
  std::string transports;
  // UCX_NET_DEVICES: "all" or a comma-separated device list ("mlx5_0:1", "lo"). Empty: the
  // environment's UCX_NET_DEVICES. Either way it is checked against the host's devices, and a
  // missing device fails create() with a list of the available ones.
  std::string net_devices;
  // Further UCX settings, names without the UCX_ prefix, applied after the environment, e.g.
  // {"IB_SL", "1"} or {"IB_TRAFFIC_CLASS", "106"} for the KV class's context.
  std::vector<std::pair<std::string, std::string>> settings;
};

class Context {
 public:
  // Reads UCX's configuration (environment first, then `options`), validates the devices and
  // initialises UCP with RMA, active messages and wakeup (event fd) support.
  // Errors: kNotFound for a device that does not exist, kInvalidArgument for an unknown
  // setting, kIoError when UCX cannot initialise.
  static Result<std::unique_ptr<Context>> create(const ContextOptions& options);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  ucp_context* native() const { return context_; }
  const ContextOptions& options() const { return options_; }
  // Whether endpoints can use UCX's peer-failure mode (UCP_ERR_HANDLING_MODE_PEER). UCX 1.13's
  // shared-memory transports (posix, sysv, cma) do not support it, so on "sm,self" a lost peer
  // is detected by the operations' deadlines alone (docs/transport.md "Failure handling").
  bool peer_failure_detection() const { return peer_failure_detection_; }

  // Identifies this context in region descriptors: a remote key is valid through an endpoint to
  // any worker of the context that registered the memory.
  uint64_t id() const { return id_; }

  // The registrations of this context, by address (used to check and find the memory handle of
  // a local buffer). Thread-safe.
  bool overlaps_registration(const std::byte* data, uint64_t size) const;
  void add_registration(const std::byte* data, uint64_t size, ucp_mem* memh);
  void remove_registration(const std::byte* data);
  // The handle of the registration holding [data, data + size), or null.
  ucp_mem* find_registration(const std::byte* data, uint64_t size) const;

 private:
  Context(ucp_context* context, ContextOptions options, bool peer_failure_detection);

  struct Registration {
    uint64_t size_bytes;
    ucp_mem* memh;
  };

  ucp_context* context_;
  ContextOptions options_;
  bool peer_failure_detection_;
  uint64_t id_;
  mutable Mutex registry_mu_;
  std::map<uintptr_t, Registration> registry_ DP_GUARDED_BY(registry_mu_);  // by base address
};

}  // namespace dualpath::transport
