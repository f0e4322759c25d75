// One node process (dp_node_program) against a scheduler played by the test over the real
// protocol (gRPC, control.proto): malformed calls get error statuses and the node lives on; a
// call without the node's session is refused; a prepared DE buffer nobody decodes is freed by
// its TTL; a prepare that waits for buffer space ends when its caller cancels it; a registration
// nobody answers, and a node without the cluster's credential, are clear errors in time.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/mutex.h"
#include "common/subprocess.h"
#include "control/convert.h"
#include "control/node_client.h"
#include "control/rpc.h"
#include "engine/test_node_setup.h"
#include "store/temp_dir.h"

namespace dualpath::node {
namespace {

using namespace std::chrono_literals;
namespace pb = ::dualpath::control::v1;

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The scheduler's side of registration and the session, with a fixed setup; every report the
// node sends is kept.
class FakeScheduler final : public pb::Scheduler::Service {
 public:
  explicit FakeScheduler(engine::NodeSetup setup) : setup_(std::move(setup)) {
    grpc::ServerBuilder b;
    control::configure_server(b, "127.0.0.1:0", {}, {}, control::kSchedulerMaxMessageBytes, 16,
                              &port_);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~FakeScheduler() override { server_->Shutdown(std::chrono::system_clock::now() + 2s); }

  grpc::Status Register(grpc::ServerContext*, const pb::RegisterRequest* req,
                        pb::RegisterReply* reply) override {
    MutexLock lock(mu_);
    control_address_ = req->control_address();
    reply->set_index(setup_.index);
    *reply->mutable_setup() = control::to_proto(setup_);
    reply->set_session("session-1");
    return grpc::Status::OK;
  }
  grpc::Status Session(grpc::ServerContext*,
                       grpc::ServerReaderWriter<pb::SchedulerMessage, pb::SessionMessage>* stream)
      override {
    pb::SessionMessage m;
    if (!stream->Read(&m) || !m.has_hello()) return grpc::Status::CANCELLED;
    pb::SchedulerMessage joined;
    joined.mutable_joined();
    stream->Write(joined);
    {
      MutexLock lock(mu_);
      joined_ = true;
      stream_ = stream;
    }
    cv_.notify_all();
    while (stream->Read(&m)) {
      if (!m.has_report()) continue;
      MutexLock lock(mu_);
      reports_.push_back(m.report());
      cv_.notify_all();
    }
    MutexLock lock(mu_);
    stream_ = nullptr;
    return grpc::Status::OK;
  }

  int port() const { return port_; }
  // Waits until the node has joined; its control address then.
  std::string wait_joined() {
    MutexLock lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!joined_ && cv_.wait_until(lock, deadline)) {
    }
    EXPECT_TRUE(joined_) << "the node did not join within 60 s";
    return control_address_;
  }
  // The next report after the ones seen so far.
  std::optional<pb::LoadReport> next_report() {
    MutexLock lock(mu_);
    const size_t seen = reports_.size();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (reports_.size() == seen && cv_.wait_until(lock, deadline)) {
    }
    if (reports_.size() == seen) return std::nullopt;
    return reports_.back();
  }
  void quit() {
    MutexLock lock(mu_);
    if (stream_ == nullptr) return;
    pb::SchedulerMessage q;
    q.mutable_quit();
    stream_->Write(q);
  }

