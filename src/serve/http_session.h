#pragma once
// One HTTP connection's life on Boost.Beast (http_server.h has the contract and the limits).
// Private to http_server.cc (TCP and TLS sockets) and http_replay.cc (an in-memory stream): the
// same code serves both, so the fuzzer drives what the server runs.
//
// A session is owned by its pending asynchronous operations and by the HttpExchange handles its
// requests gave out (shared_ptr); everything it does runs on its strand (the stream's executor),
// so its state needs no lock, except gone_ and queued_bytes_, which handles read from any thread.

#include <poll.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "common/mutex.h"
#include "common/log.h"
#include "serve/http_server.h"

namespace dualpath::serve::http_detail {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using SteadyClock = std::chrono::steady_clock;

// How a session drives its stream type; specialised in the .cc that instantiates Session:
//   static constexpr bool kHasClock;   deadlines and the hang-up poll (false: the replay stream)
//   static constexpr bool kTls;        a handshake first, close_notify last
//   static void expires_after(Stream&, HttpDuration);  the next read's or write's deadline
//   static int native_fd(Stream&);     the socket, for poll(POLLRDHUP); -1: none
//   static void async_handshake(Stream&, Handler);     (kTls only)
//   static void async_shutdown(Stream&, Handler);      ends the sending side (TLS: close_notify)
//   static void close(Stream&);        at once; pending operations end with operation_aborted
template <class Stream>
struct StreamTraits;

// What the sessions of one server share. Thread-safe.
struct SessionContext {
  SessionContext(HttpHandler& h, HttpLimits l, std::function<void(std::function<void()>)> pool)
      : handler(h), limits(l), run_blocking(std::move(pool)) {}
  HttpHandler& handler;
  const HttpLimits limits;
  // Posts blocking work to the handler pool (the replay runs it on its one thread).
  const std::function<void(std::function<void()>)> run_blocking;
  std::atomic<int64_t> open{0};  // relaxed: sessions alive (the connection cap)

  // Every live session's abort, for the server's shutdown.
  Mutex mu;
  std::unordered_map<uint64_t, std::function<void()>> live DP_GUARDED_BY(mu);
  bool stopping DP_GUARDED_BY(mu) = false;
  std::atomic<uint64_t> next_id{1};                          // relaxed: distinct ids
};

// Lingering close (as nginx's lingering_close): after a response that refused a request whose
// body was not read, the client may still be sending it; closing at once would reset the
// connection and the client could lose the response. Read and drop this much, this long.
inline constexpr size_t kLingerBytes = size_t{1} << 20;
inline constexpr HttpDuration kLingerTime{2000};

inline bool is_parse_error(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message &&
         ec != http::error::need_more && ec != http::error::header_limit &&
         ec != http::error::body_limit;
}

inline std::string strip_crlf(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c != '\r' && c != '\n') out += c;
  }
  return out;
}

// The status line and headers of a response (its body, if any, is appended by the caller).
inline std::string response_head(int status,
                                 int version,
                                 const std::string& content_type,
                                 const std::vector<HttpHeader>& headers,
                                 std::optional<size_t> content_length,
                                 bool chunked,
                                 bool close) {
  const auto reason = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)));
  std::string out = fmt::format("HTTP/{}.{} {} {}\r\n", version / 10, version % 10, status,
                                std::string_view(reason.data(), reason.size()));
  if (!content_type.empty()) out += "Content-Type: " + strip_crlf(content_type) + "\r\n";
  for (const HttpHeader& h : headers) {
    out += strip_crlf(h.name) + ": " + strip_crlf(h.value) + "\r\n";
  }
  if (content_length) out += fmt::format("Content-Length: {}\r\n", *content_length);
  if (chunked) out += "Transfer-Encoding: chunked\r\n";
  if (close) {
    out += "Connection: close\r\n";
  } else if (version == 10) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
  return out;
}

inline std::string chunk_frame(std::string_view data) {
  return fmt::format("{:x}\r\n", data.size()) + std::string(data) + "\r\n";
}

template <class Stream>
class Session;

