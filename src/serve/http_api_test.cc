// The HTTP API against a real cluster (node processes, UCX, block files, the tiny CPU model)
// through a real HTTP client (cpp-httplib's): the OpenAI shapes, streaming, multi-turn hits,
// keys, metrics, bad requests, 429, and a client that goes away mid-stream. The curl / jq / npm
// openai checks of the deployment guide are in apps/dualpath/api_clients_test.sh.

#include "serve/http_api.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "compute/test_util.h"
#include "serve/checkpoint_test_util.h"
#include "serve/test_cluster.h"
#include "store/temp_dir.h"

namespace dualpath::serve {

using Json = nlohmann::json;
namespace {

using namespace std::chrono_literals;
using store::TempDir;

class HttpApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    auto c = Cluster::start(test_cluster(dir_->path(), 2));
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    cluster_ = c->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete dir_;
  }

  std::unique_ptr<HttpApi> start_api(ApiOptions o = {}) {
    o.port = 0;
    auto api = HttpApi::start(o, cluster_->service());
    EXPECT_TRUE(api.is_ok()) << api.status().to_string();
    return api.is_ok() ? std::move(api).value() : nullptr;
  }

  static Json post(HttpApi& api, const std::string& path, const Json& body, int* status,
                   const std::string& key = "") {
    httplib::Client cli("127.0.0.1", api.port());
    cli.set_read_timeout(120, 0);
    httplib::Headers h;
    if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
    auto res = cli.Post(path.c_str(), h, body.dump(), "application/json");
    if (!res) {
      *status = -1;
      return {};
    }
    *status = res->status;
    return Json::parse(res->body, nullptr, false);
  }

  // Reads an SSE response: the `data:` payloads in order.
  static std::vector<std::string> stream(HttpApi& api, const std::string& path, const Json& body,
                                         size_t stop_after = 0) {
    httplib::Client cli("127.0.0.1", api.port());
    cli.set_read_timeout(120, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    std::string buffer;
    std::vector<std::string> events;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      buffer.append(data, n);
      for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
        std::string ev = buffer.substr(0, end);
        buffer.erase(0, end + 2);
        if (ev.rfind("data: ", 0) == 0) events.push_back(ev.substr(6));
      }
      return stop_after == 0 || events.size() < stop_after;  // false: hang up
    };
    (void)cli.send(req);
    return events;
  }

  static Json chat_body(const std::vector<std::pair<std::string, std::string>>& msgs,
                        int max_tokens) {
    Json m = Json::array();
    for (const auto& [role, content] : msgs) m.push_back({{"role", role}, {"content", content}});
    return {{"model", "tiny"}, {"messages", m}, {"max_tokens", max_tokens}, {"temperature", 0}};
  }

  static inline TempDir* dir_ = nullptr;
  static inline Cluster* cluster_ = nullptr;
};

TEST_F(HttpApiTest, ModelsHealthAndVersion) {
  auto api = start_api();
  httplib::Client cli("127.0.0.1", api->port());
  auto models = cli.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  Json m = Json::parse(models->body);
  EXPECT_EQ(m["object"], "list");
  EXPECT_EQ(m["data"][0]["id"], "tiny");
  auto health = cli.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200) << health->body;
  auto version = cli.Get("/version");
  ASSERT_TRUE(version);
  EXPECT_EQ(Json::parse(version->body)["version"], "0.1.0");
  auto missing = cli.Get("/v2/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(Json::parse(missing->body)["error"]["code"], "not_found");
}