 private:
  const engine::NodeSetup setup_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  Mutex mu_;
  CondVar cv_;
  bool joined_ DP_GUARDED_BY(mu_) = false;
  std::string control_address_ DP_GUARDED_BY(mu_);
  std::vector<pb::LoadReport> reports_ DP_GUARDED_BY(mu_);
  grpc::ServerReaderWriter<pb::SchedulerMessage, pb::SessionMessage>* stream_ DP_GUARDED_BY(mu_) =
      nullptr;
};

engine::NodeSetup decode_setup(const std::string& dir, Duration buffer_ttl = 0s) {
  engine::NodeSetup setup = engine::test_node_setup(engine::NodeRole::kDecode, dir);
  setup.report_interval = 20ms;
  setup.buffer_ttl = buffer_ttl;
  return setup;
}

// A decode node process registered with a FakeScheduler, and a client of its Node service.
struct NodeUnderTest {
  explicit NodeUnderTest(Duration buffer_ttl = 0s)
      : scheduler(decode_setup(dir.path(), buffer_ttl)) {
    SpawnOptions o;
    o.argv = {DP_NODE_PROGRAM, "--scheduler", fmt::format("127.0.0.1:{}", scheduler.port()),
              "--role", "decode", "--connect-timeout", "20"};
    o.stderr_path = dir.path() + "/node.stderr";
    o.die_with_parent = true;
    auto p = Subprocess::spawn(o);
    EXPECT_TRUE(p.is_ok());
    process = std::move(p).value();
    const std::string address = scheduler.wait_joined();
    client = std::make_unique<control::NodeClient>(
        control::make_channel(address, {}, {}, control::kNodeMaxMessageBytes), "decode node 0",
        "session-1");
  }
  ~NodeUnderTest() {
    client.reset();
    scheduler.quit();
    auto st = process.wait_for(10s);
    EXPECT_TRUE(st.is_ok()) << "the node did not exit on Quit";
    if (::testing::Test::HasFailure()) {
      std::fprintf(stderr, "--- the node's stderr ---\n%s", read_file(dir.path() + "/node.stderr").c_str());
    }
  }
  store::TempDir dir;
  FakeScheduler scheduler;
  Subprocess process;
  std::unique_ptr<control::NodeClient> client;
};

pb::PrepareRequest prepare_of(uint64_t id, int tokens, int64_t gen) {
  sched::TurnPlan plan;
  plan.path = sched::ReadPath::kRecompute;
  plan.gen_tokens = gen;
  std::vector<int32_t> t;
  for (int i = 0; i < tokens; ++i) t.push_back(i % 200);
  pb::PrepareRequest m;
  *m.mutable_turn() = control::turn_spec(plan, id, t, {}, "");
  return m;
}

TEST(Node, MalformedCallsGetErrorStatusesAndTheNodeLivesOn) {
  NodeUnderTest n;
  struct Case {
    pb::PrepareRequest request;
    const char* want;
  };
  std::vector<Case> cases;
  cases.push_back({prepare_of(1, 10, 4), ""});
  cases.back().request.mutable_turn()->set_gen_tokens(-5);
  cases.back().want = "gen_tokens";
  cases.push_back({prepare_of(2, 10, 4), "vocabulary"});
  cases.back().request.mutable_turn()->set_tokens(0, 999999);
  cases.push_back({prepare_of(3, 10, 4), "read ranges"});
  cases.back().request.mutable_turn()->mutable_de_read()->set_end_tokens(64);
  cases.push_back({prepare_of(4, 0, 4), "empty"});
  for (const Case& c : cases) {
    auto r = n.client->prepare(c.request, 10s);
    ASSERT_FALSE(r.is_ok());
    EXPECT_TRUE(r.status().is_invalid_argument()) << r.status().to_string();
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().message();
  }
  pb::DecodeRequest d;
  d.set_request_id(9);
  auto dec = n.client->decode(d, 10s, {});
  ASSERT_FALSE(dec.is_ok());
  EXPECT_NE(dec.status().message().find("not prepared"), std::string::npos);
  auto pre = n.client->prefill(pb::PrefillRequest(), 10s);
  ASSERT_FALSE(pre.is_ok());
  EXPECT_NE(pre.status().message().find("prefill goes to a prefill node"), std::string::npos)
      << pre.status().message();
  // A call without this registration's session is refused, not run.
  auto address = n.scheduler.wait_joined();
  control::NodeClient stranger(control::make_channel(address, {}, {}, control::kNodeMaxMessageBytes),
                               "decode node 0", "another-session");
  auto refused = stranger.status(10s);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("session"), std::string::npos);
  // And the node answers on.
  auto status = n.client->status(10s);
  ASSERT_TRUE(status.is_ok()) << status.status().to_string();
  EXPECT_TRUE(n.process.running());
}

TEST(Node, APreparedBufferNobodyDecodesIsFreedByItsTtl) {
  // The TTL is long enough that a report comes before it ends, also under ASan (0.3 s was not).
  NodeUnderTest n(/*buffer_ttl=*/2s);
  auto r = n.client->prepare(prepare_of(77, 200, 16), 10s);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  auto used = [&]() -> uint64_t {
    auto rep = n.scheduler.next_report();
    EXPECT_TRUE(rep.has_value()) << "no report";
    return rep ? rep->dram_used_bytes() : 0;
  };
  EXPECT_GT(used(), 0u);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  uint64_t now_used = 1;
  while (now_used > 0 && std::chrono::steady_clock::now() < deadline) now_used = used();
  EXPECT_EQ(now_used, 0u) << "the DE buffer of a request never decoded was not freed";
}

TEST(Node, APrepareWaitingForBufferSpaceEndsWhenItsCallerCancels) {
  NodeUnderTest n;
  // The first prepare takes most of the 16 MiB DE buffer (the tiny model's Full Blocks are
  // small, so a long prompt), the second waits for room.
  auto first = n.client->prepare(prepare_of(1, 5000, 16), 10s);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  auto report = n.scheduler.next_report();
  ASSERT_TRUE(report.has_value());
  const uint64_t held = report->dram_used_bytes();
  ASSERT_GT(held, report->dram_bytes() / 2) << "the first prepare should fill most of the buffer";
  // A client whose call is cancelled by its deadline (the scheduler gave up on the turn).
  const auto start = std::chrono::steady_clock::now();
  auto second = n.client->prepare(prepare_of(2, 5000, 16), 1s);
  ASSERT_FALSE(second.is_ok());
  EXPECT_TRUE(second.status().is_timed_out()) << second.status().to_string();
  // The node cancelled the waiting prepare: it no longer counts among the node's requests, and
  // the buffer holds the first request's blocks only.
  bool freed = false;
  for (int i = 0; i < 200 && !freed; ++i) {
    auto r = n.scheduler.next_report();
    freed = r && r->requests() == 1 && r->dram_used_bytes() == held;
  }
  EXPECT_TRUE(freed) << "the cancelled prepare still holds the node";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  ASSERT_TRUE(n.client->release(1, 10s).is_ok());
}

TEST(Node, ASchedulerThatAcceptsButNeverAnswersIsAClearErrorInTime) {
  // A TCP listener that accepts and never speaks.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  store::TempDir dir;
  SpawnOptions o;
  o.argv = {DP_NODE_PROGRAM,   "--scheduler", fmt::format("127.0.0.1:{}", ntohs(a.sin_port)),
            "--role",          "prefill",     "--connect-timeout",
            "2"};
  o.stderr_path = dir.path() + "/stderr";
  auto p = Subprocess::spawn(o);
  ASSERT_TRUE(p.is_ok());
  auto status = p->wait_for(30s);
  ::close(fd);
  ASSERT_TRUE(status.is_ok()) << "the node did not give up";
  EXPECT_EQ(WEXITSTATUS(*status), 1);
  const std::string err = read_file(o.stderr_path);
  EXPECT_NE(err.find("no scheduler answered at 127.0.0.1:"), std::string::npos) << err;
}

TEST(Node, ANodeWithoutTheCredentialIsToldToPassItForARemoteScheduler) {
  store::TempDir dir;
  SpawnOptions o;
  o.argv = {DP_NODE_PROGRAM, "--scheduler", "10.255.255.1:8100", "--role", "decode"};
  o.stderr_path = dir.path() + "/stderr";
  auto p = Subprocess::spawn(o);
  ASSERT_TRUE(p.is_ok());
  auto status = p->wait_for(20s);
  ASSERT_TRUE(status.is_ok());
  EXPECT_EQ(WEXITSTATUS(*status), 2);
  EXPECT_NE(read_file(o.stderr_path).find("--cluster-key FILE"), std::string::npos);
}

}  // namespace
}  // namespace dualpath::node
