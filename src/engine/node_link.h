#pragma once
// NodeLink: the scheduler's end of one node's control socket (node_protocol.h), shared by the
// threads that run turns. Calls are tagged with call ids; a reader thread hands each reply to the
// call waiting for it, so several turns can be in flight on one node at once (the node serves
// them on its control workers, node_main.h), and gives every other message (reports, token
// events) to the link's message handler.
//
// Threads: thread-safe. One reader thread per link ("wakes" on the socket, polling it with a
// timeout so that destruction is prompt); the message handler runs on it and must not block.
// When the socket closes (the node died) or close() is called, every waiting and later call
// fails with kUnavailable at once.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/control_channel.h"

namespace dualpath::engine {

class NodeLink {
 public:
  using MessageHandler = std::function<void(const Json&)>;
  // `name` ("decode node 1") prefixes errors. `on_message` (optional) gets every message that
  // is not a reply, on the reader thread; `on_closed` (optional) runs once when the link closes.
  NodeLink(std::unique_ptr<transport::OobChannel> channel,
           std::string name,
           MessageHandler on_message = {},
           std::function<void(const Status&)> on_closed = {});
  ~NodeLink();
  NodeLink(const NodeLink&) = delete;
  NodeLink& operator=(const NodeLink&) = delete;

  // Sends `request` (a "cmd" and its fields) with a fresh call id and waits for its reply until
  // `timeout`; a reply with "ok": false becomes its Status (code range-checked).
  Result<Json> call(const Json& request, Duration timeout);
  // The time of a long call's latest sign of progress (e.g. a decode's last token event); read
  // on the calling thread while it waits, so it must not block (an atomic load).
  using Progress = std::function<std::chrono::steady_clock::time_point()>;
  // Like call(), for a call whose length is not bounded (a decode of many tokens): it times out
  // only after `timeout` with neither a reply nor progress, i.e. at max(start, progress()) +
  // `timeout`. A node that keeps streaming is never cut off; one that stops is, as before.
  Result<Json> call(const Json& request, Duration timeout, const Progress& progress);
  // Sends without waiting (e.g. "quit").
  Status send(const Json& message, Duration timeout);
  // Fails every waiting and later call with `why` (kUnavailable), e.g. when the node's lease
  // ran out; the socket is shut down so the node sees it too.
  void close(const Status& why);
  bool closed() const;
  const std::string& name() const { return name_; }
  // Stops the reader thread and waits for it (and so for any on_message / on_closed call in
  // progress), within the reader's poll period. Idempotent and callable from any thread but the
  // reader's own, while other threads still hold the link; the destructor calls it. An owner
  // whose callbacks may hold a reference to the link calls it before dropping its own, so that
  // the last reference is never dropped on the reader thread (which cannot join itself).
  void stop();

 private:
  void read_loop();

  void mark_closed(const Status& why);  // requires mu_

  const std::string name_;
  std::unique_ptr<transport::OobChannel> channel_;
  MessageHandler on_message_;
  std::function<void(const Status&)> on_closed_;
  bool closed_notified_ = false;  // guarded by mu_
  std::mutex send_mu_;            // one writer at a time on the socket
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_call_id_ = 1;                        // guarded by mu_
  std::map<uint64_t, std::optional<Json>> pending_;  // guarded by mu_: call id -> reply
  Status closed_;                                    // guarded by mu_: why the reader stopped
  bool stopping_ = false;                            // guarded by mu_
  std::mutex join_mu_;  // one joiner of reader_ at a time
  std::thread reader_;
};

// The typed calls of the protocol (node_protocol.h): `cmd` with the request's fields, the reply
// parsed without exceptions, e.g. call_node<PrefillReply>(link, "prefill", request, timeout).
template <class Reply, class Request>
Result<Reply> call_node(NodeLink& link,
                        const char* cmd,
                        const Request& request,
                        Duration timeout,
                        const NodeLink::Progress& progress = {}) {
  Json message = request.to_json();
  message["cmd"] = cmd;
  DP_ASSIGN_OR_RETURN(Json reply, link.call(message, timeout, progress));
  return Reply::from_json(reply);
}

}  // namespace dualpath::engine
