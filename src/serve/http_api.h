#pragma once
// HttpApi: the OpenAI-compatible API of `dualpath serve` (docs/api.md), an HttpHandler on
// HttpServer (http_server.h: Boost.Beast; this file and http_api.cc include no Beast).
//
//   GET  /v1/models                 scope models
//   POST /v1/chat/completions       scope chat         (stream: SSE chunks, then data: [DONE])
//   POST /v1/completions            scope completions
//   GET  /health                    open: 200 when every node of the config is up, else 503
//   GET  /version                   open
//   GET  /metrics                   scope metrics (Prometheus text; open without keys)
//   GET  /dashboard                 scope metrics (the live page, dashboard.h; it reads /metrics)
//   (both also take the key as HTTP Basic's password: a browser sends it so; api_keys.h)
//
// Every turn goes to TurnService::run_turn (SchedulerService's, which places it with the central
// scheduler). A conversation's turns hit each other's KV: the chat template keeps earlier turns'
// tokens stable and the reply memo splices generated replies back as their tokens
// (serve/tokenizer.h), tools and tool calls included (chat_template.h); a turn hits only blocks
// of its own cache namespace (the key's cache_namespace and the request's cache_salt).
// Errors have OpenAI's shape {"error": {"message", "type", "param", "code"}}; docs/api.md lists
// every status. Every string that came from the client is serialised with U+FFFD for invalid
// UTF-8, never with a throwing dump, and invalid UTF-8 in the path, a header or the body is a
// 400 naming where.
//
// Threads: check_head and handle run on the server's I/O threads and do not block: routing,
// keys, the quick endpoints, admission (--max-concurrent, 429 beyond). A turn runs on the
// server's handler pool (max_concurrent threads); its tokens arrive on a node link's reader
// thread, which hands them to the connection's strand (HttpExchange::write) and never waits on
// a client. A client that hangs up, or a request past --request-timeout, cancels its turn on
// both nodes. start() and the destructor from one thread; the rest is thread-safe.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dualpath/result.h"
#include "serve/api_keys.h"
#include "serve/api_metrics.h"
#include "serve/http_server.h"
#include "serve/scheduler_service.h"
#include "serve/tokenizer.h"

namespace dualpath::serve {

// What the API needs of the control plane: SchedulerService in `serve`; in the fuzzer, a stub
// that answers without nodes. Thread-safe; run_turn blocks.
class TurnService {
 public:
  virtual ~TurnService() = default;
  virtual Result<TurnResult> run_turn(TurnRequest request) = 0;
  virtual std::vector<NodeStatus> nodes() const = 0;
  virtual bool ready() const = 0;
  virtual const ServeConfig& config() const = 0;
};

struct ApiOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                // 0: any free port (tests)
  std::string served_model_name;  // empty: the config's model preset
  std::shared_ptr<ApiKeys> keys;  // null: no keys (loopback only; refused elsewhere by serve)
  int max_concurrent = 128;       // turns in flight; more get 429
  int64_t max_model_len = 16384;  // prompt + output tokens
  int64_t default_max_tokens = 64;
  size_t max_body_bytes = size_t{8} << 20;  // 413
  // A request's overall deadline, from its body's end to its answer's: 504, its turn cancelled.
  // 0: none.
  std::chrono::seconds request_timeout{600};
  int max_connections = 1024;
  // Both or neither: HTTPS.
  std::string ssl_certfile;
  std::string ssl_keyfile;
  // "hermes": replies with <tool_call> blocks carry tool_calls (vLLM's flag); "": never parsed.
  std::string tool_call_parser;
  // The transport's other bounds (header size and count, header, body, idle and write
  // timeouts); max_body_bytes and request_timeout above override its fields of those names.
  HttpLimits limits;
  // null: the config's model's (tokenizer_for): a checkpoint's tokenizer.model, else bytes.
  std::shared_ptr<const Tokenizer> tokenizer;
};

