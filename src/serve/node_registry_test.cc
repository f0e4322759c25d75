// NodeRegistry with node services on loopback and a ManualClock: registrations and refusals,
// peers connected both ways whatever the order nodes join in, a lease that runs out on the clock
// (and only then), and a dead node's calls in flight failing at that moment.
#include "serve/node_registry.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <thread>

#include "control/rpc.h"

namespace dualpath::serve {
namespace {

using namespace std::chrono_literals;
namespace pb = ::dualpath::control::v1;

// A node's control service: counts the peers it is given; Prepare waits until cancelled.
class FakeNode final : public pb::Node::Service {
 public:
  FakeNode() {
    grpc::ServerBuilder b;
    control::configure_server(b, "127.0.0.1:0", {}, {}, control::kNodeMaxMessageBytes, 16, &port_);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~FakeNode() override { server_->Shutdown(std::chrono::system_clock::now() + 1s); }
  grpc::Status Peers(grpc::ServerContext*, const pb::PeersRequest* r, pb::Ack*) override {
    peers_.fetch_add(r->peers_size(), std::memory_order_acq_rel);
    return grpc::Status::OK;
  }
  grpc::Status Prepare(grpc::ServerContext* ctx, const pb::PrepareRequest*,
                       pb::PrepareReply*) override {
    entered_.store(true, std::memory_order_release);
    while (!ctx->IsCancelled()) std::this_thread::sleep_for(1ms);
    return grpc::Status::CANCELLED;
  }
  std::string address() const { return fmt::format("127.0.0.1:{}", port_); }
  std::atomic<int> peers_{0};
  std::atomic<bool> entered_{false};

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

engine::NodeHello hello_of(engine::NodeRole role, int index) {
  engine::NodeHello h;
  h.role = role;
  h.index = index;
  h.address = {std::byte{1}};
  h.dram = {std::byte{2}};
  h.hbm = {{std::byte{3}}};
  return h;
}

pb::RegisterRequest reg(engine::NodeRole role, int index, const std::string& address,
                        int64_t pid) {
  pb::RegisterRequest r;
  r.set_role(control::to_proto(role));
  r.set_index(index);
  r.set_protocol(control::kProtocolVersion);
  r.set_host("h");
  r.set_pid(pid);
  r.set_control_address(address);
  return r;
}

struct Fixture {
  Fixture() {
    RegistryOptions o;
    o.prefill_nodes = 1;
    o.decode_nodes = 1;
    o.lease_ttl = 1s;
    o.join_timeout = 10s;
    RegistryListener l;
    l.on_alive = [this](int node, bool alive) {
      if (!alive) told_dead[static_cast<size_t>(node)].store(true, std::memory_order_release);
    };
    l.on_dead = [this](int node, const Status& why, const std::string&) {
      MutexLock lock(mu);
      dead.emplace_back(node, why.message());
    };
    registry = std::make_unique<NodeRegistry>(
        o,
        [this](const std::string& a, const std::string& n, const std::string& s) {
          return std::make_shared<control::NodeClient>(
              control::make_channel(a, {}, {}, control::kNodeMaxMessageBytes), n, s, clock);
        },
        l, clock);
  }
  ManualClock clock;
  FakeNode pe, de;
  Mutex mu;
  std::vector<std::pair<int, std::string>> dead;
  std::array<std::atomic<bool>, 2> told_dead{};  // on_alive(node, false) came
  std::unique_ptr<NodeRegistry> registry;
};

TEST(NodeRegistry, NodesJoiningInEitherOrderAreConnectedBothWays) {
  Fixture f;
  auto p = f.registry->reserve(reg(engine::NodeRole::kPrefill, -1, f.pe.address(), 10));
  auto d = f.registry->reserve(reg(engine::NodeRole::kDecode, -1, f.de.address(), 11));
  ASSERT_TRUE(p.is_ok() && d.is_ok()) << p.status().to_string() << d.status().to_string();
  EXPECT_EQ(p->node, 0);
  EXPECT_EQ(d->node, 1);
  // Both join at once.
  Status ps, ds;
  std::thread a([&] { ps = f.registry->join(p->session, hello_of(engine::NodeRole::kPrefill, 0)).status(); });
  std::thread b([&] { ds = f.registry->join(d->session, hello_of(engine::NodeRole::kDecode, 0)).status(); });
  a.join();
  b.join();
  ASSERT_TRUE(ps.is_ok() && ds.is_ok()) << ps.to_string() << ds.to_string();
  EXPECT_TRUE(f.registry->all_alive());
  // Each was given the other's hello (once, whichever joined first).
  EXPECT_GE(f.pe.peers_.load(), 1);
  EXPECT_GE(f.de.peers_.load(), 1);
}

TEST(NodeRegistry, RefusalsNameTheProblemAndTheSameProcessMayRegisterAgain) {
  Fixture f;
  auto p = f.registry->reserve(reg(engine::NodeRole::kPrefill, 0, f.pe.address(), 10));
  ASSERT_TRUE(p.is_ok());
  auto dup = f.registry->reserve(reg(engine::NodeRole::kPrefill, 0, f.pe.address(), 99));
  ASSERT_FALSE(dup.is_ok());
  EXPECT_TRUE(dup.status().is_already_exists());
  EXPECT_NE(dup.status().message().find("duplicate node index"), std::string::npos);
  auto beyond = f.registry->reserve(reg(engine::NodeRole::kDecode, 4, f.de.address(), 12));
  ASSERT_FALSE(beyond.is_ok());
  EXPECT_NE(beyond.status().message().find("cluster.decode_nodes"), std::string::npos);
  auto old = reg(engine::NodeRole::kDecode, 0, f.de.address(), 13);
  old.set_protocol(1);
  EXPECT_TRUE(f.registry->reserve(old).status().is_failed_precondition());
  // The same process again (its session broke and it noticed first): it takes its slot back.
  auto again = f.registry->reserve(reg(engine::NodeRole::kPrefill, 0, f.pe.address(), 10));
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_NE(again->session, p->session);
  EXPECT_EQ(f.registry->node_of_session(p->session), -1);
  // A hello for another slot than the session's is refused.
  auto wrong = f.registry->join(again->session, hello_of(engine::NodeRole::kDecode, 0));
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("this session registered prefill node 0"),
            std::string::npos);
}

TEST(NodeRegistry, ALeaseRunsOutOnTheClockAndTheDeadNodesCallsFailAtOnce) {
  Fixture f;
  auto p = f.registry->reserve(reg(engine::NodeRole::kPrefill, 0, f.pe.address(), 10));
  auto d = f.registry->reserve(reg(engine::NodeRole::kDecode, 0, f.de.address(), 11));
  ASSERT_TRUE(f.registry->join(p->session, hello_of(engine::NodeRole::kPrefill, 0)).is_ok());
  ASSERT_TRUE(f.registry->join(d->session, hello_of(engine::NodeRole::kDecode, 0)).is_ok());
  // A call in flight to the decode node, with a deadline far away.
  Status in_flight;
  bool placer_knew = false;  // when the call failed, the owner had been told the node is dead
  std::thread caller([&] {
    in_flight = f.registry->client(1)->prepare(pb::PrepareRequest(), 300s).status();
    placer_knew = f.told_dead[1].load(std::memory_order_acquire);
  });
  while (!f.de.entered_.load(std::memory_order_acquire)) std::this_thread::sleep_for(1ms);
  f.clock.advance(600ms);
  ASSERT_TRUE(f.registry->report(p->session, {}));  // the prefill node reports; the decode not
  EXPECT_TRUE(f.registry->expire().empty()) << "no lease has run out yet";
  f.clock.advance(500ms);  // the decode node: 1.1 s silent; the prefill node: 0.5 s
  const std::vector<int> dead = f.registry->expire();
  ASSERT_EQ(dead, std::vector<int>{1});
  caller.join();
  EXPECT_TRUE(in_flight.is_unavailable()) << in_flight.to_string();
  EXPECT_NE(in_flight.message().find("no load report for 1.0 s"), std::string::npos)
      << in_flight.message();
  // Its failed calls retry at once: the placer must already know (else they go back to it).
  EXPECT_TRUE(placer_knew);
  EXPECT_FALSE(f.told_dead[0].load());
  EXPECT_FALSE(f.registry->alive(1));
  EXPECT_TRUE(f.registry->alive(0));
  EXPECT_EQ(f.registry->client(1), nullptr);
  MutexLock lock(f.mu);
  ASSERT_EQ(f.dead.size(), 1u);
  EXPECT_EQ(f.dead[0].first, 1);
  // A late report of the dead registration renews nothing.
  EXPECT_FALSE(f.registry->report(d->session, {}));
}

TEST(NodeRegistry, ASlotWhoseNodeNeverJoinsIsFreedAfterTheJoinTimeout) {
  Fixture f;
  auto d = f.registry->reserve(reg(engine::NodeRole::kDecode, 0, f.de.address(), 11));
  ASSERT_TRUE(d.is_ok());
  EXPECT_TRUE(f.registry->reserve(reg(engine::NodeRole::kDecode, 0, f.de.address(), 12))
                  .status()
                  .is_already_exists());
  f.clock.advance(11s);
  (void)f.registry->expire();
  auto other = f.registry->reserve(reg(engine::NodeRole::kDecode, 0, f.de.address(), 12));
  EXPECT_TRUE(other.is_ok()) << other.status().to_string();
}

}  // namespace
}  // namespace dualpath::serve
