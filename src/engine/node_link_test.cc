// NodeLink's call deadlines against a node played by a thread over a real socket: a plain call
// is bounded by its timeout, a call with progress by the time since its last progress, so a
// long decode that keeps streaming is not cut off and one that stops streaming still is.
#include "engine/node_link.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/wire.h"

namespace dualpath::engine {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A node that answers one call after `events` token events, `gap` apart, and then `silence`.
struct SlowNode {
  std::unique_ptr<transport::OobListener> listener;
  std::unique_ptr<transport::OobChannel> node_side;
  std::thread thread;

  void serve(int events, Duration gap, Duration silence = Duration(0)) {
    thread = std::thread([this, events, gap, silence] {
      auto call = receive_json(*node_side, 30s);
      ASSERT_TRUE(call.is_ok()) << call.status().to_string();
      for (int i = 0; i < events; ++i) {
        std::this_thread::sleep_for(gap);
        (void)send_json(*node_side, Json{{"type", "event"}, {"seq", i}}, 5s);
      }
      std::this_thread::sleep_for(silence);
      Json reply = ok_reply(Json{{"events", events}});
      reply["call_id"] = WireReader(*call, "call").u64_or("call_id", 0);
      (void)send_json(*node_side, reply, 5s);
    });
  }
  void join() {
    if (thread.joinable()) thread.join();
  }
  ~SlowNode() { join(); }
};

struct Pair {
  SlowNode node;
  std::unique_ptr<NodeLink> link;
  std::atomic<Clock::rep> last_event{0};
};

std::unique_ptr<Pair> connect_pair() {
  auto p = std::make_unique<Pair>();
  auto listener = transport::OobListener::listen("127.0.0.1");
  EXPECT_TRUE(listener.is_ok());
  auto client = transport::OobChannel::connect("127.0.0.1", (*listener)->port(), 5s);
  EXPECT_TRUE(client.is_ok());
  auto server = (*listener)->accept(5s);
  EXPECT_TRUE(server.is_ok());
  p->node.listener = std::move(listener).value();
  p->node.node_side = std::move(server).value();
  Pair* raw = p.get();
  p->link = std::make_unique<NodeLink>(std::move(client).value(), "decode node 0", [raw](const Json&) {
    raw->last_event.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  });
  return p;
}

// The node streams for 8 × 150 ms = 1.2 s, longer than the 500 ms timeout, but never goes
// 500 ms without an event.
constexpr int kEvents = 8;
constexpr Duration kGap = 150ms;
constexpr Duration kTimeout = 500ms;

TEST(NodeLink, APlainCallTimesOutWhileTheNodeIsStillStreaming) {
  auto p = connect_pair();
  p->node.serve(kEvents, kGap);
  auto r = p->link->call(Json{{"cmd", "decode"}}, kTimeout);
  ASSERT_FALSE(r.is_ok());
  EXPECT_TRUE(r.status().is_timed_out()) << r.status().to_string();
  EXPECT_NE(r.status().message().find("no reply to 'decode'"), std::string::npos);
  p->node.join();
}

TEST(NodeLink, ACallWithProgressWaitsAsLongAsTheNodeStreams) {
  auto p = connect_pair();
  p->node.serve(kEvents, kGap);
  Pair* raw = p.get();
  auto r = p->link->call(Json{{"cmd", "decode"}}, kTimeout, [raw] {
    return Clock::time_point(Clock::duration(raw->last_event.load(std::memory_order_relaxed)));
  });
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)["events"], kEvents);
}

TEST(NodeLink, ACallWithProgressStillTimesOutWhenTheNodeStopsStreaming) {
  auto p = connect_pair();
  // One event, then silence for 3 s: the call gives up 500 ms after that event.
  p->node.serve(1, 0ms, 3s);
  Pair* raw = p.get();
  auto r = p->link->call(Json{{"cmd", "decode"}}, kTimeout, [raw] {
    return Clock::time_point(Clock::duration(raw->last_event.load(std::memory_order_relaxed)));
  });
  p->node.join();  // the late reply goes to a live link, and is dropped as late
  ASSERT_FALSE(r.is_ok());
  EXPECT_TRUE(r.status().is_timed_out()) << r.status().to_string();
  EXPECT_NE(r.status().message().find("nor progress"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace dualpath::engine