// The HttpExchange a request's handler gets: a session and the number of its request. Calls for
// a request that is over (the session moved on, or closed) do nothing.
template <class Stream>
class ExchangeHandle final : public HttpExchange {
 public:
  ExchangeHandle(std::shared_ptr<Session<Stream>> s, uint64_t seq, bool chunked)
      : s_(std::move(s)), seq_(seq), chunked_(chunked) {}
  ~ExchangeHandle() override {
    s_->post([s = s_, seq = seq_] { s->released(seq); });
  }
  void respond(HttpResponse r) override {
    s_->post(
        [s = s_, seq = seq_, r = std::move(r)]() mutable { s->do_respond(seq, std::move(r)); });
  }
  void start_stream(int status,
                    std::string content_type,
                    std::vector<HttpHeader> headers) override {
    s_->post([s = s_, seq = seq_, status, ct = std::move(content_type),
              h = std::move(headers)]() mutable {
      s->do_start_stream(seq, status, std::move(ct), std::move(h));
    });
  }
  bool write(std::string data) override {
    if (data.empty()) return !s_->gone();  // an empty chunk would end a chunked stream
    std::string frame = chunked_ ? chunk_frame(data) : std::move(data);
    if (!s_->reserve_queue(frame.size())) return false;
    s_->post(
        [s = s_, seq = seq_, f = std::move(frame)]() mutable { s->do_piece(seq, std::move(f)); });
    return true;
  }
  void end() override {
    s_->post([s = s_, seq = seq_] { s->do_end(seq); });
  }
  void run_blocking(std::function<void()> work) override { s_->run_blocking(std::move(work)); }
  void on_abandon(std::function<void(Abandon)> fn) override {
    s_->post(
        [s = s_, seq = seq_, fn = std::move(fn)]() mutable { s->set_abandon(seq, std::move(fn)); });
  }
  bool client_gone() const override { return s_->gone(); }

