// The live system's store-facing behaviour with real node processes (dp_node_program), UCX over
// shared memory and block files: a Hugging Face checkpoint on the nodes, injected store faults, a
// real full disk, and the decode nodes' DRAM tier (issue 35). Not in the TSan set: these turns
// are sequential, and the concurrent paths they cross are dp_serve_test's and
// dp_live_system_concurrency_test's; ASan+UBSan runs them.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <signal.h>

#include "compute/checkpoint.h"
#include "compute/cpu_model.h"
#include "compute/cpu_weights.h"
#include "compute/test_util.h"
#include "engine/engine_config.h"
#include "serve/cluster.h"
#include "serve/test_cluster.h"
#include "store/aligned_buffer.h"
#include "store/block_file.h"
#include "store/file_store.h"
#include "store/temp_dir.h"

namespace dualpath::serve {
namespace {

using store::TempDir;

// The reference tokens of a turn: recomputed on `ref`, a cluster of its own, so that its persists
// cannot fill the gaps that faults or evictions leave in the store under test.
std::vector<int32_t> recomputed_on(Cluster& ref, TurnRequest r) {
  r.path = sched::ReadPath::kRecompute;
  auto want = ref.run_turn(r);
  EXPECT_TRUE(want.is_ok()) << want.status().to_string();
  return want.is_ok() ? want->output_tokens : std::vector<int32_t>{};
}

// live.weights = a Hugging Face llama checkpoint directory: the nodes load it, and a turn by
// either read path gives the greedy tokens of the same weights run in this process.
TEST(Serve, ACheckpointDirectoryRunsOnTheNodesWithTheTokensOfItsWeights) {
  TempDir dir;
  const std::string ckpt = dir.sub("ckpt");
  std::ofstream(ckpt + "/config.json")
      << R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
             "vocab_size": 512, "rms_norm_eps": 1e-05})";
  auto config = compute::config_from_hf_json(
      R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
          "vocab_size": 512, "rms_norm_eps": 1e-05})",
      "config.json");
  ASSERT_TRUE(config.is_ok()) << config.status().to_string();
  auto weights = compute::random_weights(*config, 5);
  ASSERT_TRUE(weights.is_ok());
  ASSERT_TRUE(compute::save_weights(ckpt + "/model.safetensors", **weights).is_ok());
  // The same weights in this process: greedy tokens.
  const compute::CpuModel model(*weights);
  auto greedy = [&](const std::vector<int32_t>& tokens, int64_t n) {
    return compute::testing::greedy_generate(model, tokens, n);
  };
  ClusterOptions o = test_cluster(dir.sub("store"), 1);
  o.config.engine.weights = ckpt;
  auto c = Cluster::start(o);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  TurnRequest r;
  r.tokens = prompt(300, 3);
  r.gen_tokens = 8;
  auto first = (*c)->run_turn(r);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_EQ(first->output_tokens, greedy(r.tokens, 8));
  for (sched::ReadPath path : {sched::ReadPath::kPe, sched::ReadPath::kDe}) {
    TurnRequest next = r;
    next.tokens.insert(next.tokens.end(), first->output_tokens.begin(), first->output_tokens.end());
    next.tokens.push_back(path == sched::ReadPath::kPe ? 11 : 12);
    next.path = path;
    auto turn = (*c)->run_turn(next);
    ASSERT_TRUE(turn.is_ok()) << turn.status().to_string();
    EXPECT_GE(turn->hit_tokens, 256);
    EXPECT_EQ(turn->output_tokens, greedy(next.tokens, 8)) << sched::read_path_name(path);
  }
}

// The stores fail 1 % of their block reads, writes, fsyncs and renames at random
// (store.inject_fault_rate): every turn still completes, with the tokens a recompute gives. A
// failed read is recomputed, a failed persist leaves a shorter prefix for the next turn.
TEST(Serve, RandomStoreFaultsNeverChangeATurnsTokens) {
  TempDir dir;
  ClusterOptions o = test_cluster(dir.sub("faulty"), 2);
  o.config.engine.store_fault_rate = 0.01;
  auto c = Cluster::start(o);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  // The reference recomputes on a cluster of its own, so its persists cannot fill the gaps the
  // faults leave in the first one's store.
  auto ref = Cluster::start(test_cluster(dir.sub("reference"), 1));
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  const int64_t bt = o.config.engine.block_tokens;
  int turns = 0, degraded = 0;
  for (int session = 0; session < 6; ++session) {
    std::vector<int32_t> context;
    for (int turn = 0; turn < 6; ++turn) {
      const auto more = prompt(250, 7 + session * 13 + turn);
      context.insert(context.end(), more.begin(), more.end());
      // What the last turn stored: its prompt and the outputs whose KV it computed (all but the
      // last token), in whole blocks.
      const int64_t before = static_cast<int64_t>(context.size() - more.size());
      const int64_t stored = before == 0 ? 0 : (before - 1) / bt * bt;
      TurnRequest r;
      r.tokens = context;
      r.gen_tokens = 6;
      auto got = (*c)->run_turn(r);
      ASSERT_TRUE(got.is_ok()) << "session " << session << " turn " << turn << ": "
                               << got.status().to_string();
      EXPECT_EQ(got->output_tokens, recomputed_on(**ref, r))
          << "session " << session << " turn " << turn;
      ++turns;
      if (got->attempts > 1 || got->hit_tokens < stored) ++degraded;
      context.insert(context.end(), got->output_tokens.begin(), got->output_tokens.end());
    }
  }
  std::printf("random store faults: %d turns, %d retried or hit less than was offered\n", turns,
              degraded);
  EXPECT_GT(degraded, 0) << "no injected fault reached a turn: the test checks nothing";
}