// The second turn of a conversation hits the first turn's prompt and reply; the answers are the
// tokens a recompute of the same prompt gives.
TEST_F(HttpApiTest, SecondTurnHitsThePromptAndTheReplyOfTheFirst) {
  auto api = start_api();
  const std::string question(300, 'q');
  int status = 0;
  Json r1 = post(*api, "/v1/chat/completions", chat_body({{"user", question}}, 24), &status);
  ASSERT_EQ(status, 200) << r1.dump();
  EXPECT_EQ(r1["object"], "chat.completion");
  const std::string reply = r1["choices"][0]["message"]["content"];
  const int64_t p1 = r1["usage"]["prompt_tokens"];
  const int64_t c1 = r1["usage"]["completion_tokens"];
  EXPECT_EQ(r1["usage"]["total_tokens"], p1 + c1);
  EXPECT_TRUE(r1["dualpath"].contains("read_path"));
  EXPECT_EQ(p1, 300 + 4);  // BOS, <|user|>, 300 bytes, <|end|>, <|assistant|>
  Json r2 = post(*api, "/v1/chat/completions",
                 chat_body({{"user", question}, {"assistant", reply}, {"user", "and then?"}}, 8),
                 &status);
  ASSERT_EQ(status, 200) << r2.dump();
  const int64_t cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"];
  const int64_t block = cluster_->service().config().engine.block_tokens;
  // The reply's tokens are the generated ones (the memo; an EOS is the template's <|end|>), so
  // the hit covers prompt + reply, rounded down to whole blocks.
  EXPECT_GE(cached, (p1 + c1) / block * block) << r2["dualpath"].dump();
  EXPECT_GT(cached, 0);

  // Greedy: the same prompt recomputed gives the same reply.
  TurnRequest t;
  auto tokens = chat_prompt(ByteTokenizer(), std::vector<ChatMessage>{{"user", question}}, nullptr);
  ASSERT_TRUE(tokens.is_ok());
  t.tokens = *tokens;
  t.gen_tokens = 24;
  t.path = sched::ReadPath::kRecompute;
  auto rec = cluster_->run_turn(t);
  ASSERT_TRUE(rec.is_ok()) << rec.status().to_string();
  std::string want;
  TokenTextStream s;
  for (int32_t tok : rec->output_tokens) {
    if (tok == SpecialTokens::kEnd) break;
    want += s.push(std::span<const int32_t>(&tok, 1));
  }
  want += s.finish();
  EXPECT_EQ(reply, want);

  // The second turn, which loaded its hit KV from the store, against a recompute of the same
  // tokens (the server's: the memo splices the first reply's generated tokens).
  auto tokens2 = chat_prompt(ByteTokenizer(),
                             std::vector<ChatMessage>{{"user", question},
                                                      {"assistant", reply},
                                                      {"user", "and then?"}},
                             &api->memo());
  ASSERT_TRUE(tokens2.is_ok());
  EXPECT_EQ(static_cast<int64_t>(tokens2->size()), r2["usage"]["prompt_tokens"].get<int64_t>());
  t.tokens = *tokens2;
  t.gen_tokens = 8;
  auto rec2 = cluster_->run_turn(t);
  ASSERT_TRUE(rec2.is_ok()) << rec2.status().to_string();
  TokenTextStream s2;
  std::string want2;
  for (int32_t tok : rec2->output_tokens) {
    if (tok == SpecialTokens::kEnd) break;
    want2 += s2.push(std::span<const int32_t>(&tok, 1));
  }
  want2 += s2.finish();
  EXPECT_EQ(r2["choices"][0]["message"]["content"].get<std::string>(), want2);
}