// The tokenizer of the model `engine` runs: a checkpoint directory's tokenizer.model (its
// pieces must fit the checkpoint's vocab_size), else the built-in models' ByteTokenizer.
// Errors name the file and the fix.
Result<std::shared_ptr<const Tokenizer>> tokenizer_for(const engine::EngineConfig& engine);

// The cache namespace of a turn (store/block_key.h): "" when the key has none and the request
// no cache_salt (the shared default chain), else the hex SHA-256 of both, length-prefixed so that
// no pair reads as another.
std::string turn_cache_namespace(std::string_view key_namespace, std::string_view cache_salt);

class HttpApi final : public HttpHandler {
 public:
  // Serves on `socket`, or binds options.host:port (kUnavailable naming the address and the
  // flag to change if it cannot).
  static Result<std::unique_ptr<HttpApi>> start(ApiOptions options,
                                                SchedulerService& service,
                                                std::optional<ListeningSocket> socket = {});
  static Result<std::unique_ptr<HttpApi>> start(ApiOptions options,
                                                TurnService& service,
                                                std::optional<ListeningSocket> socket = {});
  // The handler alone, serving nothing (the fuzzer and framing tests drive it through
  // replay_http_connection).
  static Result<std::unique_ptr<HttpApi>> create(ApiOptions options, TurnService& service);
  // Stops the server first: requests in flight are abandoned and their turns cancelled.
  ~HttpApi() override;
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  int port() const { return server_ ? server_->port() : 0; }
  bool tls() const { return server_ && server_->tls(); }
  const std::string& model_name() const { return options_.served_model_name; }
  // Rereads the key file (SIGHUP); the old keys stay on error.
  Status reload_keys();
  ReplyMemo& memo() { return memo_; }
  const HttpLimits& limits() const { return limits_; }

  // HttpHandler (http_server.h): on the server's I/O threads.
  std::optional<HttpResponse> check_head(const HttpRequest& head) override;
  void handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override;
  HttpResponse protocol_error(int status, const std::string& message) override;

  struct Route;  // the route table's rows (http_api.cc)

 private:
  struct Completion;
  HttpApi(ApiOptions options, TurnService& service);
  static Result<std::unique_ptr<HttpApi>> make(ApiOptions options,
                                               TurnService& service,
                                               std::unique_ptr<TurnService> owned);
  Status serve(std::optional<ListeningSocket> socket);
  // The route of a request, or the error that refuses it (bad path, no route, wrong method).
  std::variant<const Route*, HttpResponse> route(const HttpRequest& head);
  std::optional<HttpResponse> authorize(const HttpRequest& req,
                                        const Route& r,
                                        std::string* key_namespace);
  HttpResponse error(int status,
                     std::string_view type,
                     const std::string& message,
                     const std::string& param = "",
                     const std::string& code = "");
  HttpResponse health();
  HttpResponse models();
  // On the handler pool: one chat or completion request, from its body to its answer.
  void completion(const HttpRequest& req,
                  HttpExchange& exchange,
                  bool chat,
                  const std::string& key_namespace);
  std::string next_tool_call_id();

  ApiOptions options_;
  HttpLimits limits_;
  std::unique_ptr<TurnService> owned_service_;  // the adapter when started on SchedulerService
  TurnService& service_;
  std::shared_ptr<const Tokenizer> tokenizer_;  // the served model's (tokenizer_for)
  ReplyMemo memo_;
  ApiMetrics metrics_;
  std::atomic<int> in_flight_{0};     // relaxed: an admission count
  std::atomic<uint64_t> next_id_{1};  // relaxed: distinct response and tool call ids
  uint64_t id_salt_ = 0;              // random per process: tool call ids differ across restarts
  // Last: destroyed first, while everything its handlers use is still there.
  std::unique_ptr<HttpServer> server_;
};

}  // namespace dualpath::serve
