#include "serve/http_api.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "serve/completion_request.h"

namespace dualpath::serve {

using Json = nlohmann::json;
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kVersion = "0.1.0";

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

// OpenAI's error object, with the status it goes with.
void send_error(httplib::Response& res, int status, std::string_view type, const std::string& message,
                const std::string& param = "", const std::string& code = "") {
  Json e = {{"message", message},
            {"type", type},
            {"param", param.empty() ? Json(nullptr) : Json(param)},
            {"code", code.empty() ? Json(nullptr) : Json(code)}};
  res.status = status;
  res.set_content(Json{{"error", e}}.dump(), "application/json");
}

// Holds back text that could be the start of a stop string, and cuts at the first one.
class StopScanner {
 public:
  explicit StopScanner(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  bool stopped() const { return stopped_; }

  std::string push(std::string_view text) {
    if (stopped_) return {};
    held_ += text;
    size_t cut = std::string::npos;
    for (const std::string& s : stops_) cut = std::min(cut, held_.find(s));
    if (cut != std::string::npos) {
      stopped_ = true;
      std::string out = held_.substr(0, cut);
      held_.clear();
      return out;
    }
    size_t keep = 0;
    for (const std::string& s : stops_) {
      for (size_t l = std::min(s.size() - 1, held_.size()); l > keep; --l) {
        if (held_.compare(held_.size() - l, l, s, 0, l) == 0) {
          keep = l;
          break;
        }
      }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }
  std::string finish() {
    std::string out = stopped_ ? std::string() : std::move(held_);
    held_.clear();
    return out;
  }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

// Turns output tokens into the reply: text deltas, the end of the reply (EOS or a stop string)
// and the tokens that made it.
class ReplyBuilder {
 public:
  // `chat`: the reply is a chat message (TokenTextStream).
  ReplyBuilder(const Tokenizer& tok, bool chat, std::vector<std::string> stops)
      : tok_(tok), chat_(chat), text_(tok, chat), stop_(std::move(stops)) {}

  // The text to send for these tokens (possibly empty).
  std::string feed(std::span<const int32_t> tokens) {
    std::string delta;
    for (int32_t t : tokens) {
      if (done_) break;
      ++completion_tokens_;
      if (t == tok_.eos()) {
        done_ = true;
        finish_reason_ = "stop";
        delta += stop_.push(text_.finish());
        delta += stop_.finish();
        break;
      }
      accepted_.push_back(t);
      delta += stop_.push(text_.push(std::span<const int32_t>(&t, 1)));
      if (stop_.stopped()) {
        done_ = true;
        finish_reason_ = "stop";
      }
    }
    reply_ += delta;
    return delta;
  }
  // At the end of the output: what was held back.
  std::string finish() {
    if (done_) return {};
    done_ = true;
    std::string delta = stop_.push(text_.finish());
    delta += stop_.finish();
    reply_ += delta;
    return delta;
  }
  bool done() const { return done_; }
  const std::string& finish_reason() const { return finish_reason_; }
  int64_t completion_tokens() const { return completion_tokens_; }
  const std::string& reply() const { return reply_; }
  // The generated tokens whose text is exactly the reply (for the memo): all of them unless a
  // stop string cut the reply, else the longest prefix that decodes to it; nullopt if none does.
  std::optional<std::vector<int32_t>> reply_tokens() const {
    TokenTextStream s(tok_, chat_);
    std::string acc;
    std::optional<size_t> best;
    if (reply_.empty()) best = 0;
    for (size_t k = 0; k < accepted_.size() && acc.size() <= reply_.size(); ++k) {
      acc += s.push(std::span<const int32_t>(&accepted_[k], 1));
      TokenTextStream rest = s;  // what a finish here would add (a held, incomplete character)
      if (acc.size() <= reply_.size() && acc + rest.finish() == reply_) best = k + 1;
    }
    if (!best) return std::nullopt;
    return std::vector<int32_t>(accepted_.begin(), accepted_.begin() + static_cast<long>(*best));
  }

 private:
  const Tokenizer& tok_;
  const bool chat_;
  TokenTextStream text_;
  StopScanner stop_;
  std::vector<int32_t> accepted_;
  std::string reply_;
  std::string finish_reason_ = "length";
  int64_t completion_tokens_ = 0;
  bool done_ = false;
};

Json usage_json(const TurnResult& r, int64_t completion_tokens) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", r.prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", r.hit_tokens}}}};
}