// Sampling: the tokens depend on the seed and the position only, so the read path the KV came by
// changes nothing, and the same seed through the API gives the same reply.
TEST_F(HttpApiTest, SampledTurnsDependOnTheSeedAndNotOnTheReadPath) {
  auto tokens = chat_prompt(ByteTokenizer(),
                            std::vector<ChatMessage>{{"user", std::string(400, 's') + "?"}}, nullptr);
  ASSERT_TRUE(tokens.is_ok());
  auto run = [&](sched::ReadPath path, uint64_t seed) {
    TurnRequest t;
    t.tokens = *tokens;
    t.gen_tokens = 24;
    t.path = path;
    t.sampling = {0.9, 0.95, 0, seed};
    auto r = cluster_->run_turn(t);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? r->output_tokens : std::vector<int32_t>{};
  };
  const auto recompute = run(sched::ReadPath::kRecompute, 11);
  ASSERT_EQ(recompute.size(), 24u);
  EXPECT_EQ(run(sched::ReadPath::kPe, 11), recompute);
  EXPECT_EQ(run(sched::ReadPath::kDe, 11), recompute);
  EXPECT_NE(run(sched::ReadPath::kPe, 12), recompute);

  auto api = start_api();
  Json body = chat_body({{"user", "Describe the query planner."}}, 32);
  body["temperature"] = 1.0;
  body["top_p"] = 0.9;
  body["seed"] = 5;
  int status = 0;
  Json a = post(*api, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << a.dump();
  Json b = post(*api, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << b.dump();
  EXPECT_EQ(a["choices"][0]["message"]["content"], b["choices"][0]["message"]["content"]);
  body["top_p"] = 1.5;
  Json bad = post(*api, "/v1/chat/completions", body, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(bad["error"]["param"], "top_p");
}

TEST_F(HttpApiTest, StreamingGivesTheSameTextAsOneResponseThenUsageAndDone) {
  auto api = start_api();
  // Long enough (two blocks) for the streamed repeat to hit what the first request stored.
  Json body = chat_body({{"system", "stream test"}, {"user", std::string(140, 's')}}, 20);
  int status = 0;
  Json whole = post(*api, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto events = stream(*api, "/v1/chat/completions", body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  std::string finish;
  Json usage;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json c = Json::parse(events[i]);
    ASSERT_FALSE(c.is_discarded()) << events[i];
    ASSERT_FALSE(c.contains("error")) << events[i];
    if (c.contains("usage")) {
      usage = c["usage"];
      EXPECT_TRUE(c["choices"].empty());
      continue;
    }
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    const Json& ch = c["choices"][0];
    if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  EXPECT_EQ(Json::parse(events[0])["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(text, whole["choices"][0]["message"]["content"]);
  EXPECT_EQ(finish, whole["choices"][0]["finish_reason"]);
  EXPECT_EQ(usage["completion_tokens"], whole["usage"]["completion_tokens"]);
  // The second time, the same prompt hits what the first stored.
  EXPECT_GT(usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
}

TEST_F(HttpApiTest, CompletionsAndStopStrings) {
  auto api = start_api();
  int status = 0;
  Json r = post(*api, "/v1/completions", {{"prompt", "once upon a time"}, {"max_tokens", 16}},
                &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["object"], "text_completion");
  const std::string text = r["choices"][0]["text"];
  ASSERT_FALSE(text.empty());
  // Stop at the reply's first ASCII character after its first byte: the text before it,
  // finish_reason stop.
  size_t at = 1;
  while (at < text.size() && static_cast<unsigned char>(text[at]) >= 0x80) ++at;
  if (at >= text.size()) GTEST_SKIP() << "no ASCII character to stop at in " << text;
  const std::string stop = text.substr(at, 1);
  Json s = post(*api, "/v1/completions",
                {{"prompt", "once upon a time"}, {"max_tokens", 16}, {"stop", stop}}, &status);
  ASSERT_EQ(status, 200);
  const std::string cut = s["choices"][0]["text"];
  EXPECT_EQ(cut, text.substr(0, text.find(stop)));
  EXPECT_EQ(s["choices"][0]["finish_reason"], "stop");
  // The stop ends the decode too, not only the reply: far fewer than 600 tokens are decoded,
  // streaming or not, and the streamed text is the same.
  Json body = {{"prompt", "once upon a time"}, {"max_tokens", 600}, {"stop", stop}};
  Json long_stop = post(*api, "/v1/completions", body, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(long_stop["choices"][0]["text"], cut);
  EXPECT_LT(long_stop["dualpath"]["decoded_tokens"].get<int64_t>(), 100) << long_stop.dump();
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  std::string streamed;
  int64_t decoded = -1;
  for (const std::string& ev : stream(*api, "/v1/completions", body)) {
    Json c = Json::parse(ev, nullptr, false);
    if (c.is_discarded()) continue;
    if (c.contains("dualpath")) decoded = c["dualpath"]["decoded_tokens"];
    if (!c["choices"].empty()) streamed += c["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(streamed, cut);
  EXPECT_GE(decoded, 1);
  EXPECT_LT(decoded, 100);
}

TEST_F(HttpApiTest, BadRequestsGetOpenAiErrorsAndTheServerGoesOn) {
  ApiOptions o;
  o.max_model_len = 512;
  o.max_body_bytes = 1 << 20;
  auto api = start_api(o);
  httplib::Client cli("127.0.0.1", api->port());
  struct Case {
    std::string body;
    int status;
    std::string param;
  } cases[] = {
      {"{not json", 400, ""},
      {"[1, 2]", 400, ""},
      {R"({"messages": "hi"})", 400, "messages"},
      {R"({"messages": [{"role": 5, "content": "x"}]})", 400, "messages[0]"},
      {R"({"messages": [{"role": "user", "content": 5}]})", 400, "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": -1})", 400, "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1000000000})", 400,
       "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": "ten"})", 400,
       "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 2})", 400, "n"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": 2.5})", 400,
       "temperature"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stream": "yes"})", 400, "stream"},
      {R"({"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]})", 404, "model"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"\xC3\x28\"}]}", 400, ""},
      {R"({"messages": [{"role": "user", "content": ")" + std::string(600, 'x') + R"("}]})", 400,
       "messages"},
      {std::string(2 << 20, ' '), 413, ""},
  };
  for (const Case& c : cases) {
    auto res = cli.Post("/v1/chat/completions", c.body, "application/json");
    ASSERT_TRUE(res) << c.body.substr(0, 80);
    EXPECT_EQ(res->status, c.status) << c.body.substr(0, 80) << " -> " << res->body;
    Json e = Json::parse(res->body, nullptr, false);
    ASSERT_TRUE(e.is_object() && e.contains("error")) << res->body;
    EXPECT_TRUE(e["error"]["message"].is_string());
    EXPECT_TRUE(e["error"]["type"].is_string());
    if (!c.param.empty()) {
      EXPECT_EQ(e["error"]["param"], c.param) << res->body;
    }
  }
  int status = 0;
  Json ok = post(*api, "/v1/chat/completions", chat_body({{"user", "still there?"}}, 4), &status);
  EXPECT_EQ(status, 200) << ok.dump();
}

TEST_F(HttpApiTest, KeysGive401And403AndMetricsNeedTheirScope) {
  TempDir d;
  const std::string path = d.path() + "/keys.toml";
  std::ofstream(path) << "[[keys]]\nname = \"chat\"\nkey = \"chat-key-1\"\nscopes = [\"chat\"]\n"
                         "[[keys]]\nname = \"ops\"\nkey = \"ops-key-1\"\n"
                         "scopes = [\"models\", \"metrics\"]\n";
  auto keys = ApiKeys::load(path);
  ASSERT_TRUE(keys.is_ok());
  ApiOptions o;
  o.keys = std::move(keys).value();
  auto api = start_api(o);
  int status = 0;
  Json body = chat_body({{"user", "keys"}}, 4);
  Json e = post(*api, "/v1/chat/completions", body, &status);
  EXPECT_EQ(status, 401);
  EXPECT_EQ(e["error"]["type"], "authentication_error");
  (void)post(*api, "/v1/chat/completions", body, &status, "ops-key-1");
  EXPECT_EQ(status, 403);
  (void)post(*api, "/v1/chat/completions", body, &status, "chat-key-1");
  EXPECT_EQ(status, 200);
  httplib::Client cli("127.0.0.1", api->port());
  auto models = cli.Get("/v1/models", {{"Authorization", "Bearer chat-key-1"}});
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 403);
  EXPECT_NE(models->body.find("lacks the scope 'models'"), std::string::npos) << models->body;
  EXPECT_EQ(cli.Get("/health")->status, 200);  // open, like vLLM's
  EXPECT_EQ(cli.Get("/metrics")->status, 401);
  auto metrics = cli.Get("/metrics", {{"Authorization", "Bearer ops-key-1"}});
  ASSERT_TRUE(metrics);
  ASSERT_EQ(metrics->status, 200);
  for (const char* name :
       {"dualpath:time_to_first_token_seconds_bucket", "dualpath:prompt_tokens_total",
        "dualpath:generation_tokens_total", "dualpath:prompt_tokens_cached_total",
        "dualpath:requests_total{status=\"200\"} 1", "dualpath:requests_total{status=\"401\"} 2",
        "dualpath:requests_total{status=\"403\"} 2", "dualpath:node_up{node=\"decode1\"",
        "dualpath:storage_read_queue_bytes{node=\"prefill0\"}",
        "dualpath:dram_buffer_used_bytes", "dualpath:e2e_request_latency_seconds_count 1",
        "dualpath:request_migrations_total 0"}) {
    EXPECT_NE(metrics->body.find(name), std::string::npos) << name << "\n" << metrics->body;
  }
}

TEST_F(HttpApiTest, RequestsBeyondTheLimitGet429) {
  ApiOptions o;
  o.max_concurrent = 1;
  auto api = start_api(o);
  // The slow request holds the one slot. Should a fast one take it first, the slow one is
  // refused (429) and tries again, so that the two do overlap: without the retry the slow
  // request could be the one refused, and the fast ones, one at a time, never were (a TSan run).
  std::thread slow([&] {
    int s = 429;
    for (int k = 0; k < 200 && s == 429; ++k) {
      if (k > 0) std::this_thread::sleep_for(10ms);
      (void)post(*api, "/v1/completions", {{"prompt", "slow"}, {"max_tokens", 400}}, &s);
    }
  });
  int status = 0;
  Json e;
  for (int i = 0; i < 200 && status != 429; ++i) {
    std::this_thread::sleep_for(10ms);
    e = post(*api, "/v1/completions", {{"prompt", "fast"}, {"max_tokens", 1}}, &status);
  }
  EXPECT_EQ(status, 429) << e.dump();
  EXPECT_EQ(e["error"]["type"], "rate_limit_error");
  slow.join();
}

// A client that hangs up mid-stream: its turn is cancelled and both nodes free its buffers.
TEST_F(HttpApiTest, AClientThatHangsUpMidStreamHasItsTurnCancelled) {
  auto api = start_api();
  Json body = {{"prompt", std::string(200, 'z')}, {"max_tokens", 2000}, {"stream", true}};
  const auto t0 = std::chrono::steady_clock::now();
  auto events = stream(*api, "/v1/completions", body, /*stop_after=*/2);
  EXPECT_EQ(events.size(), 2u);
  // The nodes report no request state and no buffer in use within a few report intervals.
  bool freed = false;
  for (int i = 0; i < 200 && !freed; ++i) {
    std::this_thread::sleep_for(50ms);
    freed = true;
    for (const NodeStatus& n : cluster_->service().nodes()) {
      freed = freed && n.report.requests == 0 && n.report.dram_used_bytes == 0;
    }
  }
  EXPECT_TRUE(freed);
  // Well before 2000 tokens would have been decoded.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60);
  httplib::Client cli("127.0.0.1", api->port());
  std::string text;
  for (int i = 0; i < 100; ++i) {
    text = cli.Get("/metrics")->body;
    if (text.find("dualpath:requests_total{status=\"cancelled\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_NE(text.find("dualpath:requests_total{status=\"cancelled\"} 1"), std::string::npos);
}

// Whether every node reports no request, no DRAM buffer and no HBM in use.
bool nodes_idle(Cluster& c) {
  for (const NodeStatus& n : c.service().nodes()) {
    uint64_t hbm = 0;
    for (uint64_t h : n.report.hbm_used_bytes) hbm += h;
    if (n.report.requests != 0 || n.report.dram_used_bytes != 0 || hbm != 0) return false;
  }
  return true;
}

// Waits (polling the nodes' load reports) until `pred`, at most `limit`; the time it took.
template <class Pred>
std::optional<std::chrono::milliseconds> wait_until(Pred pred, std::chrono::milliseconds limit) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < limit) {
    if (pred()) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - t0);
    }
    std::this_thread::sleep_for(10ms);
  }
  return std::nullopt;
}

