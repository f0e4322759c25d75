// The node protocol's parsing: malformed wire data is an error value naming the field, never an
// exception (a malformed control message used to terminate the node that received it).
#include "engine/wire.h"

#include <gtest/gtest.h>

#include "engine/node_protocol.h"
#include "engine/node_runtime.h"

namespace dualpath::engine {
namespace {

Json parse(const char* text) { return Json::parse(text); }

TEST(WireReader, MistypedAndMissingFieldsAreErrorsNamingTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"request_id": "7", "tokens": [1], "hit_tokens": 0, "path": "pe", "de_index": 0})",
       "request_id"},
      {R"({"request_id": 7, "tokens": [1, "x"], "hit_tokens": 0, "path": "pe", "de_index": 0})",
       "tokens"},
      {R"({"request_id": 7, "tokens": [1, -4], "hit_tokens": 0, "path": "pe", "de_index": 0})",
       "tokens"},
      {R"({"request_id": 7, "tokens": [1], "hit_tokens": -64, "path": "pe", "de_index": 0})",
       "hit_tokens"},
      {R"({"request_id": 7, "tokens": [1], "hit_tokens": 0, "path": "sideways", "de_index": 0})",
       "path"},
      {R"({"request_id": 7, "tokens": [1], "hit_tokens": 0, "path": "pe"})", "de_index"},
      {R"({"request_id": 7, "tokens": {"a": 1}, "hit_tokens": 0, "path": "pe", "de_index": 0})",
       "tokens"},
      {R"([1, 2, 3])", "not a JSON object"},
      {R"({"request_id": 7, "tokens": [99999999999], "hit_tokens": 0, "path": "pe", "de_index": 0})",
       "tokens"},
  };
  for (auto [text, want] : cases) {
    auto r = PrefillRequest::from_json(parse(text));
    ASSERT_FALSE(r.is_ok()) << text;
    EXPECT_TRUE(r.status().is_invalid_argument()) << r.status().to_string();
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
}

