// The control plane's RPC layer against a real gRPC server on loopback: mutual TLS admits only
// holders of the cluster credential, a Status crosses the wire exactly, a closed client fails
// its calls in flight at once, a decode that stops streaming ends at its idle deadline (on a
// ManualClock), and a prefill's read_done arrives while the prefill still runs.
#include "control/rpc.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "control/node_client.h"

namespace dualpath::control {
namespace {

using namespace std::chrono_literals;

// A node service whose calls wait until their caller cancels them (or a test releases them).
class TestNode final : public pb::Node::Service {
 public:
  grpc::Status Prepare(grpc::ServerContext* ctx, const pb::PrepareRequest*,
                       pb::PrepareReply* reply) override {
    entered_.fetch_add(1, std::memory_order_acq_rel);
    while (!ctx->IsCancelled() && !release_.load(std::memory_order_acquire)) {
      std::this_thread::sleep_for(1ms);
    }
    reply->set_dram_offset(4096);
    return grpc::Status::OK;
  }
  grpc::Status Status(grpc::ServerContext* ctx, const pb::StatusRequest*,
                      pb::LoadReport* reply) override {
    session_ok_ = false;
    for (const auto& [k, v] : ctx->client_metadata()) {
      if (std::string(k.data(), k.size()) == kSessionMetadata &&
          std::string(v.data(), v.size()) == "s1")
        session_ok_ = true;
    }
    reply->set_requests(7);
    return grpc::Status::OK;
  }
  grpc::Status Release(grpc::ServerContext*, const pb::RequestRef* r, pb::Ack*) override {
    return to_grpc(Status::io_error(fmt::format("disk gone under request {}", r->request_id())));
  }
  grpc::Status Decode(grpc::ServerContext* ctx, const pb::DecodeRequest*,
                      grpc::ServerWriter<pb::DecodeEvent>* writer) override {
    pb::DecodeEvent e;
    e.mutable_tokens()->set_start(0);
    e.mutable_tokens()->add_tokens(11);
    writer->Write(e);
    while (!ctx->IsCancelled()) std::this_thread::sleep_for(1ms);  // then it stops streaming
    return grpc::Status::CANCELLED;
  }

  // Says its read is in, then computes until the caller has heard it (or 10 s pass).
  grpc::Status Prefill(grpc::ServerContext* ctx, const pb::PrefillRequest* req,
                       grpc::ServerWriter<pb::PrefillEvent>* writer) override {
    pb::PrefillEvent e;
    e.mutable_read_done()->set_tokens(req->turn().hit_tokens());
    writer->Write(e);
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (!ctx->IsCancelled() && !release_.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(1ms);
    }
    pb::PrefillEvent done;
    done.mutable_done()->set_first_token(release_.load() ? 5 : -1);
    writer->Write(done);
    return grpc::Status::OK;
  }

  std::atomic<int> entered_{0};
  std::atomic<bool> release_{false};
  std::atomic<bool> session_ok_{false};
};

struct Server {
  TestNode service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

std::unique_ptr<Server> start(const Security& security) {
  auto s = std::make_unique<Server>();
  grpc::ServerBuilder b;
  configure_server(b, "127.0.0.1:0", security, {}, kNodeMaxMessageBytes, 16, &s->port);
  b.RegisterService(&s->service);
  s->server = b.BuildAndStart();
  return s;
}

Security tls_of(const ClusterCredential& c, const char* role) {
  Security s;
  s.tls = *mint_identity(c, role);
  return s;
}

TEST(Rpc, MutualTlsAdmitsOnlyHoldersOfTheClusterCredential) {
  auto cluster = generate_credential();
  auto other = generate_credential();
  ASSERT_TRUE(cluster.is_ok() && other.is_ok());
  auto server = start(tls_of(*cluster, "decode node 0"));
  ASSERT_NE(server->server, nullptr);
  const std::string target = fmt::format("127.0.0.1:{}", server->port);
  NodeClient member(make_channel(target, tls_of(*cluster, "scheduler"), {}, kNodeMaxMessageBytes),
                    "decode node 0", "s1");
  auto ok = member.status(5s);
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->requests(), 7);
  EXPECT_TRUE(server->service.session_ok_.load());