Json dualpath_json(const TurnResult& r) {
  return {{"read_path", std::string(sched::read_path_name(r.path))},
          {"hit_tokens", r.hit_tokens},
          {"storage_read_bytes", r.bytes.storage_read},
          {"pe_read_bytes", r.pe_read_bytes},
          {"de_read_bytes", r.de_read_bytes},
          {"ttft_ms", r.ttft_s * 1e3},
          {"queue_ms", r.queue_s * 1e3},
          {"prefill_node", node_label(r.pe)},
          {"decode_node", node_label(r.de)},
          {"attempts", r.attempts},
          {"migrated", r.migrated},
          // Tokens the decode ran (past the reply's end when a stop came between token events).
          {"decoded_tokens", static_cast<int64_t>(r.output_tokens.size())}};
}

// The HTTP status and OpenAI error type of a turn that failed.
std::pair<int, const char*> turn_error(const Status& s) {
  if (s.is_unavailable() || s.is_timed_out() || s.is_resource_exhausted()) {
    return {503, "service_unavailable"};
  }
  if (s.is_invalid_argument()) return {400, "invalid_request_error"};
  return {500, "internal_error"};
}

// Decrements the in-flight count when the request is over.
struct InFlight {
  explicit InFlight(std::atomic<int>& n) : n_(n) {}
  ~InFlight() { n_.fetch_sub(1, std::memory_order_relaxed); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  std::atomic<int>& n_;
};

// A streaming request's shared state: the turn runs on `runner`, tokens arrive on a link's
// reader thread, the pool thread writes them.
struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> pending;                     // guarded by mu
  bool finished = false;                            // guarded by mu
  std::optional<Result<TurnResult>> result;         // guarded by mu
  std::shared_ptr<TurnCancel> cancel;  // the turn's
  std::thread runner;
  std::unique_ptr<InFlight> in_flight;
  Clock::time_point arrived;
  std::unique_ptr<ReplyBuilder> reply;
  std::vector<int32_t> prompt;  // the turn's (the memo's key)
  bool counted = false;  // the request's outcome went to the metrics
};

}  // namespace

HttpApi::HttpApi(ApiOptions options, SchedulerService& service)
    : options_(std::move(options)), service_(service), tokenizer_(options_.tokenizer) {}

Result<std::shared_ptr<const Tokenizer>> tokenizer_for(const engine::EngineConfig& engine) {
  const engine::BackendSpec spec = engine.backend_spec();
  DP_ASSIGN_OR_RETURN(const engine::ModelKvShape shape, engine::model_kv_shape(engine));
  if (!spec.is_checkpoint()) {
    if (shape.vocab < SpecialTokens::kCount) {
      return Status::invalid_argument(fmt::format(
          "model {} has a vocabulary of {}: the byte tokenizer needs {} ids", engine.model,
          shape.vocab, SpecialTokens::kCount));
    }
    return std::shared_ptr<const Tokenizer>(std::shared_ptr<const Tokenizer>{}, &byte_tokenizer());
  }
  const std::string path = (std::filesystem::path(spec.weights) / "tokenizer.model").string();
  DP_ASSIGN_OR_RETURN(std::shared_ptr<const Tokenizer> tok, load_sentencepiece(path));
  if (tok->vocab_size() > shape.vocab) {
    return Status::invalid_argument(fmt::format(
        "{} has {} pieces but {}/config.json says vocab_size = {}: the tokenizer is not this "
        "checkpoint's",
        path, tok->vocab_size(), spec.weights, shape.vocab));
  }
  return tok;
}

// The id a checkpoint is served under by default: its directory's name.
std::string default_model_name(const engine::EngineConfig& engine) {
  const engine::BackendSpec spec = engine.backend_spec();
  if (!spec.is_checkpoint()) return engine.model;
  std::filesystem::path dir(spec.weights);
  if (!dir.has_filename()) dir = dir.parent_path();  // "DIR/"
  return dir.filename().string();
}