// A real full disk: the nodes' data path is a 4 MiB tmpfs and the sessions hold about 10 MiB
// of KV (the issue's 16 MiB with 30 MiB, scaled down for CI's time; `dualpath demo --data-dir`
// on a 16 MiB tmpfs is the full-size run, docs/store.md). The stores evict their least recently used blocks when the disk is full, every turn
// completes with the tokens a recompute gives, and the directory afterwards holds only whole,
// valid blocks. Needs root to mount (CI runs as root); skips, saying so, elsewhere: the injected
// ENOSPC cases of store/io_fault_test.cc cover the store then.
TEST(Serve, AFullDiskDegradesTheCacheAndEveryTurnStillGivesTheRecomputedTokens) {
  TempDir dir;
  const std::string small = dir.sub("tmpfs4m");
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a 4 MiB tmpfs needs root";
  if (::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=4m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs on " << small << ": " << std::strerror(errno);
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{small};
  ClusterOptions o = test_cluster(small, 1);
  auto c = Cluster::start(o);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  auto ref = Cluster::start(test_cluster(dir.sub("reference"), 1));
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  int64_t hits = 0, tokens = 0;
#ifdef DP_SANITIZED
  constexpr int kTurns = 5;
#else
  constexpr int kTurns = 8;
#endif
  for (int session = 0; session < 3; ++session) {
    std::vector<int32_t> context;
    for (int turn = 0; turn < kTurns; ++turn) {
      const auto more = prompt(kTurns == 8 ? 200 : 300, 11 + session * 17 + turn);
      context.insert(context.end(), more.begin(), more.end());
      TurnRequest r;
      r.tokens = context;
      r.gen_tokens = 4;
      auto got = (*c)->run_turn(r);
      ASSERT_TRUE(got.is_ok()) << "session " << session << " turn " << turn << ": "
                               << got.status().to_string();
      EXPECT_EQ(got->output_tokens, recomputed_on(**ref, r))
          << "session " << session << " turn " << turn;
      hits += got->hit_tokens;
      tokens += static_cast<int64_t>(context.size());
      context.insert(context.end(), got->output_tokens.begin(), got->output_tokens.end());
    }
  }
  std::printf("full disk: %lld of %lld prompt tokens hit (%.1f %%)\n",
              static_cast<long long>(hits), static_cast<long long>(tokens), 100.0 * hits / tokens);
  EXPECT_GT(hits, 0);  // the cache still serves, degraded
  c->reset();
  // A rerun over the directory: every file is a whole block that passes its checks.
  const auto shape = engine::model_kv_shape(o.config.engine);
  ASSERT_TRUE(shape.is_ok());
  store::FileStoreOptions so;
  so.data_paths = {small};
  so.model = engine::kv_fingerprint(o.config.engine.backend_spec());
  so.layout = {shape->layers, o.config.engine.block_tokens, shape->bytes_per_token_per_layer};
  auto st = store::FileStore::open(so);
  ASSERT_TRUE(st.is_ok()) << st.status().to_string();
  EXPECT_GT((*st)->stats().index.blocks, 0);
  EXPECT_EQ(store::count_regular_files(small + "/tmp"), 0u);
  int64_t checked = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(small + "/blocks")) {
    if (!e.is_regular_file()) continue;
    EXPECT_EQ(e.file_size(), static_cast<uintmax_t>(store::block_file_bytes(so.layout)))
        << e.path();
    const std::string name = e.path().stem().string();
    auto key = store::BlockKey::from_hex(name);
    ASSERT_TRUE(key.is_ok()) << name;
    auto buf = store::AlignedBuffer::allocate(static_cast<size_t>(so.layout.full_block_bytes()));
    ASSERT_TRUE(buf.is_ok());
    store::ReadRequest rr{*key, buf->first(static_cast<size_t>(so.layout.full_block_bytes()))};
    auto batch = (*st)->read(std::span(&rr, 1));
    ASSERT_TRUE(batch.is_ok());
    ASSERT_TRUE(batch->wait_for(std::chrono::seconds(20)).is_ok());
    EXPECT_TRUE(batch->results()[0].is_ok()) << batch->results()[0].to_string();
    ++checked;
  }
  EXPECT_EQ((*st)->stats().quarantined_files, 0);
  std::printf("full disk: %lld block files left, all whole and valid\n",
              static_cast<long long>(checked));
}

