// Real UCX between real processes: the test process and dp_transport_peer, over shared memory
// and over TCP loopback.

#include "transport/worker.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <numeric>

#include "transport/transport_test_env.h"
#include "transport/wire_format.h"

namespace dualpath::transport {
namespace {

using std::chrono::seconds;

std::vector<std::byte> pattern(size_t n, uint8_t seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return v;
}

// Waits for active-message replies with a deadline.
class ReplyCounter {
 public:
  void on_reply() {
    std::lock_guard lock(mu_);
    ++count_;
    cv_.notify_all();
  }
  bool wait_for_count(int n, std::chrono::seconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return count_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
};

using WorkerTest = TransportTest;

TEST_P(WorkerTest, PutBatchLandsInThePeersRegion) {
  PeerProcess& peer = spawn_peer("target", 1u << 20);
  auto source = pattern(1u << 20, 7);
  auto mr = worker_->register_memory(source);
  ASSERT_TRUE(mr.is_ok()) << mr.status().to_string();
  // Sixteen 64 KiB pieces in one doorbell batch, written in reverse order of offsets.
  std::vector<RmaRequest> reqs;
  for (int i = 15; i >= 0; --i) {
    size_t off = static_cast<size_t>(i) * 65536;
    reqs.push_back({std::span(source).subspan(off, 65536), &peer.region(), off});
  }
  auto op = worker_->put(peer.endpoint(), reqs);
  ASSERT_TRUE(op.is_ok()) << op.status().to_string();
  ASSERT_TRUE(op->wait_for(kTestWait).is_ok()) << op->status().to_string();
  auto sum = peer.region_checksum(kTestWait);
  ASSERT_TRUE(sum.is_ok()) << sum.status().to_string();
  EXPECT_EQ(*sum, fnv1a64(source));
}

TEST_P(WorkerTest, GetReadsThePeersRegion) {
  PeerProcess& peer = spawn_peer("source", 1u << 20);
  ASSERT_TRUE(peer.fill_region(0x5a, kTestWait).is_ok());
  std::vector<std::byte> dest(256 * 1024);
  auto mr = worker_->register_memory(dest);
  ASSERT_TRUE(mr.is_ok());
  RmaRequest req{dest, &peer.region(), 4096};
  auto op = worker_->get(peer.endpoint(), std::span(&req, 1));
  ASSERT_TRUE(op.is_ok()) << op.status().to_string();
  ASSERT_TRUE(op->wait_for(kTestWait).is_ok()) << op->status().to_string();
  for (std::byte b : dest) ASSERT_EQ(b, std::byte{0x5a});
}

TEST_P(WorkerTest, ActiveMessagesSmallAndRendezvousAreDeliveredInOrder) {
  PeerProcess& peer = spawn_peer("echo");
  std::mutex mu;
  std::vector<uint32_t> seen;
  ReplyCounter replies;
  ASSERT_TRUE(worker_
                  ->set_am_handler(kEchoReplyAm,
                                   [&](const AmMessage& m) {
                                     uint32_t seq = 0;
                                     std::memcpy(&seq, m.header.data(), sizeof seq);
                                     {
                                       std::lock_guard lock(mu);
                                       seen.push_back(seq);
                                     }
                                     replies.on_reply();
                                   })
                  .is_ok());
  // Echo of a small message, then a 4 MiB message (rendezvous) that asks for an ack.
  uint32_t seq = 1;
  std::vector<std::byte> header(sizeof seq);
  std::memcpy(header.data(), &seq, sizeof seq);
  auto echo = worker_->send_am(peer.endpoint(), kEchoAm, header, {});
  ASSERT_TRUE(echo.is_ok()) << echo.status().to_string();
  auto big = pattern(4u << 20, 3);
  std::vector<std::byte> sink_header{std::byte{1}, std::byte{0}, std::byte{0}, std::byte{0}};
  sink_header[1] = std::byte{2};  // seq 2 << 8 when read as u32 little-endian
  auto sink = worker_->send_am(peer.endpoint(), kSinkAm, sink_header, big);
  ASSERT_TRUE(sink.is_ok()) << sink.status().to_string();
  ASSERT_TRUE(echo->wait_for(kTestWait).is_ok()) << echo->status().to_string();
  ASSERT_TRUE(sink->wait_for(kTestWait).is_ok()) << sink->status().to_string();
  ASSERT_TRUE(replies.wait_for_count(2, kTestWait)) << "the peer did not answer both messages";
  std::lock_guard lock(mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], 1u);
  EXPECT_EQ(seen[1], 0x0201u);
}

TEST_P(WorkerTest, UnregisteredLocalBufferIsAClearError) {
  PeerProcess& peer = spawn_peer("target");
  std::vector<std::byte> unregistered(4096);
  RmaRequest req{unregistered, &peer.region(), 0};
  auto op = worker_->put(peer.endpoint(), std::span(&req, 1));
  ASSERT_FALSE(op.is_ok());
  EXPECT_TRUE(op.status().is_invalid_argument()) << op.status().to_string();
  EXPECT_NE(op.status().message().find("not inside a memory region registered"), std::string::npos)
      << op.status().to_string();
}

TEST_P(WorkerTest, RemoteOffsetOutsideTheRegionIsOutOfRange) {
  PeerProcess& peer = spawn_peer("target", 1u << 20);
  std::vector<std::byte> local(8192);
  auto mr = worker_->register_memory(local);
  ASSERT_TRUE(mr.is_ok());
  RmaRequest past_end{local, &peer.region(), (1u << 20) - 4096};
  auto op = worker_->put(peer.endpoint(), std::span(&past_end, 1));
  ASSERT_FALSE(op.is_ok());
  EXPECT_EQ(op.status().code(), StatusCode::kOutOfRange) << op.status().to_string();
  RmaRequest huge_offset{local, &peer.region(), ~uint64_t{0} - 10};
  auto op2 = worker_->get(peer.endpoint(), std::span(&huge_offset, 1));
  ASSERT_FALSE(op2.is_ok());
  EXPECT_EQ(op2.status().code(), StatusCode::kOutOfRange) << op2.status().to_string();
}

TEST_P(WorkerTest, WrongRemoteKeysAreRejectedBeforeReachingUcx) {
  PeerProcess& a = spawn_peer("a");
  PeerProcess& b = spawn_peer("b");
  // A region descriptor of our own worker imported through the endpoint to peer a.
  std::vector<std::byte> mine(4096);
  auto mr = worker_->register_memory(mine);
  ASSERT_TRUE(mr.is_ok());
  auto foreign = worker_->import_region(a.endpoint(), (*mr)->descriptor());
  ASSERT_FALSE(foreign.is_ok());
  EXPECT_TRUE(foreign.status().is_invalid_argument()) << foreign.status().to_string();
  // A corrupted descriptor.
  auto corrupted = (*mr)->descriptor();
  corrupted[corrupted.size() / 2] ^= std::byte{0xff};
  auto bad = worker_->import_region(a.endpoint(), corrupted);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_TRUE(bad.status().is_invalid_argument()) << bad.status().to_string();
  // Peer a's region used through the endpoint to peer b.
  RmaRequest req{mine, &a.region(), 0};
  auto op = worker_->put(b.endpoint(), std::span(&req, 1));
  ASSERT_FALSE(op.is_ok());
  EXPECT_TRUE(op.status().is_invalid_argument()) << op.status().to_string();
  // Garbage instead of a worker address.
  auto ep = worker_->connect(std::vector<std::byte>(64, std::byte{1}));
  ASSERT_FALSE(ep.is_ok());
  EXPECT_TRUE(ep.status().is_invalid_argument()) << ep.status().to_string();
}

// Issue 4 acceptance (and issue 19's transport faults): kill a peer mid-put, mid-get and mid-AM;
// every pending operation completes, with an error where it needed the peer, within the
// configured timeout; no hang, no crash. (A get over shared memory may finish without the
// peer's help: CMA reads a stopped process's memory.)
TEST_P(WorkerTest, KillingThePeerMidTransferFailsEveryPendingOperation) {
  PeerProcess& peer = spawn_peer("victim", 16u << 20);
  auto source = pattern(16u << 20, 1);
  auto mr = worker_->register_memory(source);
  ASSERT_TRUE(mr.is_ok());
  std::vector<std::byte> sink(16u << 20);
  auto sink_mr = worker_->register_memory(sink);
  ASSERT_TRUE(sink_mr.is_ok());
  const auto op_timeout = seconds(3);
  // Stop the peer so that nothing that needs it can finish, then queue work, then kill it.
  ASSERT_TRUE(peer.stop().is_ok());
  std::vector<Operation> ops;
  for (int i = 0; i < 4; ++i) {
    // Rendezvous active messages: they need the peer's progress to complete.
    auto am = worker_->send_am(peer.endpoint(), kSinkAm, {},
                               std::span(source).subspan(static_cast<size_t>(i) << 22, 4u << 20),
                               OpOptions{op_timeout, {}});
    ASSERT_TRUE(am.is_ok()) << am.status().to_string();
    ops.push_back(std::move(am).value());
    RmaRequest req{std::span(source).subspan(static_cast<size_t>(i) << 22, 4u << 20),
                   &peer.region(), static_cast<uint64_t>(i) << 22};
    auto put = worker_->put(peer.endpoint(), std::span(&req, 1), OpOptions{op_timeout, {}});
    ASSERT_TRUE(put.is_ok()) << put.status().to_string();
    ops.push_back(std::move(put).value());
    RmaRequest get_req{std::span(sink).subspan(static_cast<size_t>(i) << 22, 4u << 20),
                       &peer.region(), static_cast<uint64_t>(i) << 22};
    auto get = worker_->get(peer.endpoint(), std::span(&get_req, 1), OpOptions{op_timeout, {}});
    ASSERT_TRUE(get.is_ok()) << get.status().to_string();
    ops.push_back(std::move(get).value());
  }
  ASSERT_FALSE(ops[0].done()) << "a rendezvous message completed while its target was stopped";
  auto killed_at = std::chrono::steady_clock::now();
  peer.kill_now();
  int failed = 0;
  for (auto& op : ops) {
    Status s = op.wait_for(op_timeout + seconds(5));
    ASSERT_TRUE(op.done()) << "an operation was still pending after its timeout";
    if (!s.is_ok()) {
      ++failed;
      std::printf("  after the kill: %s\n", s.to_string().c_str());
      EXPECT_TRUE(s.is_unavailable() || s.is_timed_out() || s.code() == StatusCode::kAborted)
          << s.to_string();
    }
  }
  EXPECT_GE(failed, 4) << "the rendezvous messages to a killed peer must fail";
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, op_timeout + seconds(3));
  // The endpoint is now failed, and new work is refused at once.
  EXPECT_FALSE(peer.endpoint().health().is_ok());
  RmaRequest req{std::span(source).first(4096), &peer.region(), 0};
  auto late = worker_->put(peer.endpoint(), std::span(&req, 1));
  ASSERT_FALSE(late.is_ok());
  EXPECT_FALSE(late.status().is_ok());
}

TEST_P(WorkerTest, OperationsToAStoppedPeerTimeOutAtTheirDeadline) {
  PeerProcess& peer = spawn_peer("sleeper", 8u << 20);
  auto source = pattern(4u << 20, 2);
  ASSERT_TRUE(peer.stop().is_ok());
  auto am = worker_->send_am(peer.endpoint(), kSinkAm, {}, source,
                             OpOptions{std::chrono::milliseconds(500), {}});
  ASSERT_TRUE(am.is_ok());
  Status s = am->wait_for(kTestWait);
  EXPECT_TRUE(am->done());
  EXPECT_TRUE(s.is_timed_out() || s.is_unavailable()) << s.to_string();
  kill(peer.pid(), SIGCONT);
}

TEST_P(WorkerTest, NegativePollWhileInFlightIsRejected) {
  WorkerOptions options{"negative-poll"};
  options.poll_while_in_flight = std::chrono::microseconds(-1);
  auto worker = Worker::create(*context_, options);
  ASSERT_FALSE(worker.is_ok());
  EXPECT_TRUE(worker.status().is_invalid_argument()) << worker.status().to_string();
}

INSTANTIATE_TEST_SUITE_P(Transports,
                         WorkerTest,
                         testing::Values(kSharedMemory, kTcpLoopback),
                         transport_param_name);

}  // namespace
}  // namespace dualpath::transport
