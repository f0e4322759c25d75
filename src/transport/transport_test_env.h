#pragma once
// Shared set-up of the transport tests: a Context + Worker on a given UCX transport, and the
// peer helper process (dp_transport_peer, built beside the tests).

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "transport/context.h"
#include "transport/peer_process.h"
#include "transport/worker.h"

namespace dualpath::transport {

// One UCX transport to run a suite over: name for the test, UCX_TLS and UCX_NET_DEVICES.
struct TransportParam {
  std::string name;
  std::string transports;
  std::string net_devices;
};

inline const TransportParam kSharedMemory{"sm", "sm,self", ""};
inline const TransportParam kTcpLoopback{"tcp", "tcp,self", "lo"};

inline std::string transport_param_name(const testing::TestParamInfo<TransportParam>& info) {
  return info.param.name;
}

// Every wait in the tests uses this deadline; operations get shorter ones so that a failure
// shows up as a clear error, not as a test timeout.
inline constexpr auto kTestWait = std::chrono::seconds(20);

class TransportTest : public testing::TestWithParam<TransportParam> {
 protected:
  void SetUp() override {
    ContextOptions co;
    co.transports = GetParam().transports;
    co.net_devices = GetParam().net_devices;
    auto context = Context::create(co);
    ASSERT_TRUE(context.is_ok()) << context.status().to_string();
    context_ = std::move(context).value();
    auto worker = Worker::create(*context_, WorkerOptions{"test", std::chrono::seconds(5)});
    ASSERT_TRUE(worker.is_ok()) << worker.status().to_string();
    worker_ = std::move(worker).value();
  }

  void TearDown() override {
    peers_.clear();
    worker_.reset();
    context_.reset();
  }

  // With `kv_worker`, the peer's KV lane is connected on that worker too.
  PeerProcess& spawn_peer(const std::string& name,
                          uint64_t region_bytes = 8u << 20,
                          Worker* kv_worker = nullptr) {
    PeerOptions po;
    po.transports = GetParam().transports;
    po.net_devices = GetParam().net_devices;
    po.region_bytes = region_bytes;
    po.name = name;
    auto peer = PeerProcess::spawn(*worker_, DP_TRANSPORT_PEER_EXE, {}, po, kTestWait, kv_worker);
    EXPECT_TRUE(peer.is_ok()) << peer.status().to_string();
    if (!peer.is_ok()) throw std::runtime_error("peer spawn failed");
    peers_.push_back(std::move(peer).value());
    return *peers_.back();
  }

  std::unique_ptr<Context> context_;
  std::unique_ptr<Worker> worker_;
  std::vector<std::unique_ptr<PeerProcess>> peers_;
};

}  // namespace dualpath::transport