// A session's first two turns on a fresh cluster (two decode nodes) with the DE DRAM tier on or
// off: the second turn's result.
struct TwoTurns {
  std::unique_ptr<Cluster> cluster;
  TurnResult first, second;
  TurnRequest next;  // the second turn's request
};
TwoTurns two_turns(const std::string& dir, double tier_bytes) {
  TwoTurns t;
  ClusterOptions o = test_cluster(dir, 2);
  o.config.engine.request_timeout = std::chrono::seconds(10);
  o.config.cache.de_dram_bytes = tier_bytes;
  auto c = Cluster::start(o);
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  if (!c.is_ok()) return t;
  t.cluster = std::move(c).value();
  TurnRequest r;
  r.tokens = prompt(300, 7);
  r.gen_tokens = 16;
  auto first = t.cluster->run_turn(r);
  EXPECT_TRUE(first.is_ok()) << first.status().to_string();
  if (!first.is_ok()) return t;
  t.first = *first;
  // The agent comes back with everything it sent, the reply, and a tool's output.
  r.tokens.insert(r.tokens.end(), first->output_tokens.begin(), first->output_tokens.end());
  for (int i = 0; i < 100; ++i) r.tokens.push_back((i * 13 + 1) % 500);
  t.next = r;
  auto second = t.cluster->run_turn(r);
  EXPECT_TRUE(second.is_ok()) << second.status().to_string();
  if (second.is_ok()) t.second = *second;
  return t;
}

// The DE DRAM tier (issue 35): a session's next turn is served from the DRAM of the decode node
// that ran its last turn, with no storage read, and gives the tokens and the first token's logits
// of the same turn read from storage (the tier off), and the tokens of recomputing it. That node
// killed while it holds the session, the turn reads from storage on the other node: nothing is
// lost.
TEST(Serve, ASessionsNextTurnComesFromItsDecodeNodesDramWithTheTokensOfStorageAndRecompute) {
  TempDir dir_off, dir_on;
  TwoTurns off = two_turns(dir_off.path(), 0);
  ASSERT_NE(off.cluster, nullptr);
  EXPECT_EQ(off.second.dram_tokens, 0);
  EXPECT_GT(off.second.bytes.storage_read, 0);
  TwoTurns on = two_turns(dir_on.path(), 16 << 20);
  ASSERT_NE(on.cluster, nullptr);
  const TurnResult& dram = on.second;
  EXPECT_EQ(on.first.dram_tokens, 0);
  EXPECT_EQ(dram.de, on.first.de) << "placed away from the node holding the session";
  EXPECT_GT(dram.hit_tokens, 0);
  EXPECT_EQ(dram.hit_tokens, off.second.hit_tokens);
  EXPECT_EQ(dram.dram_tokens, dram.hit_tokens) << "the whole hit is the last turn's";
  EXPECT_EQ(dram.bytes.de_dram, off.second.bytes.storage_read) << "the same blocks";
  EXPECT_EQ(dram.bytes.storage_read, 0) << "read from storage although the tier held it";
  EXPECT_GT(dram.bytes.de_to_pe, 0);  // pushed to the PE layer by layer
  // The same KV bytes loaded: the same tokens, and the same logits to the bit.
  EXPECT_EQ(dram.output_tokens, off.second.output_tokens);
  EXPECT_EQ(dram.first_logits, off.second.first_logits);

  TurnRequest re = on.next;
  re.path = sched::ReadPath::kRecompute;
  auto recomputed = on.cluster->run_turn(re);
  ASSERT_TRUE(recomputed.is_ok()) << recomputed.status().to_string();
  EXPECT_EQ(dram.output_tokens, recomputed->output_tokens);

  // Kill the node holding the session: the turn reads its hit from storage elsewhere.
  ASSERT_TRUE(on.cluster->local_nodes()->signal(dram.de, SIGKILL).is_ok());
  auto storage = on.cluster->run_turn(on.next);
  ASSERT_TRUE(storage.is_ok()) << storage.status().to_string();
  EXPECT_NE(storage->de, dram.de);
  EXPECT_EQ(storage->dram_tokens, 0);
  EXPECT_EQ(storage->bytes.de_dram, 0);
  EXPECT_GT(storage->bytes.storage_read, 0);
  EXPECT_EQ(storage->output_tokens, dram.output_tokens);
}

}  // namespace
}  // namespace dualpath::serve