// A non-streaming request whose client hangs up is cancelled as a stream's is: the server sees
// the socket's FIN while the turn runs (issue 32), cancels the turn, and both nodes free its
// buffers within a report interval or two.
TEST_F(HttpApiTest, AClientThatHangsUpOnANonStreamingRequestHasItsTurnCancelled) {
  auto api = start_api();
  ASSERT_TRUE(nodes_idle(*cluster_) || wait_until([&] { return nodes_idle(*cluster_); }, 5000ms));
  const std::string body = Json{{"prompt", std::string(200, 'h')}, {"max_tokens", 2000}}.dump();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(api->port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const std::string req = fmt::format(
      "POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: "
      "{}\r\n\r\n{}",
      body.size(), body);
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  // The turn is running once a node reports it.
  ASSERT_TRUE(wait_until([&] { return !nodes_idle(*cluster_); }, 30000ms))
      << "the turn never showed in the nodes' reports";
  ::close(fd);  // hangs up, with the answer still 2000 tokens away
  const auto freed = wait_until([&] { return nodes_idle(*cluster_); }, 5000ms);
  ASSERT_TRUE(freed) << "a node still holds the turn's buffers 5 s after the hang-up";
  const auto report = cluster_->service().config().scheduler.report_interval;
  std::printf(
      "hang-up to every node reporting its buffers free: %lld ms (report interval %lld ms)\n",
      static_cast<long long>(freed->count()),
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(report).count()));
  httplib::Client cli("127.0.0.1", api->port());
  EXPECT_TRUE(wait_until(
      [&] {
        auto m = cli.Get("/metrics");
        return m &&
               m->body.find("dualpath:requests_total{status=\"cancelled\"} 1") != std::string::npos;
      },
      5000ms));
}

