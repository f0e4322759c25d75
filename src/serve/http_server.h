#pragma once
// HttpServer: the HTTP/1.1 and HTTPS transport of `dualpath serve` (docs/api.md "Transport").
//
// Boost.Beast on Asio (Debian's libboost-dev), behind this header, which includes neither: Beast
// is compile-time heavy, so it lives in http_server.cc (the sockets) and http_replay.cc (the same
// connection code on an in-memory stream, for the fuzzer and the unit tests) only.
// It replaced cpp-httplib 0.11.4 (issue 32), which could not bound a chunked body, the number of
// headers or the time to send them, and ran one thread per connection.
//
// What a connection goes through, each step with its limit (HttpLimits):
//   accept        beyond max_connections, a new connection is closed at once
//   TLS handshake header_timeout
//   head          header_timeout for the first byte of a connection's first request,
//                 idle_timeout for a later one's (keep-alive), then header_timeout for the rest;
//                 at most max_header_bytes and max_headers
//                 (a missed deadline closes the connection: the stream closes its socket)
//   check_head    the handler refuses early (keys, route, size) before any body byte is read
//   body          body_timeout; at most max_body_bytes, for Content-Length and chunked alike
//   handle        on the I/O thread; blocking work goes to the handler pool (run_blocking)
//   response      each write within write_timeout; a stream's unsent bytes at most
//                 max_stream_queue_bytes; request_timeout after the body: the handler is told
// A client that hangs up while its request runs is noticed within client_poll_interval (the
// socket reports the peer's FIN, POLLRDHUP) and the handler is told (on_abandon).
//
// Threads: io_threads I/O threads run every connection (each on its own strand: its handlers
// never run concurrently); handler_threads pool threads run HttpExchange::run_blocking work.
// start() and the destructor from one thread; HttpExchange is thread-safe.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::serve {

struct HttpHeader {
  std::string name;
  std::string value;
};

// A request as the client sent it (header bytes are not decoded or validated beyond HTTP's
// grammar: the handler checks UTF-8 and percent-encoding).
struct HttpRequest {
  std::string method;  // any token ("GET", "POST", "BREW")
  std::string target;  // path and query, still percent-encoded
  int version = 11;    // 10 or 11
  std::vector<HttpHeader> headers;
  std::string body;  // empty in check_head
  // The first header of this name (ASCII case-insensitive), if any.
  std::optional<std::string_view> header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<HttpHeader> headers;  // besides Content-Type, Content-Length, Connection
  std::string body;
  bool close = false;  // close the connection after it
};

// Why a request's handler is told to give up.
enum class Abandon {
  kClientGone,  // the client hung up or stopped reading; nothing more reaches it
  kDeadline,    // request_timeout passed; the client is still there for an error
  kShutdown,    // the server is stopping
};

// The answer side of one request. Thread-safe; every method returns at once (writes are queued
// to the connection's strand). The handler may keep it past handle() (a turn's token callback
// writes through it); when the last reference goes without a complete answer, the server ends it
// (500 if nothing was sent, else the stream is closed).
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  // A whole response. Once; ignored after the client has gone.
  virtual void respond(HttpResponse response) = 0;
  // A streamed response (chunked for HTTP/1.1, close-delimited for 1.0): the head now, then
  // write() per piece and end().
  virtual void start_stream(int status,
                            std::string content_type,
                            std::vector<HttpHeader> headers) = 0;
  // Queues a piece of the stream. false when the client has gone (the piece is dropped), also
  // when it is more than max_stream_queue_bytes behind (it is then treated as gone).
  virtual bool write(std::string data) = 0;
  virtual void end() = 0;
  // Runs `work` on the handler pool (blocking work: a turn). The handler bounds how many it
  // posts (the pool has handler_threads threads; more wait for one).
  virtual void run_blocking(std::function<void()> work) = 0;
  // `fn` runs once, on the connection's strand, when the request is abandoned (see Abandon);
  // at once if it already was. It must not block. One callback per exchange (a second replaces
  // the first).
  virtual void on_abandon(std::function<void(Abandon)> fn) = 0;
  virtual bool client_gone() const = 0;
};

// The application on the server: the API (http_api.h), or a test's. Called on I/O threads, so
// neither method may block; exceptions are caught by the server (500).
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // The head is complete, the body not read: a response refuses the request now (and the
  // connection closes after it, its body unread); nullopt reads the body.
  virtual std::optional<HttpResponse> check_head(const HttpRequest& head) = 0;
  // The whole request.
  virtual void handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) = 0;
  // The response for an error the server found itself (400 malformed HTTP, 413 body too large,
  // 431 header too large, 500 a handler threw or never answered), in the handler's error
  // format. The connection closes after it. (A client too slow for a deadline gets no answer:
  // its connection is closed.)
  virtual HttpResponse protocol_error(int status, const std::string& message) = 0;
};