Result<std::unique_ptr<HttpApi>> HttpApi::start(ApiOptions options, SchedulerService& service) {
  if (options.served_model_name.empty()) {
    options.served_model_name = default_model_name(service.config().engine);
  }
  if (!options.tokenizer) {
    DP_ASSIGN_OR_RETURN(options.tokenizer, tokenizer_for(service.config().engine));
  }
  if (options.max_concurrent < 1) {
    return Status::invalid_argument(fmt::format(
        "api.max_concurrent = {} must be at least 1", options.max_concurrent));
  }
  std::unique_ptr<HttpApi> api(new HttpApi(std::move(options), service));
  api->server_ = std::make_unique<httplib::Server>();
  const size_t threads = static_cast<size_t>(api->options_.max_concurrent) + 8;
  api->server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  api->server_->set_payload_max_length(api->options_.max_body_bytes);
  api->server_->set_read_timeout(std::chrono::seconds(30));
  api->server_->set_write_timeout(std::chrono::seconds(30));
  // Keep-alive: httplib closes a connection after 5 requests by default, and a client that has
  // just sent its next request on it can read EOF instead of a response (hey -z 60 s -c 64: 1
  // of 2,335). Clients such as the OpenAI SDKs and hey keep their connections for the whole run.
  api->server_->set_keep_alive_max_count(100000);
  api->routes();
  const ApiOptions& o = api->options_;
  if (o.port == 0) {
    api->port_ = api->server_->bind_to_any_port(o.host);
    if (api->port_ <= 0) return Status::unavailable(fmt::format("cannot bind {}:0", o.host));
  } else {
    if (!api->server_->bind_to_port(o.host, o.port)) {
      return Status::unavailable(fmt::format(
          "cannot bind the API to {}:{} (in use, or not an address of this host): pick another "
          "--port or --host",
          o.host, o.port));
    }
    api->port_ = o.port;
  }
  httplib::Server* server = api->server_.get();
  std::atomic<bool>* done = &api->listen_done_;
  api->listen_thread_ = std::thread([server, done] {
    server->listen_after_bind();
    done->store(true, std::memory_order_release);
  });
  // httplib's stop() does nothing until the listen loop has started: wait for it, so that a
  // SIGINT right after `ready` cannot leave the destructor joining a loop nobody stops.
  for (int i = 0; i < 5000 && !server->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!server->is_running()) {
    return Status::internal(fmt::format("the API on {}:{} did not start listening", o.host,
                                        api->port_));
  }
  return api;
}

HttpApi::~HttpApi() {
  if (listen_thread_.joinable()) {
    // stop() is a no-op until the listen loop runs, so repeat it until the loop has ended.
    while (!listen_done_.load(std::memory_order_acquire)) {
      server_->stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    listen_thread_.join();
  }
}

Status HttpApi::reload_keys() {
  if (!options_.keys) return Status::ok();
  return options_.keys->reload();
}

bool HttpApi::authorized(const httplib::Request& req, httplib::Response& res, Scope scope) {
  if (!options_.keys) return true;
  AuthResult a = options_.keys->authorize(req.get_header_value("Authorization"), scope);
  if (a.http_status == 200) return true;
  if (a.http_status == 401) {
    send_error(res, 401, "authentication_error", a.message, "", "invalid_api_key");
  } else {
    send_error(res, 403, "permission_error", a.message, "", "insufficient_scope");
  }
  metrics_.count_request(std::to_string(a.http_status));
  return false;
}

void HttpApi::routes() {
  httplib::Server& s = *server_;
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler's own error
    if (res.status == 413) {
      send_error(res, 413, "invalid_request_error",
                 fmt::format("the request body is larger than {} bytes", options_.max_body_bytes));
    } else if (res.status == 404) {
      send_error(res, 404, "invalid_request_error",
                 fmt::format("no route {} {}: see GET /v1/models, POST /v1/chat/completions, "
                             "POST /v1/completions, GET /health, GET /metrics",
                             req.method, req.path),
                 "", "not_found");
    } else {
      send_error(res, res.status, "invalid_request_error", fmt::format("HTTP {}", res.status));
    }
    metrics_.count_request(std::to_string(res.status));
  });
  s.set_exception_handler(
      [this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        DP_LOG_WARN("api: internal error: {}", what);
        send_error(res, 500, "internal_error", "internal error (a bug in dualpath): " + what);
        metrics_.count_request("500");
      });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const auto nodes = service_.nodes();
    const auto& e = service_.config().engine;
    std::vector<std::string> down;
    for (int role = 0; role < 2; ++role) {
      const auto r = role == 0 ? engine::NodeRole::kPrefill : engine::NodeRole::kDecode;
      const int want = role == 0 ? e.prefill_nodes : e.decode_nodes;
      for (int i = 0; i < want; ++i) {
        bool up = false;
        for (const NodeStatus& n : nodes) up = up || (n.id.role == r && n.id.index == i && n.alive);
        if (!up) down.push_back(node_label(engine::NodeId{r, i}));
      }
    }
    if (down.empty() && service_.ready()) {
      res.set_content(Json{{"status", "ok"}}.dump(), "application/json");
      return;
    }
    std::string reason = "not ready";
    if (!down.empty()) reason = fmt::format("nodes down: {}", fmt::join(down, ", "));
    res.status = 503;
    res.set_content(Json{{"status", "unavailable"}, {"reason", reason}}.dump(),
                    "application/json");
  });
  s.Get("/version", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(Json{{"version", kVersion}}.dump(), "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res, Scope::kMetrics)) return;
    res.set_content(metrics_.scrape(service_.nodes()), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res, Scope::kModels)) return;
    Json model = {{"id", options_.served_model_name},
                  {"object", "model"},
                  {"created", unix_now()},
                  {"owned_by", "dualpath"},
                  {"max_model_len", options_.max_model_len}};
    res.set_content(Json{{"object", "list"}, {"data", Json::array({model})}}.dump(),
                    "application/json");
    metrics_.count_request("200");
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completion(req, res, true);
  });
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completion(req, res, false);
  });
}

