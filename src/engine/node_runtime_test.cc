// NodeRuntime's peer table, with two runtimes (a prefill node and a decode node) in this process,
// each with its own UCX context and worker, connected as the scheduler connects them.
#include "engine/node_runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "engine/test_node_setup.h"
#include "store/temp_dir.h"

namespace dualpath::engine {
namespace {

using namespace std::chrono_literals;

constexpr uint16_t kStuckAm = 40;  // the message that passes its deadline
constexpr uint16_t kProbeAm = 41;  // a message over the new connection

TEST(NodeRuntime, APeerWhoseConnectionFailedIsConnectedAgainOnItsNextUse) {
  // A connection can fail while both nodes live on: an operation passes its deadline (the peer
  // was paused, or its progress thread busy) and the endpoint is closed, or the peer reset its
  // end when it rejoined. The CI run of stop 44 lost four attempts of one turn in a row to such
  // an endpoint: the table kept handing it out until the peer registered again.
  store::TempDir pdir, ddir;
  // Declared before the runtimes: the decode node's handlers and a late rendezvous use them.
  std::atomic<int> probes{0};
  std::vector<std::byte> payload(4u << 20, std::byte{7});
  auto pe = NodeRuntime::create(test_node_setup(NodeRole::kPrefill, pdir.path(), 8u << 20));
  ASSERT_TRUE(pe.is_ok()) << pe.status().to_string();
  auto de = NodeRuntime::create(test_node_setup(NodeRole::kDecode, ddir.path(), 8u << 20));
  ASSERT_TRUE(de.is_ok()) << de.status().to_string();
  NodeHello de_hello = (*de)->hello();
  de_hello.epoch = 1;
  ASSERT_TRUE((*pe)->connect_peers(std::span(&de_hello, 1)).is_ok());
  ASSERT_TRUE((*de)->worker().set_am_handler(kStuckAm, [](const transport::AmMessage&) {}).is_ok());
  ASSERT_TRUE(
      (*de)
          ->worker()
          .set_am_handler(kProbeAm, [&](const transport::AmMessage&) { probes.fetch_add(1); })
          .is_ok());

  auto first = (*pe)->peer(NodeRole::kDecode, 0);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  ASSERT_TRUE((*first)->endpoint->health().is_ok());
  // The decode node's progress thread is held: a 4 MiB message to it cannot complete, passes its
  // deadline, and the prefill node's endpoint to it is failed.
  std::promise<void> release, entered;
  std::shared_future<void> released = release.get_future().share();
  (*de)->worker().post([released, &entered] {
    entered.set_value();
    released.wait_for(30s);
  });
  entered.get_future().wait();
  auto stuck = (*pe)->worker().send_am(*(*first)->endpoint, kStuckAm, {}, payload,
                                       transport::OpOptions{300ms, {}});
  ASSERT_TRUE(stuck.is_ok()) << stuck.status().to_string();
  Status timed_out = stuck->wait_for(20s);
  release.set_value();
  ASSERT_FALSE(timed_out.is_ok());
  EXPECT_FALSE((*first)->endpoint->health().is_ok());

  // Both nodes are fine now, and nobody registered again: the next use connects anew.
  auto again = (*pe)->peer(NodeRole::kDecode, 0);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_NE(again->get(), first->get());
  EXPECT_TRUE((*again)->endpoint->health().is_ok());
  EXPECT_EQ((*again)->hello.epoch, 1u);
  EXPECT_EQ((*again)->hbm.size(), de_hello.hbm.size());
  const int before = probes.load();
  std::vector<std::byte> small(64, std::byte{1});
  auto sent = (*pe)->worker().send_am(*(*again)->endpoint, kProbeAm, {}, small);
  ASSERT_TRUE(sent.is_ok()) << sent.status().to_string();
  EXPECT_TRUE(sent->wait_for(20s).is_ok());
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (probes.load() == before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_GT(probes.load(), before) << "the message over the new connection did not arrive";
  // The table holds the new connection: a later use gets it, not a third one.
  auto later = (*pe)->peer(NodeRole::kDecode, 0);
  ASSERT_TRUE(later.is_ok());
  EXPECT_EQ(later->get(), again->get());
  // A hello at the same address and epoch keeps a healthy connection.
  ASSERT_TRUE((*pe)->connect_peers(std::span(&de_hello, 1)).is_ok());
  EXPECT_EQ((*pe)->peer(NodeRole::kDecode, 0)->get(), again->get());
}

}  // namespace
}  // namespace dualpath::engine
