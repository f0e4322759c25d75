#include "serve/http_api.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "common/log.h"
#include "serve/chat_template.h"
#include "serve/completion_request.h"
#include "serve/dashboard.h"
#include "serve/reply_builder.h"
#include "serve/tool_call_parser.h"

namespace dualpath::serve {

using Json = nlohmann::json;
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kServerVersion = "0.1.0";

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

// Every JSON the API writes goes through here: strings that came from a client (a path, a
// model name, reply text) may hold invalid UTF-8, and a throwing dump would end the process
// (issue 32: `curl --path-as-is localhost:8000/%ff` did). Invalid bytes become U+FFFD.
std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

HttpResponse json_response(int status, const Json& body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = dump(body);
  return r;
}

// OpenAI's error object, with the status it goes with.
Json error_json(std::string_view type,
                const std::string& message,
                const std::string& param,
                const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? Json(nullptr) : Json(param)},
            {"code", code.empty() ? Json(nullptr) : Json(code)}}}};
}

Json usage_json(const TurnResult& r, int64_t completion_tokens) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", r.prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", r.hit_tokens}}}};
}

// "none" when nothing was read (issue 37): the read path a turn with no hit was placed on says
// nothing about reads.
// A turn the DE DRAM tier served (issue 35): "de_dram", joined by where the rest of its hit was
// read from ("de_dram+pe", "de_dram+de", "de_dram+split"); a turn whose planned DRAM part the
// node had lost says only where it was read from.
std::string read_path_label(const TurnResult& r) {
  if (r.hit_tokens == 0) return "none";
  if (r.dram_tokens == 0) return std::string(sched::read_path_name(r.path));
  const std::string storage = r.pe_read_bytes > 0 && r.de_read_bytes > 0 ? "split"
                              : r.pe_read_bytes > 0                      ? "pe"
                              : r.de_read_bytes > 0                      ? "de"
                                                                         : "";
  if (r.bytes.de_dram == 0) {
    return storage.empty() ? std::string(sched::read_path_name(r.path)) : storage;
  }
  return storage.empty() ? "de_dram" : "de_dram+" + storage;
}

Json dualpath_json(const TurnResult& r) {
  return {{"read_path", read_path_label(r)},
          {"hit_tokens", r.hit_tokens},
          {"storage_read_bytes", r.bytes.storage_read},
          {"pe_read_bytes", r.pe_read_bytes},
          {"de_read_bytes", r.de_read_bytes},
          {"de_dram_tokens", r.dram_tokens},
          {"de_dram_bytes", r.bytes.de_dram},
          {"ttft_ms", r.ttft_s * 1e3},
          {"queue_ms", r.queue_s * 1e3},
          {"prefill_node", node_label(r.pe)},
          {"decode_node", node_label(r.de)},
          {"attempts", r.attempts},
          {"migrated", r.migrated},
          // Tokens the decode ran (past the reply's end when a stop came between token events).
          {"decoded_tokens", static_cast<int64_t>(r.output_tokens.size())}};
}

// GET /dashboard: the page (dashboard.h), under its content security policy, never cached (a
// proxy must not hand it, or the credential it was fetched with, to another user).
HttpResponse dashboard_response() {
  HttpResponse r;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::string(dashboard_page());
  r.headers = {{"Content-Security-Policy", dashboard_csp()},
               {"Cache-Control", "no-store"},
               {"X-Content-Type-Options", "nosniff"},
               {"Referrer-Policy", "no-referrer"}};
  return r;
}

// The HTTP status and OpenAI error type of a turn that failed.
std::pair<int, const char*> turn_error(const Status& s) {
  if (s.is_unavailable() || s.is_timed_out() || s.is_resource_exhausted()) {
    return {503, "service_unavailable"};
  }
  if (s.is_invalid_argument()) return {400, "invalid_request_error"};
  return {500, "internal_error"};
}

