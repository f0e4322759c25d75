#pragma once
// HttpApi: the OpenAI-compatible HTTP front of `dualpath serve` (cpp-httplib; docs/api.md).
//
//   GET  /v1/models                 scope models
//   POST /v1/chat/completions       scope chat         (stream: SSE chunks, then data: [DONE])
//   POST /v1/completions            scope completions
//   GET  /health                    open: 200 when every node of the config is up, else 503
//   GET  /version                   open
//   GET  /metrics                   scope metrics (Prometheus text; open without keys)
//
// Every turn goes to SchedulerService::run_turn, which places it with the central scheduler.
// A conversation's turns hit each other's KV: the chat template keeps earlier turns' tokens
// stable and the reply memo splices generated replies back as their tokens (serve/tokenizer.h).
// Errors have OpenAI's shape {"error": {"message", "type", "param", "code"}} and status: 400 bad
// request, 401/403 keys, 404 unknown model or route, 413 body too large, 429 too many requests
// in flight, 503 nodes down, 500 only for our bugs.
//
// Threads: an accept thread (httplib's listen loop) and a pool of max_concurrent + 8 request
// threads; a streaming request runs its turn on one more thread while its pool thread writes
// the stream; a client that goes away mid-stream cancels its turn (both nodes free its buffers).
// start() and the destructor from one thread; the rest is thread-safe.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "dualpath/result.h"
#include "serve/api_keys.h"
#include "serve/api_metrics.h"
#include "serve/scheduler_service.h"
#include "serve/tokenizer.h"

namespace httplib {
class Server;
class Request;
class Response;
}  // namespace httplib

namespace dualpath::serve {

struct ApiOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (tests)
  std::string served_model_name;  // empty: the config's model preset
  std::shared_ptr<ApiKeys> keys;  // null: no keys (loopback only; refused elsewhere by serve)
  int max_concurrent = 128;       // turns in flight; more get 429
  int64_t max_model_len = 16384;  // prompt + output tokens
  int64_t default_max_tokens = 64;
  size_t max_body_bytes = 8u << 20;
  // null: the config's model's (tokenizer_for): a checkpoint's tokenizer.model, else bytes.
  std::shared_ptr<const Tokenizer> tokenizer;
};

// The tokenizer of the model `engine` runs: a checkpoint directory's tokenizer.model (its
// pieces must fit the checkpoint's vocab_size), else the built-in models' ByteTokenizer.
// Errors name the file and the fix.
Result<std::shared_ptr<const Tokenizer>> tokenizer_for(const engine::EngineConfig& engine);

class HttpApi {
 public:
  // Binds host:port (kUnavailable naming the address if it cannot) and serves.
  static Result<std::unique_ptr<HttpApi>> start(ApiOptions options, SchedulerService& service);
  ~HttpApi();
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  int port() const { return port_; }
  const std::string& model_name() const { return options_.served_model_name; }
  // Rereads the key file (SIGHUP); the old keys stay on error.
  Status reload_keys();
  ReplyMemo& memo() { return memo_; }

 private:
  HttpApi(ApiOptions options, SchedulerService& service);
  void routes();
  bool authorized(const httplib::Request& req, httplib::Response& res, Scope scope);
  void completion(const httplib::Request& req, httplib::Response& res, bool chat);

  ApiOptions options_;
  SchedulerService& service_;
  std::shared_ptr<const Tokenizer> tokenizer_;  // the served model's (tokenizer_for)
  ReplyMemo memo_;
  ApiMetrics metrics_;
  std::unique_ptr<httplib::Server> server_;
  std::thread listen_thread_;
  std::atomic<bool> listen_done_{false};  // release when the listen loop returns
  int port_ = 0;
  std::atomic<int> in_flight_{0};           // relaxed: an admission count
  std::atomic<uint64_t> next_id_{1};        // relaxed: distinct response ids
};

}  // namespace dualpath::serve
