// One node process (dp_engine_node) against a scheduler played by the test over the real
// protocol: malformed wire data gets an error reply and the node lives on; a prepared DE buffer
// nobody decodes is freed by its TTL; a registration nobody answers is a clear error in time.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "common/subprocess.h"
#include "engine/control_channel.h"
#include "engine/node_protocol.h"
#include "engine/node_runtime.h"
#include "engine/wire.h"
#include "store/temp_dir.h"
#include "transport/oob_channel.h"

namespace dualpath::engine {
namespace {

using namespace std::chrono_literals;

class FakeScheduler {
 public:
  // Starts a decode node and registers it with a setup of `buffer_ttl`.
  explicit FakeScheduler(Duration buffer_ttl = 0s) {
    auto l = transport::OobListener::listen("127.0.0.1");
    EXPECT_TRUE(l.is_ok());
    listener_ = std::move(l).value();
    SpawnOptions o;
    o.argv = {DP_ENGINE_NODE_PATH,
              "--scheduler",
              "127.0.0.1:" + std::to_string(listener_->port()),
              "--role",
              "decode",
              "--connect-timeout",
              "20"};
    o.die_with_parent = true;
    auto p = Subprocess::spawn(o);
    EXPECT_TRUE(p.is_ok());
    node_ = std::move(p).value();
    auto ch = listener_->accept(30s);
    EXPECT_TRUE(ch.is_ok()) << ch.status().to_string();
    if (!ch.is_ok()) return;
    channel_ = std::move(ch).value();
    auto reg = receive_json(*channel_, 10s);
    EXPECT_TRUE(reg.is_ok());
    auto parsed = RegisterRequest::from_json(*reg);
    EXPECT_TRUE(parsed.is_ok()) << parsed.status().to_string();
    NodeSetup setup;
    setup.role = NodeRole::kDecode;
    setup.index = 0;
    setup.backend.compute = "cpu";
    setup.backend.model = "tiny";
    setup.data_paths = {dir_.path()};
    setup.dram_buffer_bytes = 16u << 20;
    setup.hbm_bytes = 16u << 20;
    setup.report_interval = 20ms;
    setup.buffer_ttl = buffer_ttl;
    setup.timeout = 5s;
    EXPECT_TRUE(
        send_json(*channel_, Json{{"type", "setup"}, {"index", 0}, {"setup", setup.to_json()}}, 10s)
            .is_ok());
    auto hello = receive_json(*channel_, 60s);
    EXPECT_TRUE(hello.is_ok()) << hello.status().to_string();
  }
  ~FakeScheduler() {
    if (channel_) (void)send_json(*channel_, Json{{"type", "quit"}}, 1s);
    (void)node_.wait_for(10s);
  }

  // Sends raw bytes as one framed message.
  void send_raw(std::string_view text) {
    ASSERT_TRUE(channel_->send(std::as_bytes(std::span(text.data(), text.size())), 5s).is_ok());
  }
  // The next message of `type` (reports are skipped unless asked for).
  // Fails (instead of looping on reports forever) if it does not come within 30 s.
  Json next(const std::string& type) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto m = receive_json(*channel_, 10s);
      EXPECT_TRUE(m.is_ok()) << m.status().to_string();
      if (!m.is_ok()) return Json::object();
      WireReader r(*m, "message");
      if (r.str_or("type", "") == type) return *m;
    }
    ADD_FAILURE() << "no '" << type << "' message from the node within 30 s";
    return Json::object();
  }
  bool alive() { return node_.running(); }

 private:
  store::TempDir dir_;
  std::unique_ptr<transport::OobListener> listener_;
  std::unique_ptr<transport::OobChannel> channel_;
  Subprocess node_;
};