// Decrements the in-flight count when the request is over (also when its work never ran: the
// server dropped it while stopping).
struct InFlight {
  explicit InFlight(std::atomic<int>& n) : n_(n) {}
  ~InFlight() { n_.fetch_sub(1, std::memory_order_relaxed); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  std::atomic<int>& n_;
};

// Percent-decodes a request path. nullopt for a malformed escape.
std::optional<std::string> percent_decode(std::string_view s) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string byte_hex(std::string_view s, size_t at) {
  return fmt::format("0x{:02X}", static_cast<uint8_t>(s[at]));
}

// How a turn was given up, set by the exchange's abandon callback (on the connection's strand)
// and read by the handler after run_turn returns.
struct AbandonFlag {
  std::atomic<int> why{-1};  // -1 or an Abandon; release on set, acquire on read
  std::optional<Abandon> get() const {
    const int v = why.load(std::memory_order_acquire);
    return v < 0 ? std::nullopt : std::optional(static_cast<Abandon>(v));
  }
};

}  // namespace

// The routes, in one table: a path served with another method is 405, an unknown one 404.
struct HttpApi::Route {
  enum Kind { kHealth, kVersion, kMetrics, kDashboard, kModels, kChat, kCompletions };
  std::string_view method;
  std::string_view path;
  Kind kind;
  std::optional<Scope> scope;  // needed with keys
  // The routes a browser opens take the key as HTTP Basic's password too (api_keys.h): the
  // dashboard, and the /metrics its page reads with the credential the browser prompted for.
  KeyForms forms = KeyForms::kBearer;
};

namespace {

const HttpApi::Route kRoutes[] = {
    {"GET", "/health", HttpApi::Route::kHealth, std::nullopt},
    {"GET", "/version", HttpApi::Route::kVersion, std::nullopt},
    {"GET", "/metrics", HttpApi::Route::kMetrics, Scope::kMetrics, KeyForms::kBearerOrBasic},
    {"GET", "/dashboard", HttpApi::Route::kDashboard, Scope::kMetrics, KeyForms::kBearerOrBasic},
    {"GET", "/v1/models", HttpApi::Route::kModels, Scope::kModels},
    {"POST", "/v1/chat/completions", HttpApi::Route::kChat, Scope::kChat},
    {"POST", "/v1/completions", HttpApi::Route::kCompletions, Scope::kCompletions},
};

}  // namespace

std::string turn_cache_namespace(std::string_view key_namespace, std::string_view cache_salt) {
  if (key_namespace.empty() && cache_salt.empty()) return {};
  return sha256_hex(fmt::format("{}:{}{}:{}", key_namespace.size(), key_namespace,
                                cache_salt.size(), cache_salt));
}

namespace {

// The API on the scheduler service of `serve`.
class SchedulerTurns final : public TurnService {
 public:
  explicit SchedulerTurns(SchedulerService& s) : s_(s) {}
  Result<TurnResult> run_turn(TurnRequest request) override {
    return s_.run_turn(std::move(request));
  }
  std::vector<NodeStatus> nodes() const override { return s_.nodes(); }
  bool ready() const override { return s_.ready(); }
  const ServeConfig& config() const override { return s_.config(); }

 private:
  SchedulerService& s_;
};

}  // namespace