TEST(WireReader, EveryMessageRoundTripsThroughJson) {
  PrefillRequest p{42, {1, 2, 3}, 0, sched::ReadPath::kDe, 1, 4096, 0, {}, 0, {}};
  auto back = PrefillRequest::from_json(p.to_json());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->tokens, p.tokens);
  EXPECT_EQ(back->path, sched::ReadPath::kDe);
  EXPECT_TRUE(back->sampling.greedy());
  p.sampling = {0.7, 0.9, 40, 12345};
  auto sampled = PrefillRequest::from_json(p.to_json());
  ASSERT_TRUE(sampled.is_ok());
  EXPECT_DOUBLE_EQ(sampled->sampling.temperature, 0.7);
  EXPECT_DOUBLE_EQ(sampled->sampling.top_p, 0.9);
  EXPECT_EQ(sampled->sampling.top_k, 40);
  EXPECT_EQ(sampled->sampling.seed, 12345u);
  // A split read: the PE side's part travels with the prefill, the DE side's start with the
  // prepare; both are absent from other paths' messages.
  p.path = sched::ReadPath::kSplit;
  p.pe_read_tokens = 128;
  auto split = PrefillRequest::from_json(p.to_json());
  ASSERT_TRUE(split.is_ok()) << split.status().to_string();
  EXPECT_EQ(split->path, sched::ReadPath::kSplit);
  EXPECT_EQ(split->pe_read_tokens, 128);
  PrepareRequest prep;
  prep.request_id = 5;
  prep.tokens = {1, 2, 3};
  prep.gen_tokens = 1;
  prep.read_hits = true;
  EXPECT_FALSE(prep.to_json().contains("read_from_tokens"));
  prep.read_from_tokens = 64;
  auto prep_back = PrepareRequest::from_json(prep.to_json());
  ASSERT_TRUE(prep_back.is_ok()) << prep_back.status().to_string();
  EXPECT_EQ(prep_back->read_from_tokens, 64);
  Json bad = prep.to_json();
  bad["read_from_tokens"] = -64;
  EXPECT_FALSE(PrepareRequest::from_json(bad).is_ok());
  // The cache namespace (issue 32) travels with both, absent when empty; an oversized one is a
  // malformed message.
  EXPECT_FALSE(prep.to_json().contains("cache_namespace"));
  EXPECT_EQ(prep_back->cache_namespace, "");
  prep.cache_namespace = std::string(64, 'a');
  p.cache_namespace = std::string(64, 'b');
  EXPECT_EQ(PrepareRequest::from_json(prep.to_json())->cache_namespace, prep.cache_namespace);
  EXPECT_EQ(PrefillRequest::from_json(p.to_json())->cache_namespace, p.cache_namespace);
  prep.cache_namespace = std::string(kMaxCacheNamespaceBytes + 1, 'a');
  EXPECT_FALSE(PrepareRequest::from_json(prep.to_json()).is_ok());
  prep.cache_namespace.clear();
  PrefillReply reply;
  reply.first_token = 9;
  reply.logits = {0.5f, -1.0f};
  reply.layer_timeline = {{0.001, 0.002}};
  reply.bytes.storage_read = 100;
  auto rb = PrefillReply::from_json(reply.to_json());
  ASSERT_TRUE(rb.is_ok()) << rb.status().to_string();
  EXPECT_EQ(rb->layer_timeline, reply.layer_timeline);
  EXPECT_EQ(rb->bytes.storage_read, 100);
  LoadReport l{5, 500, 10, 20, {1, 2}, 3};
  auto lb = LoadReport::from_json(l.to_json());
  ASSERT_TRUE(lb.is_ok());
  EXPECT_EQ(lb->hbm_used_bytes, l.hbm_used_bytes);
  RegisterRequest reg;
  reg.role = NodeRole::kDecode;
  reg.index = 3;
  auto rr = RegisterRequest::from_json(reg.to_json());
  ASSERT_TRUE(rr.is_ok());
  EXPECT_EQ(rr->role, NodeRole::kDecode);
  EXPECT_EQ(rr->index, 3);
  NodeSetup setup;
  setup.role = NodeRole::kDecode;
  setup.index = 1;
  setup.report_interval = std::chrono::milliseconds(25);
  auto sb = NodeSetup::from_json(setup.to_json());
  ASSERT_TRUE(sb.is_ok()) << sb.status().to_string();
  EXPECT_EQ(sb->report_interval, setup.report_interval);
}

TEST(WireReader, StatusCodesFromTheWireAreRangeChecked) {
  EXPECT_EQ(status_code_from_wire(9), StatusCode::kUnavailable);
  EXPECT_EQ(status_code_from_wire(1000), StatusCode::kInternal);
  EXPECT_EQ(status_code_from_wire(-1), StatusCode::kInternal);
  Status s = reply_status(parse(R"({"ok": false, "code": 424242, "error": "boom"})"), "node");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("boom"), std::string::npos);
  s = reply_status(parse(R"({"ok": false, "code": "two", "error": 5})"), "node");
  EXPECT_FALSE(s.is_ok());
  EXPECT_TRUE(reply_status(parse(R"({"ok": true})"), "node").is_ok());
  // "ok": false with code 0 must not read as success.
  EXPECT_FALSE(reply_status(parse(R"({"ok": false, "code": 0})"), "node").is_ok());
}

TEST(WireReader, PeersWithBadHelloFieldsAreRefused) {
  // NodeRuntime::connect_peers reads hellos with the same reader; a bad one is an error.
  const Json hello = parse(R"({"role": "decode", "index": "one", "address": "00", "dram": "00",
                               "hbm": ["00"]})");
  WireReader r(hello, "peer hello");
  (void)r.i64("index", 0, 100);
  EXPECT_FALSE(r.status().is_ok());
  EXPECT_NE(r.status().message().find("index"), std::string::npos);
}

}  // namespace
}  // namespace dualpath::engine