TEST(Node, MalformedCallsGetErrorRepliesAndTheNodeLivesOn) {
  FakeScheduler s;
  const std::pair<const char*, const char*> calls[] = {
      {R"({"type": "call", "call_id": 1, "cmd": 42})", "field 'cmd' must be a string"},
      {R"({"type": "call", "call_id": 2, "cmd": "prepare", "request_id": "x"})", "request_id"},
      {R"({"type": "call", "call_id": 3, "cmd": "prepare", "request_id": 1, "tokens": [1, 2],
          "hit_tokens": 0, "gen_tokens": -5})",
       "gen_tokens"},
      {R"({"type": "call", "call_id": 4, "cmd": "decode", "request_id": 9, "first_token": 1})",
       "not prepared"},
      {R"({"type": "call", "call_id": 5, "cmd": "prefill"})", "misdirected"},
      {R"({"type": "call", "call_id": 6, "cmd": "peers", "peers": [{"role": "prefill"}]})",
       "index"},
      {R"({"type": "call", "call_id": 7, "cmd": "prepare", "request_id": 1, "tokens": [999999],
          "hit_tokens": 0, "gen_tokens": 4})",
       "vocabulary"},
  };
  for (auto [text, want] : calls) {
    s.send_raw(text);
    Json reply = s.next("reply");
    WireReader r(reply, "reply");
    EXPECT_FALSE(r.boolean_or("ok", true)) << text;
    EXPECT_NE(r.str_or("error", "").find(want), std::string::npos) << r.str_or("error", "");
  }
  // Not JSON at all: dropped with a warning; the node answers the next call.
  s.send_raw("this is not json {{{");
  s.send_raw(R"({"type": "call", "call_id": 8, "cmd": "status"})");
  Json status = s.next("reply");
  EXPECT_TRUE(WireReader(status, "reply").boolean_or("ok", false));
  EXPECT_TRUE(s.alive());
}

TEST(Node, APreparedBufferNobodyDecodesIsFreedByItsTtl) {
  FakeScheduler s(/*buffer_ttl=*/300ms);
  PrepareRequest p;
  p.request_id = 77;
  for (int i = 0; i < 200; ++i) p.tokens.push_back(i);
  p.gen_tokens = 16;
  Json msg = p.to_json();
  msg["type"] = "call";
  msg["call_id"] = 1;
  msg["cmd"] = "prepare";
  s.send_raw(msg.dump());
  Json reply = s.next("reply");
  ASSERT_TRUE(WireReader(reply, "reply").boolean_or("ok", false)) << reply.dump();
  auto used = [&] {
    auto r = LoadReport::from_json(s.next("report"));
    EXPECT_TRUE(r.is_ok());
    return r.is_ok() ? r->dram_used_bytes : 0;
  };
  EXPECT_GT(used(), 0u);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  uint64_t now_used = 1;
  while (now_used > 0 && std::chrono::steady_clock::now() < deadline) now_used = used();
  EXPECT_EQ(now_used, 0u) << "the DE buffer of a request never decoded was not freed";
}

TEST(Node, ASchedulerThatAcceptsButNeverAnswersIsAClearErrorInTime) {
  auto l = transport::OobListener::listen("127.0.0.1");
  ASSERT_TRUE(l.is_ok());
  store::TempDir dir;
  SpawnOptions o;
  o.argv = {DP_ENGINE_NODE_PATH,
            "--scheduler",
            "127.0.0.1:" + std::to_string((*l)->port()),
            "--role",
            "prefill",
            "--connect-timeout",
            "1"};
  o.stderr_path = dir.path() + "/stderr";
  auto p = Subprocess::spawn(o);
  ASSERT_TRUE(p.is_ok());
  auto ch = (*l)->accept(10s);  // accepted, and never answered
  ASSERT_TRUE(ch.is_ok());
  auto status = p->wait_for(20s);
  ASSERT_TRUE(status.is_ok()) << "the node did not give up";
  EXPECT_EQ(WEXITSTATUS(*status), 1);
  std::ifstream f(o.stderr_path);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_NE(ss.str().find("did not answer the registration"), std::string::npos) << ss.str();
}

}  // namespace
}  // namespace dualpath::engine