HttpApi::HttpApi(ApiOptions options, TurnService& service)
    : options_(std::move(options)), service_(service), tokenizer_(options_.tokenizer) {
  limits_ = options_.limits;
  limits_.max_body_bytes = options_.max_body_bytes;
  limits_.request_timeout = std::chrono::duration_cast<HttpDuration>(options_.request_timeout);
  std::random_device rd;
  id_salt_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

Result<std::shared_ptr<const Tokenizer>> tokenizer_for(const engine::EngineConfig& engine) {
  const engine::BackendSpec spec = engine.backend_spec();
  DP_ASSIGN_OR_RETURN(const engine::ModelKvShape shape, engine::model_kv_shape(engine));
  if (!spec.is_checkpoint()) {
    if (shape.vocab < SpecialTokens::kCount) {
      return Status::invalid_argument(
          fmt::format("model {} has a vocabulary of {}: the byte tokenizer needs {} ids",
                      engine.model, shape.vocab, SpecialTokens::kCount));
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

namespace {

// The id a checkpoint is served under by default: its directory's name.
std::string default_model_name(const engine::EngineConfig& engine) {
  const engine::BackendSpec spec = engine.backend_spec();
  if (!spec.is_checkpoint()) return engine.model;
  std::filesystem::path dir(spec.weights);
  if (!dir.has_filename()) dir = dir.parent_path();  // "DIR/"
  return dir.filename().string();
}

}  // namespace

Result<std::unique_ptr<HttpApi>> HttpApi::make(ApiOptions options,
                                               TurnService& service,
                                               std::unique_ptr<TurnService> owned) {
  if (options.served_model_name.empty()) {
    options.served_model_name = default_model_name(service.config().engine);
  }
  if (!options.tokenizer) {
    DP_ASSIGN_OR_RETURN(options.tokenizer, tokenizer_for(service.config().engine));
  }
  if (options.max_concurrent < 1) {
    return Status::invalid_argument(
        fmt::format("api.max_concurrent = {} must be at least 1", options.max_concurrent));
  }
  if (!options.tool_call_parser.empty() && options.tool_call_parser != "hermes") {
    return Status::invalid_argument(fmt::format(
        "--tool-call-parser {}: the parser this server has is hermes (<tool_call>{{json}}"
        "</tool_call>)",
        options.tool_call_parser));
  }
  if (options.request_timeout.count() < 0) {
    return Status::invalid_argument("--request-timeout must be 0 (none) or more seconds");
  }
  std::unique_ptr<HttpApi> api(new HttpApi(std::move(options), service));
  api->owned_service_ = std::move(owned);
  return api;
}

Result<std::unique_ptr<HttpApi>> HttpApi::create(ApiOptions options, TurnService& service) {
  return make(std::move(options), service, nullptr);
}

Result<std::unique_ptr<HttpApi>> HttpApi::start(ApiOptions options,
                                                TurnService& service,
                                                std::optional<ListeningSocket> socket) {
  DP_ASSIGN_OR_RETURN(auto api, make(std::move(options), service, nullptr));
  DP_RETURN_IF_ERROR(api->serve(std::move(socket)));
  return api;
}

Result<std::unique_ptr<HttpApi>> HttpApi::start(ApiOptions options,
                                                SchedulerService& service,
                                                std::optional<ListeningSocket> socket) {
  auto owned = std::make_unique<SchedulerTurns>(service);
  TurnService& turns = *owned;
  DP_ASSIGN_OR_RETURN(auto api, make(std::move(options), turns, std::move(owned)));
  DP_RETURN_IF_ERROR(api->serve(std::move(socket)));
  return api;
}

Status HttpApi::serve(std::optional<ListeningSocket> socket) {
  HttpServerOptions so;
  so.host = options_.host;
  so.port = options_.port;
  so.limits = limits_;
  so.max_connections = options_.max_connections;
  // A turn blocks its pool thread from its body to its answer, and at most max_concurrent run:
  // one thread each, so admitted work never waits for a thread.
  so.handler_threads = options_.max_concurrent;
  so.ssl_certfile = options_.ssl_certfile;
  so.ssl_keyfile = options_.ssl_keyfile;
  DP_ASSIGN_OR_RETURN(server_, HttpServer::start(std::move(so), *this, std::move(socket)));
  return Status::ok();
}

HttpApi::~HttpApi() { server_.reset(); }

Status HttpApi::reload_keys() {
  if (!options_.keys) return Status::ok();
  return options_.keys->reload();
}

HttpResponse HttpApi::error(int status,
                            std::string_view type,
                            const std::string& message,
                            const std::string& param,
                            const std::string& code) {
  metrics_.count_request(std::to_string(status));
  return json_response(status, error_json(type, message, param, code));
}

HttpResponse HttpApi::protocol_error(int status, const std::string& message) {
  std::string_view type = "invalid_request_error";
  std::string code;
  if (status >= 500) type = status == 503 ? "service_unavailable" : "internal_error";
  if (status == 408) code = "request_timeout";
  if (status == 431) code = "request_header_fields_too_large";
  HttpResponse r = error(status, type, message, "", code);
  r.close = true;
  return r;
}

std::variant<const HttpApi::Route*, HttpResponse> HttpApi::route(const HttpRequest& head) {
  const std::string_view target = head.target;
  const std::string_view raw_path = target.substr(0, target.find('?'));
  auto path = percent_decode(raw_path);
  if (!path) {
    return error(400, "invalid_request_error",
                 "the request path has a malformed percent-escape (% must be followed by two hex "
                 "digits)",
                 "path");
  }
  if (auto at = invalid_utf8_at(*path)) {
    return error(400, "invalid_request_error",
                 fmt::format("the request path is not valid UTF-8 once percent-decoded (byte {} "
                             "at offset {})",
                             byte_hex(*path, *at), *at),
                 "path");
  }
  for (const HttpHeader& h : head.headers) {
    if (auto at = invalid_utf8_at(h.value)) {
      return error(400, "invalid_request_error",
                   fmt::format("the header '{}' is not valid UTF-8 (byte {} at offset {})", h.name,
                               byte_hex(h.value, *at), *at),
                   "header:" + h.name);
    }
  }
  std::string allow;
  // HEAD is GET without the body (the transport drops it).
  const std::string_view method = head.method == "HEAD" ? "GET" : std::string_view(head.method);
  for (const Route& r : kRoutes) {
    if (r.path != *path) continue;
    if (r.method == method) return &r;
    allow += allow.empty() ? std::string(r.method) : ", " + std::string(r.method);
  }
  if (!allow.empty()) {
    HttpResponse e = error(405, "invalid_request_error",
                           fmt::format("{} {} is not served: use {}", head.method, *path, allow),
                           "", "method_not_allowed");
    e.headers.push_back({"Allow", allow});
    return e;
  }
  if (path->starts_with("/dashboard/")) {
    return error(404, "invalid_request_error",
                 fmt::format("no route {} {}: the dashboard is one page, GET /dashboard, and "
                             "its data is GET /metrics",
                             head.method, *path),
                 "", "not_found");
  }
  return error(404, "invalid_request_error",
               fmt::format("no route {} {}: see GET /v1/models, POST /v1/chat/completions, POST "
                           "/v1/completions, GET /health, GET /metrics, GET /dashboard",
                           head.method, *path),
               "", "not_found");
}

std::optional<HttpResponse> HttpApi::authorize(const HttpRequest& req,
                                               const Route& r,
                                               std::string* key_namespace) {
  if (!options_.keys || !r.scope) return std::nullopt;
  const AuthResult a = options_.keys->authorize(
      req.header("Authorization").value_or(std::string_view()), *r.scope, r.forms);
  if (a.http_status == 200) {
    if (key_namespace != nullptr) *key_namespace = a.cache_namespace;
    return std::nullopt;
  }
  if (a.http_status == 401) {
    HttpResponse e = error(401, "authentication_error", a.message, "", "invalid_api_key");
    // A browser that opens the dashboard asks for the key (as the password) and sends it again
    // with the page's requests to /metrics (same origin, same protection space).
    if (r.kind == Route::kDashboard) {
      e.headers.push_back({"WWW-Authenticate", "Basic realm=\"dualpath\", charset=\"UTF-8\""});
    }
    return e;
  }
  return error(403, "permission_error", a.message, "", "insufficient_scope");
}

std::optional<HttpResponse> HttpApi::check_head(const HttpRequest& head) {
  auto routed = route(head);
  if (auto* refused = std::get_if<HttpResponse>(&routed)) return std::move(*refused);
  const Route& r = *std::get<const Route*>(routed);
  if (auto refused = authorize(head, r, nullptr)) return refused;
  // A declared body over the limit is refused before a byte of it is read (a chunked one is
  // stopped by the transport at the limit).
  if (auto len = head.header("Content-Length")) {
    uint64_t n = 0;
    bool digits = !len->empty() && len->size() <= 19;
    for (char c : *len) {
      digits = digits && c >= '0' && c <= '9';
      if (digits) n = n * 10 + static_cast<uint64_t>(c - '0');
    }
    if (digits && n > options_.max_body_bytes) {
      return error(
          413, "invalid_request_error",
          fmt::format("the request body is larger than {} bytes", options_.max_body_bytes));
    }
  }
  return std::nullopt;
}

HttpResponse HttpApi::health() {
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
  if (down.empty() && service_.ready()) return json_response(200, Json{{"status", "ok"}});
  std::string reason = "not ready";
  if (!down.empty()) reason = fmt::format("nodes down: {}", fmt::join(down, ", "));
  return json_response(503, Json{{"status", "unavailable"}, {"reason", reason}});
}

HttpResponse HttpApi::models() {
  Json model = {{"id", options_.served_model_name},
                {"object", "model"},
                {"created", unix_now()},
                {"owned_by", "dualpath"},
                {"max_model_len", options_.max_model_len}};
  metrics_.count_request("200");
  return json_response(200, Json{{"object", "list"}, {"data", Json::array({model})}});
}

void HttpApi::handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
  auto routed = route(request);
  if (auto* refused = std::get_if<HttpResponse>(&routed)) return exchange->respond(*refused);
  const Route& r = *std::get<const Route*>(routed);
  // Again: the keys may have been reloaded while the body came, and the key's namespace is
  // needed now.
  std::string key_namespace;
  if (auto refused = authorize(request, r, &key_namespace)) return exchange->respond(*refused);
  switch (r.kind) {
    case Route::kHealth:
      return exchange->respond(health());
    case Route::kVersion:
      return exchange->respond(json_response(200, Json{{"version", kServerVersion}}));
    case Route::kMetrics: {
      HttpResponse m;
      m.content_type = "text/plain; version=0.0.4";
      m.body = metrics_.scrape(service_.nodes(), in_flight_.load(std::memory_order_relaxed),
                               service_.config().scheduler.lease_ttl);
      return exchange->respond(std::move(m));
    }
    case Route::kDashboard:
      return exchange->respond(dashboard_response());
    case Route::kModels:
      return exchange->respond(models());
    case Route::kChat:
    case Route::kCompletions:
      break;
  }
  if (in_flight_.fetch_add(1, std::memory_order_relaxed) >= options_.max_concurrent) {
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    HttpResponse e = error(429, "rate_limit_error",
                           fmt::format("{} requests are in flight, the server's limit "
                                       "(--max-concurrent): retry shortly",
                                       options_.max_concurrent));
    e.headers.push_back({"Retry-After", "1"});
    return exchange->respond(std::move(e));
  }
  auto slot = std::make_shared<InFlight>(in_flight_);
  const bool chat = r.kind == Route::kChat;
  auto req = std::make_shared<HttpRequest>(std::move(request));
  HttpExchange& ex = *exchange;
  ex.run_blocking([this, slot, req, exchange, chat, ns = std::move(key_namespace)] {
    completion(*req, *exchange, chat, ns);
  });
}

std::string HttpApi::next_tool_call_id() {
  const uint64_t n = next_id_.fetch_add(1, std::memory_order_relaxed);
  return fmt::format("call_{:016x}{:08x}", id_salt_, n);
}

// One request's answer as its tokens come: the reply's text, its tool calls (with the parser),
// and the chunks of a stream. Guarded by its own mutex: tokens arrive on a node link's reader
// thread, the end on the handler pool.
struct HttpApi::Completion {
  Completion(HttpApi& api, const CompletionParams& p, bool chat_request, bool parse_tools)
      : reply(*api.tokenizer_, chat_request, p.stop, p.ignore_eos), chat(chat_request) {
    if (parse_tools) tools.emplace();
  }
  Mutex mu;
  ReplyBuilder reply DP_GUARDED_BY(mu);
  std::optional<HermesToolCallParser> tools DP_GUARDED_BY(mu);
  const bool chat;
  std::string content DP_GUARDED_BY(mu);  // the reply's content (tool calls apart)
  std::vector<ToolCall> calls DP_GUARDED_BY(mu);
  // A stream's: where its chunks go while the turn runs (null before and after, so that a late
  // token event writes nothing), and whether the first token's chunk went.
  HttpExchange* stream DP_GUARDED_BY(mu) = nullptr;
  bool first DP_GUARDED_BY(mu) = true;
  std::function<std::string(const Json& delta_or_text, const Json& finish)> chunk;

  // Text from the reply builder into content and calls; a stream's chunks for them.
  void take(HttpApi& api, const std::string& text, bool at_end) DP_REQUIRES(mu) {
    HermesToolCallParser::Piece piece;
    if (tools) {
      piece = tools->push(text);
      if (at_end) {
        auto rest = tools->finish();
        piece.content += rest.content;
        for (auto& c : rest.calls) piece.calls.push_back(std::move(c));
      }
    } else {
      piece.content = text;
    }
    content += piece.content;
    const size_t first_new = calls.size();
    for (auto& c : piece.calls) calls.push_back({api.next_tool_call_id(), c.name, c.arguments});
    if (!stream) return;
    if (!piece.content.empty() || (first && piece.calls.empty())) {
      Json delta = chat ? Json{{"content", piece.content}} : Json(piece.content);
      (void)stream->write(chunk(delta, nullptr));
    }
    first = false;
    for (size_t k = first_new; k < calls.size(); ++k) {
      // As OpenAI streams a call: its id, type and name with empty arguments, then the
      // arguments.
      const Json head = {{"index", k},
                         {"id", calls[k].id},
                         {"type", "function"},
                         {"function", {{"name", calls[k].name}, {"arguments", ""}}}};
      (void)stream->write(chunk(Json{{"tool_calls", Json::array({head})}}, nullptr));
      const Json args = {{"index", k}, {"function", {{"arguments", calls[k].arguments}}}};
      (void)stream->write(chunk(Json{{"tool_calls", Json::array({args})}}, nullptr));
    }
  }
};

void HttpApi::completion(const HttpRequest& req,
                         HttpExchange& ex,
                         bool chat,
                         const std::string& key_namespace) {
  const Clock::time_point arrived = Clock::now();
  std::string ns;  // the turn's cache namespace, once the body's cache_salt is known
  std::optional<ScopedReplyMemo> scoped;
  auto parsed = parse_completion_request(
      req.body, chat,
      {options_.served_model_name, options_.max_model_len, options_.default_max_tokens},
      *tokenizer_, [&](const std::string& salt) -> ReplyLookup* {
        ns = turn_cache_namespace(key_namespace, salt);
        scoped.emplace(memo_, ns);
        return &*scoped;
      });
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    return ex.respond(error(e->status, e->type, e->message, e->param, e->code));
  }
  CompletionParams p = std::move(std::get<CompletionParams>(parsed));
  ns = turn_cache_namespace(key_namespace, p.cache_salt);  // (a completion has no memo lookup)
  const std::string id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl",
                                     next_id_.fetch_add(1, std::memory_order_relaxed));
  const int64_t created = unix_now();
  const std::string object = chat ? "chat.completion" : "text_completion";
  const std::string chunk_object = chat ? "chat.completion.chunk" : "text_completion";
  const std::string model = options_.served_model_name;
  const bool parse_tools = chat && !options_.tool_call_parser.empty() && p.tools > 0 &&
                           p.tool_choice == ToolChoice::kAuto;

  TurnRequest turn;
  turn.tokens = p.prompt;
  turn.gen_tokens = p.max_tokens;
  turn.sampling = p.sampling;
  turn.cache_namespace = ns;
  // Without a seed, every sampled request draws its own (as OpenAI's API does).
  if (!p.sampling.greedy() && !p.seeded) turn.sampling.seed = std::random_device{}();
  turn.cancel = std::make_shared<TurnCancel>();
  // A client that hangs up, a deadline, a shutdown: the turn is cancelled on both nodes. On the
  // connection's strand: TurnCancel::cancel writes one message to each node's socket (NodeLink::
  // send, bounded by its timeout) and waits for no reply.
  auto abandoned = std::make_shared<AbandonFlag>();
  ex.on_abandon([abandoned, cancel = turn.cancel](Abandon why) {
    abandoned->why.store(static_cast<int>(why), std::memory_order_release);
    cancel->cancel();
  });

  auto c = std::make_shared<Completion>(*this, p, chat, parse_tools);
  c->chunk = [id, created, model, chunk_object, chat](const Json& delta,
                                                      const Json& finish) -> std::string {
    Json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
    if (chat) {
      choice["delta"] = delta;
    } else {
      choice["text"] = delta;
    }
    Json out = {{"id", id},
                {"object", chunk_object},
                {"created", created},
                {"model", model},
                {"choices", Json::array({choice})}};
    return "data: " + dump(out) + "\n\n";
  };
  if (p.stream) {
    ex.start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    if (chat) (void)ex.write(c->chunk(Json{{"role", "assistant"}, {"content", ""}}, nullptr));
    MutexLock lock(c->mu);
    c->stream = &ex;
  }
  // Watches the tokens as they come, to end the decode once the reply is over (an end token, a
  // stop string) instead of running it to max_tokens; a stream sends them on.
  turn.on_tokens = [this, c, cancel = turn.cancel](std::span<const int32_t> tokens) {
    try {
      bool over = false;
      {
        MutexLock lock(c->mu);
        if (c->reply.done()) return;
        const std::string delta = c->reply.feed(tokens);
        over = c->reply.done();
        c->take(*this, delta, /*at_end=*/false);
      }
      // Outside the lock: a stop reaches the decode node.
      if (over) cancel->stop();
    } catch (const std::exception& e) {  // the catch boundary of the node link's thread here
      DP_LOG_ERROR("api: a token callback threw (a bug in dualpath): {}", e.what());
      cancel->cancel();
    }
  };
  auto r = service_.run_turn(std::move(turn));
  // Every output token has reached on_tokens, in order, by the time run_turn returns.
  MutexLock lock(c->mu);
  c->stream = nullptr;
  const std::optional<Abandon> why = abandoned->get();
  if (!r.is_ok()) {
    int status = 0;
    std::string type, message = r.status().message(), code;
    if (why == Abandon::kDeadline) {
      status = 504;
      type = "timeout_error";
      code = "request_timeout";
      message = fmt::format(
          "the request did not finish within --request-timeout {} s; its "
          "turn was cancelled",
          options_.request_timeout.count());
    } else if (why == Abandon::kClientGone || why == Abandon::kShutdown) {
      metrics_.count_request("cancelled");
      return;  // nobody to answer
    } else {
      auto [s, t] = turn_error(r.status());
      status = s;
      type = t;
    }
    if (!p.stream) return ex.respond(error(status, type, message, "", code));
    metrics_.count_request(std::to_string(status));
    Json e = error_json(type, message, "", code);
    e["error"]["code"] = status;  // a stream's error event has the status as its code
    (void)ex.write("data: " + dump(e) + "\n\ndata: [DONE]\n\n");
    return ex.end();
  }
  if (p.stream) c->stream = &ex;
  c->take(*this, c->reply.finish(), /*at_end=*/true);
  c->stream = nullptr;
  const bool called = !c->calls.empty();
  const bool cut = called && !p.parallel_tool_calls && c->calls.size() > 1;
  if (cut) c->calls.resize(1);
  const std::string finish_reason = called ? "tool_calls" : c->reply.finish_reason();
  // The memo keys the generated tokens by the text the client will send back: the content and
  // the calls as the template renders them. A reply cut to its first call is not what was
  // generated, so it is not remembered.
  if (chat && !cut) {
    if (auto t = c->reply.reply_tokens()) {
      // (Without calls the content is the reply's text, unless a block that was not a call
      // dropped the space before it: the client sends the content back.)
      const std::string text = render_assistant(c->content, c->calls);
      memo_.remember(p.prompt, text, std::move(*t), ns);
    }
  }
  if (ex.client_gone()) {
    metrics_.count_request("cancelled");
    return;
  }
  // Counted before the reply's last byte leaves: a client that scrapes /metrics after its reply
  // sees its request there.
  metrics_.observe_turn(*r, c->reply.completion_tokens(), seconds_since(arrived));
  metrics_.count_request("200");
  if (!p.stream) {
    Json choice = {{"index", 0}, {"finish_reason", finish_reason}, {"logprobs", nullptr}};
    if (chat) {
      Json message = {{"role", "assistant"},
                      {"content", called && c->content.empty() ? Json(nullptr) : Json(c->content)}};
      if (called) {
        Json calls = Json::array();
        for (const ToolCall& tc : c->calls) {
          calls.push_back({{"id", tc.id},
                           {"type", "function"},
                           {"function", {{"name", tc.name}, {"arguments", tc.arguments}}}});
        }
        message["tool_calls"] = calls;
      }
      choice["message"] = message;
    } else {
      choice["text"] = c->content;
    }
    Json out = {{"id", id},
                {"object", object},
                {"created", created},
                {"model", model},
                {"choices", Json::array({choice})},
                {"usage", usage_json(*r, c->reply.completion_tokens())},
                {"dualpath", dualpath_json(*r)}};
    ex.respond(json_response(200, out));
  } else {
    // The last events in one write: each write is a hand-off to the connection's I/O thread.
    std::string last = c->chunk(chat ? Json::object() : Json(""), finish_reason);
    if (p.include_usage) {
      Json u = {{"id", id},
                {"object", chunk_object},
                {"created", created},
                {"model", model},
                {"choices", Json::array()},
                {"usage", usage_json(*r, c->reply.completion_tokens())},
                {"dualpath", dualpath_json(*r)}};
      last += "data: " + dump(u) + "\n\n";
    }
    last += "data: [DONE]\n\n";
    (void)ex.write(std::move(last));
    ex.end();
  }
}

}  // namespace dualpath::serve