using HttpDuration = std::chrono::milliseconds;

// Every bound a connection is held to (docs/api.md "Limits" lists them with their errors).
struct HttpLimits {
  size_t max_body_bytes = size_t{8} << 20;           // 413, any transfer encoding
  uint32_t max_header_bytes = 16 << 10;              // request line + headers: 431
  size_t max_headers = 100;                          // 431
  HttpDuration header_timeout{10'000};               // first byte to the blank line: closed
  HttpDuration body_timeout{60'000};                 // the whole body: closed
  HttpDuration idle_timeout{60'000};                 // keep-alive wait for a next request: closed
  HttpDuration write_timeout{30'000};                // one write to a client that does not read
  HttpDuration request_timeout{600'000};             // body read to the answer's end; 0: none
  size_t max_stream_queue_bytes = size_t{16} << 20;  // a stream's unsent bytes
  HttpDuration client_poll_interval{50};             // how soon a hang-up is noticed
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port
  HttpLimits limits;
  int max_connections = 1024;  // open at once; more are closed at accept
  // 0: one, or two with TLS. The I/O threads only frame and move bytes (handlers parse and run
  // in the pool), and with two, every post from a pool thread (a stream's chunk, a response) woke
  // the one asleep on Asio's condition variable while the other sat in epoll: ~12 % of the
  // scheduler's CPU per turn at 44P88D, 300 turns/s (docs/serve.md). With TLS the I/O threads
  // also encrypt, and handshakes are CPU work: two.
  int io_threads = 0;
  int handler_threads = 16;  // run_blocking's pool
  // Both or neither: HTTPS with this certificate chain and private key (PEM), via OpenSSL.
  std::string ssl_certfile;
  std::string ssl_keyfile;
};

// A TCP socket bound exclusively to host:port (no SO_REUSEPORT: a second server on the port
// fails instead of sharing it; SO_REUSEADDR only lets a restart bind over TIME_WAIT) and
// listening with the system's maximum backlog (SOMAXCONN). Move-only; closes on destruction.
class ListeningSocket {
 public:
  // kUnavailable naming host:port, the reason and the flags to change (--port, --host).
  static Result<ListeningSocket> bind(const std::string& host, int port);
  ListeningSocket(ListeningSocket&& other) noexcept;
  ListeningSocket& operator=(ListeningSocket&& other) noexcept;
  ListeningSocket(const ListeningSocket&) = delete;
  ListeningSocket& operator=(const ListeningSocket&) = delete;
  ~ListeningSocket();
  int port() const { return port_; }
  bool ipv6() const { return ipv6_; }
  int release();  // the descriptor, now the caller's

 private:
  ListeningSocket(int fd, int port, bool ipv6) : fd_(fd), port_(port), ipv6_(ipv6) {}
  int fd_ = -1;
  int port_ = 0;
  bool ipv6_ = false;
};

// Whether a certificate chain and private key (PEM) load and belong together, as start() will
// load them: kInvalidArgument naming the file and the flag. For `serve`, before it starts nodes.
Status check_tls_files(const std::string& certfile, const std::string& keyfile);

class HttpServer {
 public:
  // Serves `handler` (which must outlive the server) on `socket`, or on a socket it binds from
  // options.host and port. kInvalidArgument naming the file when the certificate or key cannot
  // be loaded.
  static Result<std::unique_ptr<HttpServer>> start(HttpServerOptions options,
                                                   HttpHandler& handler,
                                                   std::optional<ListeningSocket> socket = {});
  // Stops accepting, abandons every request in flight (kShutdown), waits for the handler pool's
  // work to return, then closes every connection.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  bool tls() const;
  struct Stats {
    int64_t open_connections = 0;
    int64_t accepted = 0;
    int64_t refused_at_capacity = 0;  // closed at accept: max_connections were open
  };
  Stats stats() const;

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The server's connection code on bytes instead of a socket (http_replay.cc): `input` arrives as
// one client connection that then closes its sending side, `read_chunk_bytes` at a time (0: as
// much as a read asks for); returns every byte the server wrote. Blocking work runs on the
// calling thread; no timer fires (the stream has no clock). For the fuzzer and for unit tests of
// the framing.
std::string replay_http_connection(std::string_view input,
                                   HttpHandler& handler,
                                   const HttpLimits& limits,
                                   size_t read_chunk_bytes = 0);

}  // namespace dualpath::serve