void HttpApi::completion(const httplib::Request& req, httplib::Response& res, bool chat) {
  const Clock::time_point arrived = Clock::now();
  if (!authorized(req, res, chat ? Scope::kChat : Scope::kCompletions)) return;
  auto bad = [&](int status, const std::string& type, const std::string& message,
                 const std::string& param = "", const std::string& code = "") {
    send_error(res, status, type, message, param, code);
    metrics_.count_request(std::to_string(status));
  };
  auto parsed = parse_completion_request(
      req.body, chat, {options_.served_model_name, options_.max_model_len, options_.default_max_tokens},
      *tokenizer_, &memo_);
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    return bad(e->status, e->type, e->message, e->param, e->code);
  }
  CompletionParams p = std::move(std::get<CompletionParams>(parsed));
  if (in_flight_.fetch_add(1, std::memory_order_relaxed) >= options_.max_concurrent) {
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    res.set_header("Retry-After", "1");
    return bad(429, "rate_limit_error",
               fmt::format("{} requests are in flight, the server's limit (api.max_concurrent): "
                           "retry shortly",
                           options_.max_concurrent));
  }
  auto in_flight = std::make_unique<InFlight>(in_flight_);
  const std::string id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl",
                                     next_id_.fetch_add(1, std::memory_order_relaxed));
  const int64_t created = unix_now();
  const std::string object = chat ? "chat.completion" : "text_completion";

  TurnRequest turn;
  turn.tokens = p.prompt;
  turn.gen_tokens = p.max_tokens;
  turn.sampling = p.sampling;
  // Without a seed, every sampled request draws its own (as OpenAI's API does).
  if (!p.sampling.greedy() && !p.seeded) turn.sampling.seed = std::random_device{}();
  turn.cancel = std::make_shared<TurnCancel>();

  if (!p.stream) {
    // Watches the tokens as they come, to end the decode once the reply is over (an end token,
    // a stop string) instead of running it to max_tokens.
    struct Watch {
      Watch(const Tokenizer& tok, bool chat, std::vector<std::string> stops)
          : reply(tok, chat, std::move(stops)) {}
      std::mutex mu;
      ReplyBuilder reply;  // guarded by mu
    };
    auto watch = std::make_shared<Watch>(*tokenizer_, chat, p.stop);
    turn.on_tokens = [watch, cancel = turn.cancel](std::span<const int32_t> tokens) {
      std::lock_guard lock(watch->mu);
      if (watch->reply.done()) return;
      (void)watch->reply.feed(tokens);
      if (watch->reply.done()) cancel->stop();
    };
    auto r = service_.run_turn(std::move(turn));
    if (!r.is_ok()) {
      auto [status, type] = turn_error(r.status());
      return bad(status, type, r.status().message());
    }
    // Every output token has reached on_tokens, in order, by the time run_turn returns.
    std::lock_guard lock(watch->mu);
    ReplyBuilder& reply = watch->reply;
    reply.finish();
    if (chat) {
      if (auto t = reply.reply_tokens()) memo_.remember(p.prompt, reply.reply(), std::move(*t));
    }
    Json choice = {{"index", 0}, {"finish_reason", reply.finish_reason()}, {"logprobs", nullptr}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", reply.reply()}};
    } else {
      choice["text"] = reply.reply();
    }
    Json out = {{"id", id},
                {"object", object},
                {"created", created},
                {"model", options_.served_model_name},
                {"choices", Json::array({choice})},
                {"usage", usage_json(*r, reply.completion_tokens())},
                {"dualpath", dualpath_json(*r)}};
    res.set_content(out.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
    metrics_.observe_turn(*r, reply.completion_tokens(), seconds_since(arrived));
    metrics_.count_request("200");
    return;
  }

  auto st = std::make_shared<Stream>();
  st->arrived = arrived;
  st->in_flight = std::move(in_flight);
  st->reply = std::make_unique<ReplyBuilder>(*tokenizer_, chat, p.stop);
  st->prompt = p.prompt;
  st->cancel = turn.cancel;
  turn.on_tokens = [st](std::span<const int32_t> tokens) {
    std::lock_guard lock(st->mu);
    st->pending.insert(st->pending.end(), tokens.begin(), tokens.end());
    st->cv.notify_all();
  };
  st->runner = std::thread([this, st, turn = std::move(turn)]() mutable {
    auto r = service_.run_turn(std::move(turn));
    std::lock_guard lock(st->mu);
    st->result = std::move(r);
    st->finished = true;
    st->cv.notify_all();
  });
  const std::string model = options_.served_model_name;
  auto chunk = [id, created, model, object, chat](const std::string& text,
                                                  const Json& finish_reason, bool role) {
    Json choice = {{"index", 0}, {"finish_reason", finish_reason}, {"logprobs", nullptr}};
    if (chat) {
      Json delta = Json::object();
      if (role) delta["role"] = "assistant";
      if (!text.empty() || !role) delta["content"] = text;
      if (!finish_reason.is_null() && text.empty()) delta = Json::object();
      choice["delta"] = delta;
    } else {
      choice["text"] = text;
    }
    Json c = {{"id", id},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created},
              {"model", model},
              {"choices", Json::array({choice})}};
    return "data: " + c.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
  };
  const bool include_usage = p.include_usage;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, st, chunk, include_usage, chat, id, created, model](size_t,
                                                                 httplib::DataSink& sink) {
        auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
        if (chat && !write(chunk("", nullptr, true))) return false;
        // The first tokens always send a chunk, even with no text yet (a character still
        // incomplete, a token that is not text): clients time the first token by it.
        bool first = true;
        while (true) {
          std::vector<int32_t> tokens;
          bool finished = false;
          {
            std::unique_lock lock(st->mu);
            st->cv.wait_for(lock, std::chrono::seconds(1),
                            [&] { return !st->pending.empty() || st->finished; });
            tokens.swap(st->pending);
            finished = st->finished && tokens.empty();
          }
          if (!tokens.empty()) {
            const bool was_done = st->reply->done();
            const std::string delta = st->reply->feed(tokens);
            if (!was_done && st->reply->done()) st->cancel->stop();  // the reply is over
            if ((!delta.empty() || first) && !write(chunk(delta, nullptr, false))) return false;
            first = false;
            continue;
          }
          if (finished) break;
          if (!sink.is_writable()) return false;  // the client went away between tokens
        }
        std::optional<Result<TurnResult>> result;
        {
          std::lock_guard lock(st->mu);
          result = std::move(st->result);
        }
        if (!result->is_ok()) {
          auto [status, type] = turn_error(result->status());
          const Json e = {{"error",
                           {{"message", result->status().message()},
                            {"type", type},
                            {"param", nullptr},
                            {"code", status}}}};
          (void)write("data: " + e.dump() + "\n\n");
          (void)write("data: [DONE]\n\n");
          metrics_.count_request(std::to_string(status));
          st->counted = true;
          sink.done();
          return true;
        }
        const std::string tail = st->reply->finish();
        if (!tail.empty() && !write(chunk(tail, nullptr, false))) return false;
        if (!write(chunk("", st->reply->finish_reason(), false))) return false;
        const TurnResult& r = **result;
        if (include_usage) {
          Json u = {{"id", id},
                    {"object", chat ? "chat.completion.chunk" : "text_completion"},
                    {"created", created},
                    {"model", model},
                    {"choices", Json::array()},
                    {"usage", usage_json(r, st->reply->completion_tokens())},
                    {"dualpath", dualpath_json(r)}};
          if (!write("data: " + u.dump() + "\n\n")) return false;
        }
        if (!write("data: [DONE]\n\n")) return false;
        if (chat) {
          if (auto t = st->reply->reply_tokens()) {
            memo_.remember(st->prompt, st->reply->reply(), std::move(*t));
          }
        }
        metrics_.observe_turn(r, st->reply->completion_tokens(), seconds_since(st->arrived));
        metrics_.count_request("200");
        st->counted = true;
        sink.done();
        return true;
      },
      [this, st](bool success) {
        if (!success) st->cancel->cancel();  // the client went away: stop the turn on its nodes
        if (st->runner.joinable()) st->runner.join();
        if (!st->counted) metrics_.count_request("cancelled");
        st->in_flight.reset();
      });
}

}  // namespace dualpath::serve