 private:
  const std::shared_ptr<Session<Stream>> s_;
  const uint64_t seq_;
  const bool chunked_;
};

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
  using Traits = StreamTraits<Stream>;

 public:
  Session(Stream stream, SessionContext& ctx)
      : stream_(std::move(stream)),
        executor_(stream_.get_executor()),
        ctx_(ctx),
        id_(ctx.next_id.fetch_add(1, std::memory_order_relaxed)) {
    // Without a clock (the replay) no timer is made: a timer would start Asio's reactor, and
    // every replayed request would pay its epoll calls.
    if constexpr (Traits::kHasClock) timer_.emplace(executor_);
    ctx_.open.fetch_add(1, std::memory_order_relaxed);
  }
  ~Session() {
    {
      MutexLock lock(ctx_.mu);
      ctx_.live.erase(id_);
    }
    ctx_.open.fetch_sub(1, std::memory_order_relaxed);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Registers for shutdown and starts reading (after the TLS handshake).
  void start() {
    {
      MutexLock lock(ctx_.mu);
      if (ctx_.stopping) return;  // dropped: the server is stopping
      ctx_.live.emplace(id_, [weak = this->weak_from_this()] {
        if (auto s = weak.lock()) s->post([s] { s->shut_down(); });
      });
    }
    post([self = this->shared_from_this()] { self->begin(); });
  }

  // Runs `f` on the session's strand. Any thread.
  template <class F>
  void post(F&& f) {
    net::post(executor_, std::forward<F>(f));
  }
  bool gone() const { return gone_.load(std::memory_order_acquire); }
  void run_blocking(std::function<void()> work) { ctx_.run_blocking(std::move(work)); }

  // From a handle on any thread: counts a piece against the stream's queue bound.
  bool reserve_queue(size_t bytes) {
    if (gone()) return false;
    const size_t before = queued_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    if (before + bytes > ctx_.limits.max_stream_queue_bytes) {
      queued_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
      post([self = this->shared_from_this()] {
        DP_LOG_WARN("http: a client is {} bytes behind its stream: dropped",
                    self->queued_bytes_.load(std::memory_order_relaxed));
        self->client_gone();
      });
      return false;
    }
    return true;
  }

  // ---- on the strand ----

  void do_respond(uint64_t seq, HttpResponse r) {
    if (!current(seq) || answer_started_) return;
    answer_started_ = answer_complete_ = true;
    close_after_ = close_after_ || r.close || !keep_alive_;
    std::string out = response_head(r.status, version_, r.content_type, r.headers, r.body.size(),
                                    false, close_after_);
    if (!head_only_) out += r.body;
    enqueue(std::move(out));
  }

  void do_start_stream(uint64_t seq,
                       int status,
                       std::string content_type,
                       std::vector<HttpHeader> headers) {
    if (!current(seq) || answer_started_) return;
    answer_started_ = streaming_ = true;
    // HTTP/1.0 has no chunked encoding: the stream ends with the connection.
    if (version_ < 11) close_after_ = true;
    close_after_ = close_after_ || !keep_alive_;
    enqueue(response_head(status, version_, content_type, headers, std::nullopt, version_ >= 11,
                          close_after_));
  }

  void do_piece(uint64_t seq, std::string frame) {
    const size_t n = frame.size();
    if (!current(seq) || !streaming_ || answer_complete_) {
      queued_bytes_.fetch_sub(n, std::memory_order_relaxed);
      return;
    }
    enqueue(std::move(frame), n);
  }

  void do_end(uint64_t seq) {
    if (!current(seq) || !streaming_ || answer_complete_) return;
    answer_complete_ = true;
    if (version_ >= 11) {
      enqueue("0\r\n\r\n");
    } else {
      maybe_finish();
    }
  }

  void set_abandon(uint64_t seq, std::function<void(Abandon)> fn) {
    if (seq != seq_) return;
    if (abandoned_) return call_abandon(fn, *abandoned_);
    if (in_exchange_) abandon_fn_ = std::move(fn);  // else: answered, nothing to abandon
  }

  // The handler let go of the exchange: an answer it never finished is finished here.
  void released(uint64_t seq) {
    if (!current(seq) || answer_complete_) return;
    if (!answer_started_) {
      do_respond(seq, safe_error(500, "the handler gave no answer (a bug in dualpath)"));
    } else {
      // A stream its handler dropped: what was queued goes, then the connection closes without
      // the last chunk, so that the client sees a cut stream, not a complete one.
      answer_complete_ = true;
      close_after_ = true;
      maybe_finish();
    }
  }

 private:
  bool current(uint64_t seq) const { return in_exchange_ && seq == seq_ && !gone(); }

  void begin() {
    if constexpr (Traits::kTls) {
      Traits::expires_after(stream_, ctx_.limits.header_timeout);
      Traits::async_handshake(stream_, [self = this->shared_from_this()](beast::error_code ec) {
        if (ec || self->closed_) return self->close_now();
        self->read_request();
      });
    } else {
      read_request();
    }
  }

  // Waits for a request's first byte (idle: a keep-alive connection between requests), then
  // reads its head within header_timeout.
  void read_request() {
    if (closed_) return;
    head_only_ = false;
    parser_.emplace();
    parser_->header_limit(ctx_.limits.max_header_bytes);
    parser_->body_limit(ctx_.limits.max_body_bytes);
    if (buffer_.size() > 0) return read_head();
    // The first request of a connection gets header_timeout from its accept: an idle new
    // connection is the cheapest way to hold a slot.
    Traits::expires_after(stream_,
                          requests_ == 0 ? ctx_.limits.header_timeout : ctx_.limits.idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec || self->closed_)
                                return self->close_now();  // idle or gone: no answer owed
                              self->buffer_.commit(n);
                              self->read_head();
                            });
  }

  void read_head() {
    Traits::expires_after(stream_, ctx_.limits.header_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->on_head(ec); });
  }

  HttpRequest head_of() const {
    const auto& m = parser_->get();
    HttpRequest r;
    r.method = std::string(m.method_string());
    r.target = std::string(m.target());
    r.version = static_cast<int>(m.version());
    for (const auto& f : m)
      r.headers.push_back({std::string(f.name_string()), std::string(f.value())});
    return r;
  }

  void on_head(beast::error_code ec) {
    if (closed_) return;
    if (ec) return refuse_read_error(ec);
    ++requests_;
    HttpRequest head = head_of();
    const auto& m = parser_->get();
    version_ = static_cast<int>(m.version());
    keep_alive_ = m.keep_alive();
    head_only_ = m.method() == http::verb::head;
    if (head.headers.size() > ctx_.limits.max_headers) {
      return refuse(safe_error(431, fmt::format("the request has {} headers; at most {}",
                                                head.headers.size(), ctx_.limits.max_headers)));
    }
    std::optional<HttpResponse> verdict;
    try {
      verdict = ctx_.handler.check_head(head);
    } catch (const std::exception& e) {
      verdict = safe_error(500, fmt::format("internal error (a bug in dualpath): {}", e.what()));
    } catch (...) {
      verdict = safe_error(500, "internal error (a bug in dualpath)");
    }
    if (verdict) return refuse(std::move(*verdict));
    if (parser_->is_done()) return on_body({});
    if (auto expect = head.header("Expect");
        expect &&
        beast::iequals(beast::string_view(expect->data(), expect->size()), "100-continue") &&
        version_ >= 11) {
      enqueue("HTTP/1.1 100 Continue\r\n\r\n");  // written while the body is read
    }
    Traits::expires_after(stream_, ctx_.limits.body_timeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code e, size_t) { self->on_body(e); });
  }

  void on_body(beast::error_code ec) {
    if (closed_) return;
    if (ec) return refuse_read_error(ec);
    HttpRequest req = head_of();
    req.body = std::move(parser_->get().body());
    parser_.reset();
    ++seq_;
    in_exchange_ = true;
    answer_started_ = answer_complete_ = streaming_ = false;
    close_after_ = false;
    abandon_fn_ = nullptr;
    abandoned_.reset();
    deadline_ = ctx_.limits.request_timeout.count() > 0
                    ? std::optional(SteadyClock::now() + ctx_.limits.request_timeout)
                    : std::nullopt;
    if constexpr (Traits::kHasClock) arm_tick();
    auto ex =
        std::make_shared<ExchangeHandle<Stream>>(this->shared_from_this(), seq_, version_ >= 11);
    try {
      ctx_.handler.handle(std::move(req), std::move(ex));
    } catch (const std::exception& e) {
      do_respond(seq_,
                 safe_error(500, fmt::format("internal error (a bug in dualpath): {}", e.what())));
    } catch (...) {
      do_respond(seq_, safe_error(500, "internal error (a bug in dualpath)"));
    }
  }

  // A read that ended without a request: the error the client is owed, if any.
  void refuse_read_error(beast::error_code ec) {
    const HttpLimits& l = ctx_.limits;
    if (ec == http::error::header_limit) {
      return refuse(safe_error(
          431, fmt::format("the request line and headers are over {} bytes", l.max_header_bytes)));
    }
    if (ec == http::error::body_limit) {
      return refuse(safe_error(
          413, fmt::format("the request body is larger than {} bytes", l.max_body_bytes)));
    }
    // A timeout (beast::error::timeout) has closed the socket already (Beast's basic_stream
    // does): no 408 can be written, and none is owed to a client that trickles (nginx closes
    // too). It falls through to the close below.
    if (is_parse_error(ec)) {
      return refuse(safe_error(400, "malformed HTTP request: " + ec.message()));
    }
    close_now();  // the client went away mid-request (eof, reset): nobody to answer
  }

  // Answers without an exchange (the request is refused) and closes after.
  void refuse(HttpResponse r) {
    in_exchange_ = false;
    answer_started_ = answer_complete_ = true;
    close_after_ = true;
    refusing_ = true;
    std::string out = response_head(r.status, version_ > 0 ? version_ : 11, r.content_type,
                                    r.headers, r.body.size(), false, true);
    if (!head_only_) out += r.body;
    enqueue(std::move(out));
  }

  HttpResponse safe_error(int status, const std::string& message) {
    try {
      HttpResponse r = ctx_.handler.protocol_error(status, message);
      r.status = status;
      return r;
    } catch (...) {
      HttpResponse r;
      r.status = status;
      r.content_type = "text/plain";
      r.body = "error\n";
      return r;
    }
  }

  void enqueue(std::string bytes, size_t counted = 0) {
    if (closed_) {
      queued_bytes_.fetch_sub(counted, std::memory_order_relaxed);
      return;
    }
    out_.push_back({std::move(bytes), counted});
    do_write();
  }

  void do_write() {
    if (writing_ || out_.empty() || closed_) return;
    writing_ = true;
    writing_bytes_.clear();
    writing_counted_ = 0;
    // Everything queued goes in one write (a stream's pieces coalesce while a write is out).
    while (!out_.empty()) {
      writing_bytes_ += out_.front().first;
      writing_counted_ += out_.front().second;
      out_.pop_front();
    }
    Traits::expires_after(stream_, ctx_.limits.write_timeout);
    net::async_write(
        stream_, net::buffer(writing_bytes_),
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    queued_bytes_.fetch_sub(writing_counted_, std::memory_order_relaxed);
    writing_counted_ = 0;
    if (closed_) return;
    if (ec) return client_gone();  // reset, or not read within write_timeout
    if (!out_.empty()) return do_write();
    maybe_finish();
  }

  // After the last byte of an answer: the next request, or the end.
  void maybe_finish() {
    if (!answer_complete_ || writing_ || !out_.empty() || closed_) return;
    if (in_exchange_) {
      in_exchange_ = false;
      abandon_fn_ = nullptr;  // drops what the handler's callback holds
      if (timer_) timer_->cancel();
    }
    if (close_after_ || refusing_) return graceful_close();
    read_request();
  }

  void arm_tick() {
    timer_->expires_after(ctx_.limits.client_poll_interval);
    timer_->async_wait([self = this->shared_from_this(), seq = seq_](beast::error_code ec) {
      if (ec || self->closed_ || !self->in_exchange_ || seq != self->seq_) return;
      self->tick();
    });
  }

  // While a request runs: has the client hung up (FIN or reset on the socket, whatever is
  // still unread), or has its deadline passed?
  void tick() {
    const int fd = Traits::native_fd(stream_);
    if (fd >= 0) {
      pollfd p{fd, static_cast<short>(POLLRDHUP), 0};
      if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
        return client_gone();
      }
    }
    if (deadline_ && SteadyClock::now() >= *deadline_ && !answer_complete_) {
      deadline_.reset();
      abandon(Abandon::kDeadline);
    }
    arm_tick();
  }

  void abandon(Abandon why) {
    if (abandoned_ || !in_exchange_) return;
    abandoned_ = why;
    if (abandon_fn_) {
      auto fn = std::move(abandon_fn_);
      abandon_fn_ = nullptr;
      call_abandon(fn, why);
    }
  }

  void call_abandon(const std::function<void(Abandon)>& fn, Abandon why) {
    try {
      fn(why);
    } catch (const std::exception& e) {
      DP_LOG_WARN("http: a request's abandon callback threw (a bug in dualpath): {}", e.what());
    } catch (...) {
      DP_LOG_WARN("http: a request's abandon callback threw (a bug in dualpath)");
    }
  }

  void client_gone() {
    if (gone()) return;
    gone_.store(true, std::memory_order_release);
    abandon(Abandon::kClientGone);
    close_now();
  }

  void shut_down() {
    abandon(Abandon::kShutdown);
    if (!in_exchange_) close_now();  // idle or reading: nothing to finish
  }

  void close_now() {
    if (closed_) return;
    closed_ = true;
    gone_.store(true, std::memory_order_release);
    if (timer_) timer_->cancel();
    Traits::close(stream_);
    out_.clear();
  }

  void graceful_close() {
    if (closed_) return;
    Traits::async_shutdown(stream_, [self = this->shared_from_this()](beast::error_code) {
      if (self->closed_) return;
      if constexpr (Traits::kTls) return self->close_now();
      self->linger(0);
    });
  }

  // Reads and drops what the client still sends, up to kLingerBytes / kLingerTime, then closes.
  void linger(size_t dropped) {
    if (dropped == 0) Traits::expires_after(stream_, kLingerTime);
    stream_.async_read_some(net::buffer(linger_buf_), [self = this->shared_from_this(), dropped](
                                                          beast::error_code ec, size_t n) {
      if (ec || self->closed_ || dropped + n >= kLingerBytes) {
        return self->close_now();
      }
      self->linger(dropped + n);
    });
  }

  Stream stream_;
  // The stream's executor (the strand), kept apart so that handles on other threads never touch
  // the stream to post.
  const typename Stream::executor_type executor_;
  SessionContext& ctx_;
  const uint64_t id_;
  std::optional<net::steady_timer> timer_;      // the tick while a request runs (with a clock)
  beast::flat_buffer buffer_{size_t{1} << 24};  // head and body; body_limit bounds it first
  std::optional<http::request_parser<http::string_body>> parser_;
  int64_t requests_ = 0;  // heads read on this connection

  // The current request.
  uint64_t seq_ = 0;
  bool in_exchange_ = false;
  bool answer_started_ = false, answer_complete_ = false, streaming_ = false;
  bool keep_alive_ = true, close_after_ = false, refusing_ = false, head_only_ = false;
  int version_ = 11;
  std::function<void(Abandon)> abandon_fn_;
  std::optional<Abandon> abandoned_;
  std::optional<SteadyClock::time_point> deadline_;

  // Writing.
  std::deque<std::pair<std::string, size_t>> out_;  // bytes, and how many count as queued
  std::string writing_bytes_;
  size_t writing_counted_ = 0;
  bool writing_ = false;
  bool closed_ = false;
  std::array<char, 16384> linger_buf_{};

  std::atomic<bool> gone_{false};        // release in client_gone/close_now, acquire in gone()
  std::atomic<size_t> queued_bytes_{0};  // relaxed: a bound, not a synchronisation
};

}  // namespace dualpath::serve::http_detail
