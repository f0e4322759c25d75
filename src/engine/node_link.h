#pragma once
// NodeLink: the driver's end of one node's control socket, shared by the driver's session
// threads. Calls are tagged with call ids; a reader thread hands each reply to the call waiting
// for it, so several turns can be in flight on one node at once (the node serves them on its
// control workers, node_main.h).
//
// Threads: thread-safe. One reader thread per link ("wakes" on the socket, polling it with a
// timeout so that destruction is prompt). When the socket closes (the node died) every waiting
// and later call fails with kUnavailable.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/control_channel.h"

namespace dualpath::engine {

class NodeLink {
 public:
  // `name` ("decode node 1") prefixes errors.
  NodeLink(std::unique_ptr<transport::OobChannel> channel, std::string name);
  ~NodeLink();
  NodeLink(const NodeLink&) = delete;
  NodeLink& operator=(const NodeLink&) = delete;

  // Sends `request` with a fresh call id and waits for its reply until `timeout`; a reply with
  // "ok": false becomes its Status.
  Result<Json> call(const Json& request, Duration timeout);
  // Sends without waiting (e.g. "quit").
  Status send(const Json& message, Duration timeout);

 private:
  void read_loop();

  const std::string name_;
  std::unique_ptr<transport::OobChannel> channel_;
  std::mutex send_mu_;  // one writer at a time on the socket
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_call_id_ = 1;                        // guarded by mu_
  std::map<uint64_t, std::optional<Json>> pending_;  // guarded by mu_: call id -> reply
  Status closed_;                                    // guarded by mu_: why the reader stopped
  bool stopping_ = false;                            // guarded by mu_
  std::thread reader_;
};

}  // namespace dualpath::engine