  NodeClient stranger(make_channel(target, tls_of(*other, "scheduler"), {}, kNodeMaxMessageBytes),
                      "decode node 0", "s1");
  auto refused = stranger.status(3s);
  EXPECT_FALSE(refused.is_ok());
  NodeClient plain(make_channel(target, Security{}, {}, kNodeMaxMessageBytes), "decode node 0",
                   "s1");
  EXPECT_FALSE(plain.status(3s).is_ok());
  server->server->Shutdown();
}

TEST(Rpc, AStatusCrossesTheWireWithItsExactCode) {
  auto server = start(Security{});
  NodeClient c(make_channel(fmt::format("127.0.0.1:{}", server->port), Security{}, {},
                            kNodeMaxMessageBytes),
               "prefill node 0", "s1");
  const Status s = c.release(42, 5s);
  EXPECT_TRUE(s.is_io_error()) << s.to_string();
  EXPECT_NE(s.message().find("disk gone under request 42"), std::string::npos);
  EXPECT_NE(s.message().find("release on prefill node 0"), std::string::npos);
  server->server->Shutdown();
}

TEST(Rpc, ClosingAClientFailsItsCallsInFlightAtOnceAndEveryLaterOne) {
  auto server = start(Security{});
  NodeClient c(make_channel(fmt::format("127.0.0.1:{}", server->port), Security{}, {},
                            kNodeMaxMessageBytes),
               "decode node 1", "s1");
  Status prepared;
  std::thread caller([&] { prepared = c.prepare(pb::PrepareRequest(), 300s).status(); });
  while (server->service.entered_.load() == 0) std::this_thread::sleep_for(1ms);
  c.close(Status::unavailable("decode node 1 is dead: no load report for 1.0 s"));
  caller.join();  // long before its 300-s deadline
  EXPECT_TRUE(prepared.is_unavailable()) << prepared.to_string();
  EXPECT_NE(prepared.message().find("no load report"), std::string::npos);
  EXPECT_TRUE(c.status(5s).status().is_unavailable());
  EXPECT_EQ(c.in_flight(), 0u);
  server->server->Shutdown();
}

TEST(Rpc, ADecodeThatStopsStreamingEndsAtItsIdleDeadlineOnTheClock) {
  auto server = start(Security{});
  ManualClock clock;
  NodeClient c(make_channel(fmt::format("127.0.0.1:{}", server->port), Security{}, {},
                            kNodeMaxMessageBytes),
               "decode node 0", "s1", clock);
  std::atomic<int> batches{0};
  Status result;
  std::thread caller([&] {
    result = c.decode(pb::DecodeRequest(), 10s, [&](const pb::TokenBatch&) {
                batches.fetch_add(1, std::memory_order_acq_rel);
              }).status();
  });
  while (batches.load() == 0) std::this_thread::sleep_for(1ms);
  clock.advance(9s);
  c.expire_idle();  // 9 s without a message: within its idle timeout
  EXPECT_EQ(c.in_flight(), 1u);
  clock.advance(2s);
  c.expire_idle();
  caller.join();
  EXPECT_TRUE(result.is_timed_out()) << result.to_string();
  EXPECT_EQ(batches.load(), 1);
  server->server->Shutdown();
}

TEST(Rpc, APrefillSaysItsReadIsInWhileItStillComputes) {
  // The scheduler's read-queue ledger gives the PE side's read back at this event (the
  // simulator's), not when the prefill's compute ends.
  auto server = start(Security{});
  NodeClient c(make_channel(fmt::format("127.0.0.1:{}", server->port), Security{}, {},
                            kNodeMaxMessageBytes),
               "prefill node 0", "s1");
  pb::PrefillRequest req;
  req.mutable_turn()->set_hit_tokens(128);
  int64_t read_tokens = -1;
  auto reply = c.prefill(req, 30s, [&](int64_t tokens) {
    read_tokens = tokens;
    server->service.release_.store(true, std::memory_order_release);  // the compute may end
  });
  ASSERT_TRUE(reply.is_ok()) << reply.status().to_string();
  EXPECT_EQ(read_tokens, 128);
  EXPECT_EQ(reply->first_token(), 5);  // the node heard back before it gave up
  server->server->Shutdown();
}

TEST(Rpc, LoopbackHostsAreRecognised) {
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.1.2.3"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host("10.0.0.1"));
}

}  // namespace
}  // namespace dualpath::control
