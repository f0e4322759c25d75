#pragma once
// FakeNodes: a cluster's worth of nodes that speak the real control plane (control.proto) to a
// real scheduler and do no work: `dualpath bench control` measures the scheduler alone with them.
//
// Each fake node registers (Register), holds its lease (Session: its hello, then a load report
// every report interval of its setup), and answers the scheduler's calls at once: Prepare and
// Prefill with empty replies (a Prefill says read_done first when its plan reads on the PE
// side), Decode with the turn's gen_tokens tokens ('x'), streamed at `token_rate` per second per
// decode (0: as fast as they go) in the decode engine's own batches (engine/token_batcher.h).
// They are fakes of the nodes only: no GPU, no UCX, no store behind them (the hello's transport
// descriptors are placeholders the scheduler forwards and never reads).
//
// All nodes share one gRPC server (one address in every registration); a call's session token
// says which node it is for. Requests are recognised by a marker in their prompt ("ctl#<id>;",
// bytes as the byte tokenizer's ids), so the benchmark can time each one from its arrival at the
// API to its prefill call, and each token from its node's send to the client.
//
// Threads: start() registers every node and returns once all hold a session; the server's
// handler threads (at most `max_streams` calls at once) and one reporter thread run until
// destruction.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::bench {

struct FakeNodesOptions {
  std::string scheduler;  // HOST:PORT of the scheduler's port for nodes
  int prefill_nodes = 1;
  int decode_nodes = 2;
  double token_rate = 0;  // tokens per second per decode; 0: no pacing
  int max_streams = 4096;
  std::chrono::seconds register_timeout{60};
  std::chrono::milliseconds register_pause{0};  // tests: a slow registration, node after node
};

// What the fake nodes saw of one benchmark request (by its marker id).
struct FakeRequestTimes {
  int64_t prefill_ns = 0;                   // steady_clock at the Prefill call, 0: none seen
  std::vector<int64_t> token_sent_ns;       // steady_clock when token i left the node
};

class FakeNodes {
 public:
  static Result<std::unique_ptr<FakeNodes>> start(const FakeNodesOptions& options);
  ~FakeNodes();
  FakeNodes(const FakeNodes&) = delete;
  FakeNodes& operator=(const FakeNodes&) = delete;

  // The times seen for marker ids [0, n) (moved out; call once the requests are over).
  std::vector<FakeRequestTimes> take_times(size_t n);
  // Calls answered, by kind; load reports sent.
  struct Counts {
    int64_t prepare = 0, prefill = 0, decode = 0, tokens = 0, reports = 0;
  };
  Counts counts() const;

  class Impl;

 private:
  explicit FakeNodes(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The marker `bench control` puts at the start of request `id`'s prompt.
std::string fake_request_marker(int64_t id);

}  // namespace dualpath::bench