// --request-timeout: a request past it gets 504 and its turn is cancelled on both nodes.
TEST_F(HttpApiTest, ARequestPastItsTimeoutGets504AndItsTurnIsCancelled) {
  ApiOptions o;
  o.request_timeout = std::chrono::seconds(1);
  auto api = start_api(o);
  int status = 0;
  const auto t0 = std::chrono::steady_clock::now();
  Json e = post(*api, "/v1/completions", {{"prompt", std::string(100, 't')}, {"max_tokens", 3000}},
                &status);
  EXPECT_EQ(status, 504) << e.dump();
  EXPECT_EQ(e["error"]["code"], "request_timeout");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s) << "not cut at its deadline";
  EXPECT_TRUE(wait_until([&] { return nodes_idle(*cluster_); }, 5000ms));
  // A stream past its deadline ends with an error event, then [DONE].
  auto events = stream(*api, "/v1/completions",
                       {{"prompt", std::string(100, 'u')}, {"max_tokens", 3000}, {"stream", true}});
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  Json err = Json::parse(events[events.size() - 2], nullptr, false);
  EXPECT_EQ(err["error"]["code"], 504) << events[events.size() - 2];
}

// cache_salt and the keys' cache_namespace (issue 32): the same conversation in two namespaces
// shares no cached prefix; within one it hits in full.
TEST_F(HttpApiTest, CacheSaltAndKeyNamespacesKeepTenantsApartAndHitWithinEach) {
  TempDir d;
  const std::string path = d.path() + "/keys.toml";
  std::ofstream(path) << "[[keys]]\nname = \"a\"\nkey = \"tenant-a-key\"\n"
                         "cache_namespace = \"tenant-a\"\nscopes = [\"chat\"]\n"
                         "[[keys]]\nname = \"b\"\nkey = \"tenant-b-key\"\n"
                         "cache_namespace = \"tenant-b\"\nscopes = [\"chat\"]\n"
                         "[[keys]]\nname = \"shared\"\nkey = \"shared-key-1\"\n"
                         "scopes = [\"chat\"]\n";
  auto keys = ApiKeys::load(path);
  ASSERT_TRUE(keys.is_ok()) << keys.status().to_string();
  ApiOptions o;
  o.keys = std::move(keys).value();
  auto api = start_api(o);
  const std::string question = "Tenants. " + std::string(250, 'n');
  int status = 0;
  Json r1 = post(*api, "/v1/chat/completions", chat_body({{"user", question}}, 16), &status,
                 "tenant-a-key");
  ASSERT_EQ(status, 200) << r1.dump();
  const int64_t stored = (r1["usage"]["prompt_tokens"].get<int64_t>() +
                          r1["usage"]["completion_tokens"].get<int64_t>() - 1) /
                         64 * 64;
  const Json turn2 = chat_body(
      {{"user", question}, {"assistant", r1["choices"][0]["message"]["content"]}, {"user", "more"}},
      4);
  auto cached = [&](const std::string& key, const std::string& salt) {
    Json b = turn2;
    if (!salt.empty()) b["cache_salt"] = salt;
    Json r = post(*api, "/v1/chat/completions", b, &status, key);
    EXPECT_EQ(status, 200) << r.dump();
    return r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  };
  EXPECT_EQ(cached("tenant-b-key", ""), 0);
  EXPECT_EQ(cached("shared-key-1", ""), 0);
  EXPECT_EQ(cached("tenant-a-key", "x"), 0);  // a salt within a key's namespace is another one
  EXPECT_GE(cached("tenant-a-key", ""), stored);
  // The salt alone, on the shared key: its own namespace too.
  Json s1 = chat_body({{"user", question + " salted"}}, 16);
  s1["cache_salt"] = "s1";
  Json rs = post(*api, "/v1/chat/completions", s1, &status, "shared-key-1");
  ASSERT_EQ(status, 200);
  Json s2 = chat_body({{"user", question + " salted"},
                       {"assistant", rs["choices"][0]["message"]["content"]},
                       {"user", "more"}},
                      4);
  s2["cache_salt"] = "s2";
  Json other = post(*api, "/v1/chat/completions", s2, &status, "shared-key-1");
  EXPECT_EQ(other["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  s2["cache_salt"] = "s1";
  Json same = post(*api, "/v1/chat/completions", s2, &status, "shared-key-1");
  EXPECT_GE(same["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 256);
}

// An agent's turn through the cluster with the hermes parser on: tools, a tool-call history and
// content parts are rendered, the (byte model's) reply is served as text, and the next turn hits
// this one's prompt and reply, streamed or not.
TEST_F(HttpApiTest, AnAgentConversationWithToolsIsServedAndItsNextTurnHits) {
  ApiOptions o;
  o.tool_call_parser = "hermes";
  auto api = start_api(o);
  Json messages = Json::parse(R"([
      {"role": "system", "content": "Agent test."},
      {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "-3 C, snow"}])");
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  Json body = {{"model", "tiny"},
               {"messages", messages},
               {"tools", tools},
               {"max_tokens", 16},
               {"temperature", 0}};
  int status = 0;
  Json r1 = post(*api, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << r1.dump();
  const int64_t p1 = r1["usage"]["prompt_tokens"], c1 = r1["usage"]["completion_tokens"];
  EXPECT_GT(p1, 600);  // the tools block and the call are in the prompt
  messages.push_back(r1["choices"][0]["message"]);
  messages.push_back({{"role", "user"}, {"content", "And tomorrow?"}});
  body["messages"] = messages;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  Json usage;
  for (const std::string& ev : stream(*api, "/v1/chat/completions", body)) {
    Json c = Json::parse(ev, nullptr, false);
    if (c.is_object() && c.contains("usage")) usage = c["usage"];
  }
  ASSERT_TRUE(usage.is_object());
  EXPECT_GE(usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>(),
            (p1 + c1 - 1) / 64 * 64);
}

// `serve --model DIR`: a Hugging Face llama checkpoint with its tokenizer.model, served through
// the API. The nodes run the checkpoint's weights, the API tokenizes with its SentencePiece
// model in the Llama 2 chat layout, and a conversation's turns hit each other's KV.
class HttpApiCheckpointTest : public HttpApiTest {
 protected:
  static void SetUpTestSuite() {
    ckpt_dir_ = new TempDir;
    ckpt_ = ckpt_dir_->sub("my-llama");
    auto w = testing::write_test_checkpoint(ckpt_);
    ASSERT_TRUE(w.is_ok()) << w.status().to_string();
    weights_ = new std::shared_ptr<const compute::CpuWeights>(*w);
    ClusterOptions o = test_cluster(ckpt_dir_->sub("store"), 1);
    o.config.engine.weights = ckpt_;
    auto c = Cluster::start(o);
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    ckpt_cluster_ = c->release();
  }
  static void TearDownTestSuite() {
    delete ckpt_cluster_;
    delete weights_;
    delete ckpt_dir_;
  }
  // The reply the checkpoint's weights give in this process, as the API would write it.
  static std::string greedy_reply(const Tokenizer& tok, const std::vector<int32_t>& prompt,
                                  int64_t n, bool chat) {
    const compute::CpuModel model(*weights_);
    const auto out = compute::testing::greedy_generate(model, prompt, n, tok.eos());
    TokenTextStream s(tok, chat);
    std::string text = s.push(out);
    return text + s.finish();
  }
  static inline TempDir* ckpt_dir_ = nullptr;
  static inline std::string ckpt_;
  static inline std::shared_ptr<const compute::CpuWeights>* weights_ = nullptr;
  static inline Cluster* ckpt_cluster_ = nullptr;
};

TEST_F(HttpApiCheckpointTest, TurnsGiveTheCheckpointsGreedyTextAndHitEachOther) {
  ASSERT_NE(ckpt_cluster_, nullptr);
  ApiOptions o;
  o.port = 0;
  auto started = HttpApi::start(o, ckpt_cluster_->service());
  ASSERT_TRUE(started.is_ok()) << started.status().to_string();
  HttpApi& api = **started;
  EXPECT_EQ(api.model_name(), "my-llama");  // the directory's name
  auto tok = tokenizer_for(ckpt_cluster_->service().config().engine);
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  EXPECT_NE((*tok)->describe().find("sentencepiece"), std::string::npos);

  httplib::Client cli("127.0.0.1", api.port());
  auto models = cli.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(Json::parse(models->body)["data"][0]["id"], "my-llama");

  std::string question;
  for (int i = 0; i < 12; ++i) question += "The query planner chooses an index for each table. ";
  auto body = [](const std::vector<std::pair<std::string, std::string>>& msgs, int max_tokens) {
    Json b = chat_body(msgs, max_tokens);
    b["model"] = "my-llama";
    return b;
  };
  int status = 0;
  Json r1 = post(api, "/v1/chat/completions", body({{"user", question}}, 24), &status);
  ASSERT_EQ(status, 200) << r1.dump();
  const std::string reply = r1["choices"][0]["message"]["content"];
  auto p1 = chat_prompt(**tok, std::vector<ChatMessage>{{"user", question}}, nullptr);
  ASSERT_TRUE(p1.is_ok());
  EXPECT_EQ(r1["usage"]["prompt_tokens"].get<int64_t>(), static_cast<int64_t>(p1->size()));
  EXPECT_EQ(reply, greedy_reply(**tok, *p1, 24, /*chat=*/true));
  const int64_t c1 = r1["usage"]["completion_tokens"];

  const std::vector<std::pair<std::string, std::string>> conv = {
      {"user", question}, {"assistant", reply}, {"user", "Which rows does it read from disk?"}};
  Json r2 = post(api, "/v1/chat/completions", body(conv, 16), &status);
  ASSERT_EQ(status, 200) << r2.dump();
  const int64_t block = ckpt_cluster_->service().config().engine.block_tokens;
  const int64_t cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GE(cached, (static_cast<int64_t>(p1->size()) + c1) / block * block) << r2.dump();
  EXPECT_GT(cached, 0);
  std::vector<ChatMessage> msgs;
  for (const auto& [role, content] : conv) msgs.push_back({role, content});
  auto p2 = chat_prompt(**tok, msgs, &api.memo());
  ASSERT_TRUE(p2.is_ok());
  EXPECT_EQ(r2["usage"]["prompt_tokens"].get<int64_t>(), static_cast<int64_t>(p2->size()));
  const std::string reply2 = r2["choices"][0]["message"]["content"];
  EXPECT_EQ(reply2, greedy_reply(**tok, *p2, 16, true));
  std::printf("checkpoint: turn 1 prompt %zu + reply %lld tokens \"%s\"; turn 2 cached %lld: \"%s\"\n",
              p1->size(), static_cast<long long>(c1), reply.c_str(),
              static_cast<long long>(cached), reply2.c_str());
  EXPECT_FALSE(reply.empty());  // random weights, but not an EOS at once: the text is compared

  // The same turn streamed: the same text, and it hits what the non-streamed one stored.
  Json sb = body(conv, 16);
  sb["stream"] = true;
  sb["stream_options"] = {{"include_usage", true}};
  std::string streamed;
  Json usage;
  for (const std::string& ev : stream(api, "/v1/chat/completions", sb)) {
    if (ev == "[DONE]") break;
    Json c = Json::parse(ev);
    if (c.contains("usage") && !c["usage"].is_null()) usage = c["usage"];
    if (!c["choices"].empty() && c["choices"][0]["delta"].contains("content")) {
      streamed += c["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  EXPECT_EQ(streamed, reply2);
  EXPECT_GE(usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), cached);

  // A completion continues the prompt's text: its first word keeps its space.
  Json rc = post(api, "/v1/completions",
                 {{"model", "my-llama"}, {"prompt", question}, {"max_tokens", 12},
                  {"temperature", 0}},
                 &status);
  ASSERT_EQ(status, 200) << rc.dump();
  EXPECT_EQ(rc["choices"][0]["text"].get<std::string>(),
            greedy_reply(**tok, completion_prompt(**tok, question), 12, /*chat=*/false));
}

TEST(TokenizerFor, ACheckpointWithoutItsTokenizerOrWithAnotherOneIsRefused) {
  TempDir dir;
  const std::string ckpt = dir.sub("ckpt");
  engine::EngineConfig e;
  e.model = "tiny";
  e.weights = ckpt;
  auto write_config = [&](int vocab) {
    std::ofstream(ckpt + "/config.json")
        << R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
               "vocab_size": )"
        << vocab << "}";
  };
  write_config(512);
  auto none = tokenizer_for(e);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find(ckpt + "/tokenizer.model"), std::string::npos)
      << none.status().to_string();
  ASSERT_TRUE(testing::train_test_tokenizer(ckpt).is_ok());
  write_config(300);  // fewer ids than the tokenizer's pieces
  auto other = tokenizer_for(e);
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.status().message().find("vocab_size = 300"), std::string::npos)
      << other.status().to_string();
  write_config(512);
  EXPECT_TRUE(tokenizer_for(e).is_ok());
}

}  // namespace
}  // namespace dualpath::serve
