// The live system with real parts: the scheduler service and node processes (dp_node_program),
// UCX over shared memory, block files in a per-test temporary directory, the tiny CPU
// transformer, driven by the demo's sessions (bench/demo.h).
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "bench/demo.h"
#include "engine/engine_config.h"
#include "serve/cluster.h"
#include "serve/test_cluster.h"
#include "store/temp_dir.h"

namespace dualpath::bench {
namespace {

using serve::Cluster;
using serve::ClusterOptions;
using serve::fast_modeled_cluster;
using serve::test_cluster;
using store::TempDir;

// One session of 21 turns whose context passes 4K tokens (256 + 20 x (150..250 + 16..32)).
DemoOptions long_session(sched::PathRequest path) {
  DemoOptions demo;
  demo.sessions = 1;
  demo.turns = 21;
  demo.first_prompt_tokens = 256;
  demo.path = path;
  return demo;
}

DemoReport run_fresh(sched::PathRequest path, int decode_nodes) {
  TempDir dir;
  auto cluster = Cluster::start(test_cluster(dir.path(), decode_nodes));
  EXPECT_TRUE(cluster.is_ok()) << cluster.status().to_string();
  if (!cluster.is_ok()) return {};
  auto report = run_demo(**cluster, long_session(path), {});
  EXPECT_TRUE(report.is_ok()) << report.status().to_string();
  if (!report.is_ok()) return {};
  return std::move(report).value();
}

// Bytes per hop of one turn, by PAPER.md §6's accounting (tiny: 4 layers x 512 B per token).
void check_accounting(const TurnResult& r, int64_t gen_tokens, const store::BlockLayout& layout) {
  const int64_t kv_per_token = layout.layers * layout.bytes_per_token_per_layer;
  const int64_t bt = layout.block_tokens;
  ASSERT_EQ(r.hit_tokens % bt, 0);
  // Every hit token read from storage exactly once, in whole blocks.
  EXPECT_EQ(r.bytes.storage_read,
            r.path == sched::ReadPath::kRecompute ? 0 : r.hit_tokens * kv_per_token);
  EXPECT_EQ(r.bytes.de_h2d, r.prompt_tokens * kv_per_token);
  // Each side's read reaches PE HBM by its own hop (PE buffer -> HBM, DE buffer -> PE HBM).
  EXPECT_EQ(r.pe_read_bytes + r.de_read_bytes, r.bytes.storage_read);
  EXPECT_EQ(r.bytes.pe_h2d, r.pe_read_bytes);
  EXPECT_EQ(r.bytes.de_to_pe, r.de_read_bytes);
  switch (r.path) {
    case sched::ReadPath::kPe:
      EXPECT_EQ(r.bytes.pe_h2d, r.bytes.storage_read);
      EXPECT_EQ(r.bytes.de_to_pe, 0);
      EXPECT_EQ(r.bytes.pd_transfer, r.prompt_tokens * kv_per_token);
      break;
    case sched::ReadPath::kDe:
      EXPECT_EQ(r.bytes.de_to_pe, r.bytes.storage_read);
      EXPECT_EQ(r.bytes.pe_h2d, 0);
      EXPECT_EQ(r.bytes.pd_transfer, (r.prompt_tokens - r.hit_tokens) * kv_per_token);
      break;
    case sched::ReadPath::kRecompute:
      EXPECT_EQ(r.bytes.pe_h2d + r.bytes.de_to_pe, 0);
      EXPECT_EQ(r.bytes.pd_transfer, r.prompt_tokens * kv_per_token);
      break;
    case sched::ReadPath::kSplit:
      // Both sides read a part; the PE side's part and the miss KV cross to the DE buffer.
      EXPECT_GT(r.pe_read_bytes, 0);
      EXPECT_GT(r.de_read_bytes, 0);
      EXPECT_EQ(r.pe_read_bytes % (bt * kv_per_token), 0);
      EXPECT_EQ(r.bytes.pd_transfer, r.prompt_tokens * kv_per_token - r.de_read_bytes);
      break;
    case sched::ReadPath::kOracle:
      ADD_FAILURE() << "the demo never takes the oracle path";
      break;
  }
  // Every full block with KV (the prompt and all but the last generated token) not hit is
  // persisted.
  const int64_t full_blocks = (r.prompt_tokens + gen_tokens - 1) / bt;
  if (r.path != sched::ReadPath::kRecompute) {
    EXPECT_EQ(r.bytes.persist, (full_blocks - r.hit_tokens / bt) * bt * kv_per_token);
  }
}

TEST(LiveSystem, AllReadPathsGiveTheTokensOfRecomputeOver20TurnsPast4K) {
  std::vector<std::pair<sched::PathRequest, DemoReport>> runs;
  for (sched::PathRequest path :
       {sched::PathRequest(sched::ReadPath::kRecompute), sched::PathRequest(sched::ReadPath::kPe),
        sched::PathRequest(sched::ReadPath::kDe), sched::PathRequest(sched::ReadPath::kSplit),
        sched::PathRequest()}) {
    runs.emplace_back(path, run_fresh(path, /*decode_nodes=*/path == sched::PathRequest() ? 2 : 1));
    ASSERT_FALSE(HasFailure());
    std::fprintf(stderr, "%s", runs.back().second.table().c_str());
  }
  const DemoReport& reference = runs[0].second;
  ASSERT_EQ(reference.turns.size(), 21u);
  EXPECT_GE(reference.turns.back().result.prompt_tokens, 4096);
  const store::BlockLayout layout{4, 64, 512};
  for (const auto& [path, report] : runs) {
    ASSERT_EQ(report.turns.size(), reference.turns.size());
    int64_t hit_turns = 0;
    for (size_t t = 0; t < reference.turns.size(); ++t) {
      const TurnResult& want = reference.turns[t].result;
      const TurnResult& got = report.turns[t].result;
      ASSERT_EQ(got.prompt_tokens, want.prompt_tokens) << "turn " << t;
      EXPECT_EQ(got.output_tokens, want.output_tokens) << "turn " << t;
      ASSERT_EQ(got.first_logits.size(), want.first_logits.size());
      float max_diff = 0;
      for (size_t i = 0; i < want.first_logits.size(); ++i) {
        max_diff = std::max(max_diff, std::fabs(got.first_logits[i] - want.first_logits[i]));
      }
      EXPECT_LE(max_diff, 1e-4f) << "turn " << t;
      check_accounting(got, static_cast<int64_t>(got.output_tokens.size()), layout);
      if (got.hit_tokens > 0) ++hit_turns;
      if (path != sched::PathRequest(sched::ReadPath::kRecompute) && t > 0) {
        // The previous turn persisted its prompt and its generated tokens' full blocks.
        const TurnResult& prev = report.turns[t - 1].result;
        const int64_t prev_blocks =
            (prev.prompt_tokens + static_cast<int64_t>(prev.output_tokens.size()) - 1) / 64;
        EXPECT_EQ(got.hit_tokens, prev_blocks * 64) << "turn " << t;
      }
    }
    if (path == sched::PathRequest(sched::ReadPath::kPe) ||
        path == sched::PathRequest(sched::ReadPath::kDe) ||
        path == sched::PathRequest(sched::ReadPath::kSplit)) {
      EXPECT_EQ(hit_turns, 20);
    }
    if (path == sched::PathRequest(sched::ReadPath::kSplit)) {
      // Every hit is 4+ blocks (the first prompt is 256 tokens): every hit turn splits.
      for (size_t t = 1; t < report.turns.size(); ++t) {
        EXPECT_EQ(report.turns[t].result.path, sched::ReadPath::kSplit) << "turn " << t;
      }
    }
  }
}

TEST(LiveSystem, ConcurrentSessionsByAutoGiveTheTokensOfThePePath) {
  // Two sessions at once on one decode node; auto sends a turn to the PE side when the decode
  // node has the other session's reads pending, so the paths mix (how much depends on the
  // interleaving; the tokens must not).
  std::vector<DemoReport> reports;
  for (sched::PathRequest path : {sched::PathRequest(sched::ReadPath::kPe), sched::PathRequest()}) {
    TempDir dir;
    ClusterOptions options = test_cluster(dir.path(), 1);
    options.config.engine.snic_gbps = 1;  // slower reads overlap more often, so auto mixes more
    auto cluster = Cluster::start(options);
    ASSERT_TRUE(cluster.is_ok()) << cluster.status().to_string();
    DemoOptions demo = long_session(path);
    demo.sessions = 2;
    auto report = run_demo(**cluster, demo, {});
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    reports.push_back(std::move(report).value());
    std::fprintf(stderr, "%s", reports.back().table().c_str());
  }
  const store::BlockLayout layout{4, 64, 512};
  ASSERT_EQ(reports[0].turns.size(), reports[1].turns.size());
  for (size_t i = 0; i < reports[0].turns.size(); ++i) {
    const TurnResult& got = reports[1].turns[i].result;
    EXPECT_EQ(got.output_tokens, reports[0].turns[i].result.output_tokens) << "turn " << i;
    check_accounting(got, static_cast<int64_t>(got.output_tokens.size()), layout);
  }
}

// Two engines per node (each its own HBM arena and traffic manager, one DRAM buffer per node):
// sessions spread over both decode engines and prefills over both prefill engines give the
// tokens of one engine per node, by both read paths.
TEST(LiveSystem, TwoEnginesPerNodeGiveTheTokensOfOne) {
  auto run = [](int engines, sched::PathRequest path) {
    TempDir dir;
    ClusterOptions options = test_cluster(dir.path(), 1);
    options.config.engine.engines_per_node = engines;
    auto cluster = Cluster::start(options);
    EXPECT_TRUE(cluster.is_ok()) << cluster.status().to_string();
    if (!cluster.is_ok()) return DemoReport{};
    DemoOptions demo = long_session(path);
    demo.sessions = 4;
    demo.turns = 4;
    auto report = run_demo(**cluster, demo, {});
    EXPECT_TRUE(report.is_ok()) << report.status().to_string();
    return report.is_ok() ? std::move(report).value() : DemoReport{};
  };
  const DemoReport one = run(1, sched::PathRequest(sched::ReadPath::kPe));
  for (sched::PathRequest path : {sched::PathRequest(sched::ReadPath::kPe), sched::PathRequest(sched::ReadPath::kDe)}) {
    const DemoReport two = run(2, path);
    ASSERT_EQ(two.turns.size(), one.turns.size());
    std::set<int> de_engines;
    for (size_t i = 0; i < one.turns.size(); ++i) {
      EXPECT_EQ(two.turns[i].result.output_tokens, one.turns[i].result.output_tokens) << i;
      de_engines.insert(two.turns[i].result.de_engine);
      if (two.turns[i].turn > 0) {
        EXPECT_GT(two.turns[i].result.hit_tokens, 0);
      }
    }
    EXPECT_EQ(de_engines, (std::set<int>{0, 1}));
  }
}

TEST(LiveSystem, ModeledBackendTokensAgreeAcrossPaths) {
  // The modeled backend's prefill token digests every KV row of the last layer, cached and new:
  // it agrees across paths only if every loaded byte is right.
  std::vector<DemoReport> reports;
  for (sched::PathRequest path : {sched::PathRequest(sched::ReadPath::kRecompute), sched::PathRequest(sched::ReadPath::kPe), sched::PathRequest(sched::ReadPath::kDe)}) {
    TempDir dir;
    ClusterOptions options = test_cluster(dir.path(), 1);
    options.config.engine.compute = "modeled";
    options.config.engine.model = "tiny";       // model/'s tiny preset, priced by the CostModel
    options.config.engine.time_dilation = 0.2;  // emulated time runs 5x faster than real time
    auto cluster = Cluster::start(options);
    ASSERT_TRUE(cluster.is_ok()) << cluster.status().to_string();
    DemoOptions demo = long_session(path);
    demo.turns = 6;
    auto report = run_demo(**cluster, demo, {});
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    reports.push_back(std::move(report).value());
  }
  for (size_t i = 1; i < reports.size(); ++i) {
    for (size_t t = 0; t < reports[0].turns.size(); ++t) {
      EXPECT_EQ(reports[i].turns[t].result.output_tokens, reports[0].turns[t].result.output_tokens)
          << "path " << i << " turn " << t;
      if (t > 0) {
        EXPECT_GT(reports[i].turns[t].result.hit_tokens, 0);
      }
    }
  }
}

TEST(LiveSystem, DataDirPersistsAcrossClusters) {
  TempDir dir;
  DemoOptions demo = long_session(sched::PathRequest(sched::ReadPath::kPe));
  demo.turns = 2;
  std::vector<DemoReport> reports;
  for (int run = 0; run < 2; ++run) {
    auto cluster = Cluster::start(test_cluster(dir.path(), 1));
    ASSERT_TRUE(cluster.is_ok()) << cluster.status().to_string();
    auto report = run_demo(**cluster, demo, {});
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    reports.push_back(std::move(report).value());
  }
  EXPECT_EQ(reports[0].turns[0].result.hit_tokens, 0);
  // The rerun's first turn hits every whole block of the first run's first prompt.
  EXPECT_EQ(reports[1].turns[0].result.hit_tokens, 192);  // 256 tokens, minus the last block
  for (size_t t = 0; t < 2; ++t) {
    EXPECT_EQ(reports[1].turns[t].result.output_tokens, reports[0].turns[t].result.output_tokens);
  }
}

TEST(LiveSystem, CorruptHitBlockIsRecomputedNeverServed) {
  TempDir dir;
  auto cluster = Cluster::start(test_cluster(dir.path(), 1));
  ASSERT_TRUE(cluster.is_ok()) << cluster.status().to_string();
  TurnRequest request;
  for (int i = 0; i < 300; ++i) request.tokens.push_back((i * 11) % 500);
  request.path = sched::PathRequest(sched::ReadPath::kPe);
  auto first = (*cluster)->run_turn(request);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  // Flip one payload byte in every stored block file.
  int flipped = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path())) {
    if (entry.path().extension() != ".blk") continue;
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(8192);
    char c = 0;
    f.get(c);
    f.seekp(8192);
    f.put(static_cast<char>(c ^ 0x5a));
    ++flipped;
  }
  ASSERT_GT(flipped, 0);
  auto again = (*cluster)->run_turn(request);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(again->path, sched::ReadPath::kRecompute);
  EXPECT_EQ(again->output_tokens, first->output_tokens);
}

Status load_error(const std::string& toml, const std::string& dir) {
  const std::string path = dir + "/bad.toml";
  std::ofstream(path) << toml;
  return engine::load_engine_config(path).status();
}

TEST(LiveConfig, BadValuesNameTheirKey) {
  TempDir dir;
  struct Case {
    std::string toml;
    std::string key;
  };
  for (const Case& c : std::vector<Case>{
           {"[live]\nde_dram_buffer_mb = 0.1\n", "live.de_dram_buffer_mb"},
           {"[live]\npe_dram_buffer_mb = 0.1\n", "live.pe_dram_buffer_mb"},
           {"[model]\npreset = \"huge\"\n", "model.preset"},
           {"[store]\nblock_tokens = 0\n", "store.block_tokens"},
           {"[store]\ndata_paths = [\"" + dir.path() + "/nope\"]\n", "store.data_paths"},
       }) {
    Status s = load_error(c.toml, dir.path());
    EXPECT_FALSE(s.is_ok()) << c.toml;
    EXPECT_NE(s.message().find(c.key), std::string::npos) << c.key << ": " << s.to_string();
  }
  EXPECT_TRUE(engine::load_engine_config("").is_ok());
}


}  // namespace
}  // namespace dualpath::bench
