#pragma once
// Endpoint: a connection from a Worker to one peer worker, made from the peer's address
// (Worker::address(), exchanged out of band, e.g. with OobChannel).
//
// Owned by the caller; destroy it before its Worker and after every RemoteRegion imported for it.
// Destruction flushes and closes the UCX endpoint on the progress thread (force-closes it when
// the peer has failed) and blocks until UCX has released it. Thread-safe.

#include <cstdint>
#include <memory>
#include <string>

#include "dualpath/status.h"

namespace dualpath::transport {

class Worker;
struct EndpointState;

class Endpoint {
 public:
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  const std::string& peer_name() const;
  uint64_t peer_worker_id() const;
  uint64_t peer_context_id() const;
  // OK while usable; after a peer failure or an operation timeout, the error that closed it.
  Status health() const;
  Worker& worker() const { return worker_; }
  EndpointState& state() const { return *state_; }

 private:
  friend class Worker;
  Endpoint(Worker& worker, std::unique_ptr<EndpointState> state);

  Worker& worker_;
  std::unique_ptr<EndpointState> state_;
};

}  // namespace dualpath::transport
