// The scheduler service with real node processes (dp_node_program), UCX over shared memory, block
// files in a per-test temporary directory and the tiny CPU transformer: registration and its
// refusals, node failures (retry, migration), a scheduler restart, cancellation.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "common/subprocess.h"
#include "control/control.grpc.pb.h"
#include "control/convert.h"
#include "control/rpc.h"
#include "serve/cluster.h"
#include "serve/test_cluster.h"
#include "engine/engine_config.h"
#include "store/temp_dir.h"
#include "transport/oob_channel.h"

namespace dualpath::serve {
namespace {

using engine::NodeId;
using engine::NodeRole;
using store::TempDir;
using namespace std::chrono_literals;

// The reference: the same turn recomputed on a fresh, undisturbed cluster (of `make`'s kind).
std::vector<int32_t> recomputed(const std::vector<int32_t>& tokens,
                                int64_t gen,
                                ClusterOptions (*make)(const std::string&, int) = test_cluster) {
  TempDir dir;
  auto c = Cluster::start(make(dir.path(), 1));
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  if (!c.is_ok()) return {};
  TurnRequest r;
  r.tokens = tokens;
  r.gen_tokens = gen;
  r.path = sched::ReadPath::kRecompute;
  auto out = (*c)->run_turn(r);
  EXPECT_TRUE(out.is_ok()) << out.status().to_string();
  return out.is_ok() ? out->output_tokens : std::vector<int32_t>{};
}

// Runs a node program by hand against `scheduler` and returns its exit status and stderr.
std::pair<int, std::string> run_node(const std::string& scheduler,
                                     const std::string& role,
                                     int index,
                                     double connect_timeout_s = 10,
                                     const std::string& cluster_key = "") {
  SpawnOptions o;
  o.argv = {DP_NODE_PROGRAM,
            "--scheduler",
            scheduler,
            "--role",
            role,
            "--connect-timeout",
            std::to_string(connect_timeout_s)};
  if (index >= 0) {
    o.argv.push_back("--index");
    o.argv.push_back(std::to_string(index));
  }
  if (!cluster_key.empty()) {
    o.argv.push_back("--cluster-key");
    o.argv.push_back(cluster_key);
  }
  TempDir dir;
  o.stderr_path = dir.path() + "/stderr";
  auto p = Subprocess::spawn(o);
  EXPECT_TRUE(p.is_ok());
  auto status = p->wait_for(60s);
  EXPECT_TRUE(status.is_ok()) << "the node did not exit";
  std::ifstream f(o.stderr_path);
  std::stringstream ss;
  ss << f.rdbuf();
  return {status.is_ok() && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1, ss.str()};
}

TEST(Serve, ANodeThatFindsNoSchedulerSaysSoWithinItsTimeout) {
  // A port nothing listens on: listen, note it, close.
  uint16_t port = 0;
  {
    auto l = transport::OobListener::listen("127.0.0.1");
    ASSERT_TRUE(l.is_ok());
    port = (*l)->port();
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto [code, err] = run_node("127.0.0.1:" + std::to_string(port), "prefill", -1, 1.0);
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find("no scheduler answered at 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
}

TEST(Serve, DuplicateIndexesAndNodesBeyondTheConfigAreRefused) {
  TempDir dir;
  auto c = Cluster::start(test_cluster(dir.path(), 1));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  const std::string addr = (*c)->service().address();
  const std::string key = (*c)->service().cluster_key_path();
  ASSERT_FALSE(key.empty()) << "local nodes get an ephemeral credential";
  {
    auto [code, err] = run_node(addr, "decode", 0, 10, key);
    EXPECT_EQ(code, 2) << err;
    EXPECT_NE(err.find("duplicate node index: decode node 0 is already registered"),
              std::string::npos)
        << err;
  }
  {
    auto [code, err] = run_node(addr, "decode", -1, 10, key);
    EXPECT_EQ(code, 2) << err;
    EXPECT_NE(err.find("all 1 decode nodes of the config (cluster.decode_nodes = 1) are "
                       "registered"),
              std::string::npos)
        << err;
  }
  {
    auto [code, err] = run_node(addr, "prefill", 3, 10, key);
    EXPECT_EQ(code, 2) << err;
    EXPECT_NE(err.find("declares 1 prefill node (cluster.prefill_nodes = 1)"), std::string::npos)
        << err;
  }
  // The cluster still serves.
  TurnRequest r;
  r.tokens = prompt(100, 3);
  r.gen_tokens = 4;
  EXPECT_TRUE((*c)->run_turn(r).is_ok());
}

// The Session stream's reactor (scheduler_service.cc) on a raw gRPC client: a stream that breaks
// the protocol is ended with a status naming why, its slot is free again at once, and the service
// goes on.
TEST(Serve, SessionsThatBreakTheProtocolAreEndedAndTheirSlotsFreedAtOnce) {
  namespace pb = control::pb;
  TempDir dir;
  auto service = SchedulerService::start(test_cluster(dir.path(), 1).config);
  ASSERT_TRUE(service.is_ok()) << service.status().to_string();
  auto stub = pb::Scheduler::NewStub(control::make_channel(
      (*service)->address(), control::Security{}, {}, control::kSchedulerMaxMessageBytes));
  // Registers as decode node 0: the session, or "" when refused.
  auto reg = [&]() -> std::string {
    grpc::ClientContext ctx;
    control::set_timeout(ctx, 10s);
    pb::RegisterRequest req;
    req.set_role(pb::ROLE_DECODE);
    req.set_index(0);
    req.set_protocol(control::kProtocolVersion);
    req.set_control_address("127.0.0.1:1");
    pb::RegisterReply reply;
    const grpc::Status s = stub->Register(&ctx, req, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return s.ok() ? reply.session() : "";
  };
  // Opens `session`'s stream, sends `first` (if any), closes its side; the stream's status.
  auto session = [&](const std::string& id, const std::optional<pb::SessionMessage>& first) {
    grpc::ClientContext ctx;
    ctx.AddMetadata(control::kSessionMetadata, id);
    control::set_timeout(ctx, 10s);
    auto stream = stub->Session(&ctx);
    if (first) (void)stream->Write(*first);
    (void)stream->WritesDone();
    return stream->Finish();
  };
  pb::SessionMessage hello;
  hello.mutable_hello();
  pb::SessionMessage report;
  report.mutable_report();
  pb::SessionMessage failed;
  failed.mutable_failed()->set_code(13);
  failed.mutable_failed()->set_error("the node could not start");

  grpc::Status s = session("no such session", hello);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("register first"), std::string::npos) << s.error_message();

  std::string id = reg();
  ASSERT_FALSE(id.empty());
  s = session(id, report);  // a report before the hello
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("begins with the node's hello"), std::string::npos)
      << s.error_message();

  id = reg();  // the slot was freed: the same index registers at once
  ASSERT_FALSE(id.empty());
  s = session(id, std::nullopt);  // closed without a word
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();

  id = reg();
  ASSERT_FALSE(id.empty());
  s = session(id, failed);  // the node reports that it could not start
  EXPECT_TRUE(s.ok()) << s.error_message();

  EXPECT_FALSE(reg().empty());  // and the slot is free again
  EXPECT_FALSE((*service)->ready());
}

TEST(Serve, DecodeNodeKilledBeforeThePrefillIsRetriedElsewhereWithTheTokensOfRecompute) {
  TempDir dir;
  ClusterOptions o = test_cluster(dir.path(), 2);
  o.config.engine.request_timeout = 10s;
  auto c = Cluster::start(o);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  TurnRequest r;
  r.tokens = prompt(300, 7);
  r.gen_tokens = 16;
  r.path = sched::ReadPath::kDe;
  auto first = (*c)->run_turn(r);  // persists the prompt's blocks
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  r.tokens.insert(r.tokens.end(), first->output_tokens.begin(), first->output_tokens.end());
  for (int i = 0; i < 100; ++i) r.tokens.push_back(i);
  LocalNodes* nodes = (*c)->local_nodes();
  std::atomic<int> killed{-1};
  r.after_prepare = [&](int attempt, NodeId, NodeId de) {
    if (attempt == 1) {
      killed = de.index;
      (void)nodes->signal(de, SIGKILL);
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto turn = (*c)->run_turn(r);
  ASSERT_TRUE(turn.is_ok()) << turn.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s) << "waited out a timeout";
  EXPECT_EQ(turn->attempts, 2);
  EXPECT_TRUE(turn->retried);
  EXPECT_NE(turn->de.index, killed.load());
  EXPECT_GT(turn->hit_tokens, 0);
  r.after_prepare = nullptr;
  EXPECT_EQ(turn->output_tokens, recomputed(r.tokens, r.gen_tokens));
}

// On the CPU transformer and on the modeled backend (whose tokens digest the KV they consume):
// both continue a migrated decode with the tokens of recomputing it.
class ServeMigration
    : public ::testing::TestWithParam<ClusterOptions (*)(const std::string&, int)> {};

TEST_P(ServeMigration, DecodeNodeKilledMidDecodeIsMigratedAndReadsItsPersistedBlocks) {
  TempDir dir;
  ClusterOptions o = GetParam()(dir.path(), 2);
  o.config.engine.request_timeout = 10s;
  auto c = Cluster::start(o);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  TurnRequest r;
  r.tokens = prompt(320, 13);  // 5 whole blocks of 64
  r.gen_tokens = 200;
  r.path = sched::ReadPath::kPe;
  LocalNodes* nodes = (*c)->local_nodes();
  std::atomic<bool> fired{false};
  // After 150 tokens the decode has persisted the prompt's 5 blocks and usually 2 more (tokens
  // 320..447); how many of the generated ones are on disk depends on the writes' pace (a loaded
  // machine had one). The blocks on disk when the node dies are what the migration must hit.
  std::atomic<int64_t> blocks_at_kill{-1};
  r.fault_after_tokens = 150;
  r.on_fault_point = [&](NodeId de) {
    if (fired.exchange(true)) return;
    blocks_at_kill = static_cast<int64_t>(store::count_regular_files(dir.path() + "/blocks"));
    (void)nodes->signal(de, SIGKILL);
  };
  std::vector<int32_t> streamed;
  r.on_tokens = [&](std::span<const int32_t> t) {
    streamed.insert(streamed.end(), t.begin(), t.end());
  };
  auto turn = (*c)->run_turn(r);
  ASSERT_TRUE(turn.is_ok()) << turn.status().to_string();
  EXPECT_TRUE(turn->migrated);
  EXPECT_GE(turn->migrated_tokens, 150);
  EXPECT_EQ(static_cast<int64_t>(turn->output_tokens.size()), 200);
  // The migrated attempt hit the blocks the dead node persisted (the prompt's at least, and the
  // generated ones on disk at the kill) and read them from storage.
  EXPECT_GE(blocks_at_kill.load(), 320 / 64);
  EXPECT_GE(turn->migrated_hit_tokens, std::max<int64_t>(blocks_at_kill.load(), 320 / 64) * 64);
  auto kv = engine::model_kv_shape(o.config.engine);
  ASSERT_TRUE(kv.is_ok());
  EXPECT_GE(turn->migrated_read_bytes,
            turn->migrated_hit_tokens * kv->layers * kv->bytes_per_token_per_layer);
  // The client saw one stream: every token once, in order.
  EXPECT_EQ(streamed, turn->output_tokens);
  r.on_fault_point = nullptr;
  r.on_tokens = nullptr;
  EXPECT_EQ(turn->output_tokens, recomputed(r.tokens, r.gen_tokens, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Backends, ServeMigration,
                         ::testing::Values(&test_cluster, &fast_modeled_cluster),
                         [](const auto& p) { return p.index == 0 ? "cpu" : "modeled"; });

TEST(Serve, PrefillNodeKilledMidTurnIsRequeuedOnTheOtherPrefillNode) {
  TempDir dir;
  ClusterOptions o = test_cluster(dir.path(), 1);
  o.config.engine.prefill_nodes = 2;
  o.config.engine.request_timeout = 10s;
  auto c = Cluster::start(o);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  TurnRequest r;
  r.tokens = prompt(400, 17);
  r.gen_tokens = 8;
  LocalNodes* nodes = (*c)->local_nodes();
  std::atomic<int> killed{-1};
  r.after_prepare = [&](int attempt, NodeId pe, NodeId) {
    if (attempt == 1) {
      killed = pe.index;
      (void)nodes->signal(pe, SIGKILL);
      (void)nodes->wait_exit(pe, 10s);
    }
  };
  auto turn = (*c)->run_turn(r);
  ASSERT_TRUE(turn.is_ok()) << turn.status().to_string();
  EXPECT_GE(turn->attempts, 2);
  EXPECT_NE(turn->pe.index, killed.load());
  r.after_prepare = nullptr;
  EXPECT_EQ(turn->output_tokens, recomputed(r.tokens, r.gen_tokens));
  // The dead node gets no more work; the cluster keeps serving on the live one.
  auto next = (*c)->run_turn(r);
  ASSERT_TRUE(next.is_ok()) << next.status().to_string();
  EXPECT_NE(next->pe.index, killed.load());
}

TEST(Serve, NodesReRegisterWithARestartedSchedulerAndTheStoreKeepsItsBlocks) {
  TempDir dir;
  ClusterOptions o = test_cluster(dir.path(), 1);
  // A fixed port, so the restarted scheduler is where the nodes reconnect.
  uint16_t port = 0;
  {
    auto l = transport::OobListener::listen("127.0.0.1");
    ASSERT_TRUE(l.is_ok());
    port = (*l)->port();
  }
  o.config.scheduler.port = port;
  auto service = SchedulerService::start(o.config);
  ASSERT_TRUE(service.is_ok()) << service.status().to_string();
  LocalNodesOptions ln;
  ln.program = DP_NODE_PROGRAM;
  ln.args = {};
  ln.scheduler = (*service)->address();
  auto nodes = LocalNodes::start(ln);
  ASSERT_TRUE(nodes.is_ok());
  ASSERT_TRUE((*service)->wait_ready(60s).is_ok());
  TurnRequest r;
  r.tokens = prompt(300, 5);
  r.gen_tokens = 8;
  auto first = (*service)->run_turn(r);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  const auto pids =
      std::pair{(*nodes)->pid({NodeRole::kPrefill, 0}), (*nodes)->pid({NodeRole::kDecode, 0})};
  // The scheduler dies (its connections close; no "quit"), and a new one starts on its port.
  (*service)->shutdown(/*quit_nodes=*/false);
  service->reset();
  const auto t0 = std::chrono::steady_clock::now();
  auto again = SchedulerService::start(o.config);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  const Duration two_ttls = 2 * o.config.scheduler.lease_ttl;
  ASSERT_TRUE((*again)->wait_ready(30s).is_ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, two_ttls + 1s)
      << "re-registration took longer than two lease TTLs";
  // The same processes, re-registered, and the next turn hits the blocks stored before.
  EXPECT_EQ((*nodes)->pid({NodeRole::kPrefill, 0}), pids.first);
  EXPECT_EQ((*nodes)->pid({NodeRole::kDecode, 0}), pids.second);
  for (const NodeStatus& n : (*again)->nodes()) EXPECT_EQ(n.registrations, 1) << n.id.name();
  r.tokens.insert(r.tokens.end(), first->output_tokens.begin(), first->output_tokens.end());
  r.tokens.push_back(1);
  auto next = (*again)->run_turn(r);
  ASSERT_TRUE(next.is_ok()) << next.status().to_string();
  EXPECT_GE(next->hit_tokens, 256);
}

TEST(Serve, MoreBlockedCallsThanControlWorkersDoNotStarveTheCallsThatUnblockThem) {
  // A DE buffer with room for one turn at a time, and 40 DE-path turns at once: most prepares
  // wait for buffer space, which only the admitted turn's decode frees. Two bugs let that decode
  // wait until the prepares had timed out: the node's fixed pool of 16 control workers (all of
  // them blocked in prepares), and a queued call's wakeup going to the report thread.
  TempDir dir;
  ClusterOptions o = test_cluster(dir.path(), 1);
  o.config.engine.de_dram_buffer_bytes = 1ull << 20;  // 8 tiny blocks; a turn takes 5
  // The turns pass the buffer one at a time, so the last one waits for all the others: under
  // TSan that is longer than the default 30 s deadline. Starvation still shows as a prepare that
  // waits until its deadline and a retry, only later.
  o.config.engine.request_timeout = 180s;
  auto c = Cluster::start(o);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  TurnRequest seed;
  seed.tokens = prompt(300, 11);  // 4 full blocks persisted
  seed.gen_tokens = 2;
  seed.path = sched::ReadPath::kDe;
  ASSERT_TRUE((*c)->run_turn(seed).is_ok());
#ifdef DP_SANITIZED
  constexpr int kTurns = 24;  // still more than the 16 control workers of the old fixed pool
#else
  constexpr int kTurns = 40;
#endif
  std::vector<Result<TurnResult>> results(kTurns, Status::internal("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kTurns; ++i) {
    threads.emplace_back([&, i] {
      TurnRequest r = seed;
      for (int k = 0; k < 10; ++k) r.tokens.push_back(300 + (i * 10 + k) % 200);
      r.gen_tokens = 2;
      results[static_cast<size_t>(i)] = (*c)->run_turn(r);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kTurns; ++i) {
    const auto& r = results[static_cast<size_t>(i)];
    ASSERT_TRUE(r.is_ok()) << "turn " << i << ": " << r.status().to_string();
    EXPECT_GE(r->hit_tokens, 256) << "turn " << i;
    EXPECT_EQ(r->attempts, 1) << "turn " << i << " was retried";
  }
}

TEST(Serve, ACancelledTurnFreesItsBuffersOnBothSidesWithinAReportInterval) {
  TempDir dir;
  ClusterOptions o = test_cluster(dir.path(), 1);
  o.config.scheduler.report_interval = 50ms;
  o.config.scheduler.lease_ttl = 1000ms;
  auto c = Cluster::start(o);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  TurnRequest r;
  r.tokens = prompt(600, 19);
  r.gen_tokens = 2000;
  r.cancel = std::make_shared<TurnCancel>();
  std::atomic<int64_t> seen{0};
  r.on_tokens = [&](std::span<const int32_t> t) {
    if (seen.fetch_add(static_cast<int64_t>(t.size())) < 20 && seen.load() >= 20) {
      std::thread([cancel = r.cancel] { cancel->cancel(); }).detach();
    }
  };
  auto turn = (*c)->run_turn(r);
  ASSERT_FALSE(turn.is_ok());
  EXPECT_TRUE(turn.status().is_aborted()) << turn.status().to_string();
  EXPECT_LT(seen.load(), 2000);
  // Within a few report intervals every node reports its buffers and HBM free and no request.
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  bool freed = false;
  while (!freed && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(o.config.scheduler.report_interval);
    freed = true;
    for (const NodeStatus& n : (*c)->service().nodes()) {
      uint64_t hbm = 0;
      for (uint64_t h : n.report.hbm_used_bytes) hbm += h;
      freed = freed && n.report.dram_used_bytes == 0 && hbm == 0 && n.report.requests == 0;
    }
  }
  EXPECT_TRUE(freed) << "a node still holds the cancelled turn's buffers";
  // The cluster goes on serving.
  TurnRequest next;
  next.tokens = prompt(100, 23);
  next.gen_tokens = 4;
  EXPECT_TRUE((*c)->run_turn(next).is_ok());
}

}  // namespace
}  // namespace dualpath::serve
