// HttpServer on sockets: TCP, or TLS through OpenSSL (http_server.h). The connection code is
// http_session.h's, shared with the replay (http_replay.cc).
#include "serve/http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <cerrno>
#include <cstring>
#include <thread>

#include "serve/http_session.h"

namespace dualpath::serve {

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (const HttpHeader& h : headers) {
    if (h.name.size() == name.size() &&
        std::equal(h.name.begin(), h.name.end(), name.begin(),
                   [&](char a, char b) { return lower(a) == lower(b); })) {
      return h.value;
    }
  }
  return std::nullopt;
}

// ---- ListeningSocket ----

Result<ListeningSocket> ListeningSocket::bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return Status::unavailable(fmt::format(
        "cannot bind the API to {}:{}: the host does not resolve ({}): give an address of this "
        "host with --host",
        host, port, ::gai_strerror(rc)));
  }
  int last_errno = 0;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    // SO_REUSEADDR lets a restarted server bind while its old connections sit in TIME_WAIT; on
    // Linux it does not let two listeners share the port. SO_REUSEPORT, which would, is never
    // set: a second `serve` on a held port must fail, not split the traffic (issue 37).
    const int one = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      sockaddr_storage bound{};
      socklen_t len = sizeof(bound);
      int bound_port = port;
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
        bound_port = bound.ss_family == AF_INET6
                         ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                         : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      }
      const bool v6 = a->ai_family == AF_INET6;
      ::freeaddrinfo(found);
      return ListeningSocket(fd, bound_port, v6);
    }
    last_errno = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (last_errno == EADDRINUSE) {
    return Status::unavailable(fmt::format(
        "cannot bind the API to {}:{}: the port is in use (another `dualpath serve`, or another "
        "program, listens on it: `ss -ltnp 'sport = :{}'` shows which); pick another --port",
        host, port, port));
  }
  return Status::unavailable(fmt::format(
      "cannot bind the API to {}:{}: {} (errno {}); pick another --port, or a --host that is an "
      "address of this host",
      host, port, std::strerror(last_errno), last_errno));
}

ListeningSocket::ListeningSocket(ListeningSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), port_(other.port_), ipv6_(other.ipv6_) {}

ListeningSocket& ListeningSocket::operator=(ListeningSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    port_ = other.port_;
    ipv6_ = other.ipv6_;
  }
  return *this;
}

ListeningSocket::~ListeningSocket() {
  if (fd_ >= 0) ::close(fd_);
}

int ListeningSocket::release() { return std::exchange(fd_, -1); }

namespace http_detail {

using TcpStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

template <>
struct StreamTraits<TcpStream> {
  static constexpr bool kHasClock = true;
  static constexpr bool kTls = false;
  static void expires_after(TcpStream& s, HttpDuration d) { s.expires_after(d); }
  static int native_fd(TcpStream& s) { return s.socket().native_handle(); }
  template <class H>
  static void async_handshake(TcpStream&, H&&) {}
  template <class H>
  static void async_shutdown(TcpStream& s, H&& h) {
    beast::error_code ec;
    s.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
    net::post(s.get_executor(), [h = std::forward<H>(h), ec]() mutable { h(ec); });
  }
  static void close(TcpStream& s) { s.close(); }
};

template <>
struct StreamTraits<TlsStream> {
  static constexpr bool kHasClock = true;
  static constexpr bool kTls = true;
  static void expires_after(TlsStream& s, HttpDuration d) {
    beast::get_lowest_layer(s).expires_after(d);
  }
  static int native_fd(TlsStream& s) { return beast::get_lowest_layer(s).socket().native_handle(); }
  template <class H>
  static void async_handshake(TlsStream& s, H&& h) {
    s.async_handshake(net::ssl::stream_base::server, std::forward<H>(h));
  }
  // close_notify, and the peer's, within kLingerTime.
  template <class H>
  static void async_shutdown(TlsStream& s, H&& h) {
    beast::get_lowest_layer(s).expires_after(kLingerTime);
    s.async_shutdown(std::forward<H>(h));
  }
  static void close(TlsStream& s) { beast::get_lowest_layer(s).close(); }
};

}  // namespace http_detail

using namespace http_detail;

namespace {

Status load_tls_context(net::ssl::context& tls,
                        const std::string& certfile,
                        const std::string& keyfile) {
  if (certfile.empty() || keyfile.empty()) {
    return Status::invalid_argument(
        "HTTPS needs both --ssl-certfile (the certificate chain, PEM) and --ssl-keyfile (its "
        "private key, PEM)");
  }
  // TLS 1.2 and 1.3 only: the older protocols have known breaks.
  tls.set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                  net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                  net::ssl::context::no_tlsv1_1 | net::ssl::context::single_dh_use);
  beast::error_code ec;
  tls.use_certificate_chain_file(certfile, ec);
  if (ec) {
    return Status::invalid_argument(fmt::format(
        "--ssl-certfile {}: cannot load a PEM certificate chain: {}", certfile, ec.message()));
  }
  tls.use_private_key_file(keyfile, net::ssl::context::pem, ec);
  if (ec) {
    return Status::invalid_argument(
        fmt::format("--ssl-keyfile {}: cannot load a PEM private key: {}", keyfile, ec.message()));
  }
  if (SSL_CTX_check_private_key(tls.native_handle()) != 1) {
    return Status::invalid_argument(fmt::format(
        "--ssl-keyfile {} is not the private key of --ssl-certfile {}", keyfile, certfile));
  }
  return Status::ok();
}

}  // namespace

Status check_tls_files(const std::string& certfile, const std::string& keyfile) {
  net::ssl::context tls(net::ssl::context::tls_server);
  return load_tls_context(tls, certfile, keyfile);
}

// Threads: io_threads run ioc_ (the acceptor on its strand, each session on its own);
// pool_ runs run_blocking work.
class HttpServer::Impl {
 public:
  Impl(HttpServerOptions o, HttpHandler& handler)
      : options_(std::move(o)),
        ctx_(handler,
             options_.limits,
             [this](std::function<void()> work) { post_blocking(std::move(work)); }),
        pool_(static_cast<size_t>(std::max(1, options_.handler_threads))),
        acceptor_(net::make_strand(ioc_)),
        retry_(acceptor_.get_executor()) {}

  ~Impl() {
    std::vector<std::function<void()>> aborts;
    {
      MutexLock lock(ctx_.mu);
      ctx_.stopping = true;
      for (auto& [id, abort] : ctx_.live) aborts.push_back(abort);
    }
    stopping_.store(true, std::memory_order_release);
    net::post(acceptor_.get_executor(), [this] {
      beast::error_code ec;
      acceptor_.close(ec);
      retry_.cancel();
    });
    for (auto& abort : aborts) abort();  // abandons what runs: turns are cancelled
    pool_.join();                        // their handlers answer and return
    work_.reset();
    ioc_.stop();
    for (std::thread& t : io_threads_) t.join();
  }

  Status start(ListeningSocket socket) {
    if (!options_.ssl_certfile.empty() || !options_.ssl_keyfile.empty()) {
      DP_RETURN_IF_ERROR(load_tls());
    }
    beast::error_code ec;
    port_ = socket.port();
    const auto protocol = socket.ipv6() ? net::ip::tcp::v6() : net::ip::tcp::v4();
    acceptor_.assign(protocol, socket.release(), ec);
    if (ec) return Status::internal(fmt::format("the API socket: {}", ec.message()));
    do_accept();
    // 0: one, or two with TLS (encryption and handshakes run on the I/O threads).
    const int n = options_.io_threads > 0 ? options_.io_threads : (tls_ ? 2 : 1);
    for (int i = 0; i < n; ++i) {
      io_threads_.emplace_back([this] { run_io(); });
    }
    return Status::ok();
  }

  int port() const { return port_; }
  bool tls() const { return tls_.has_value(); }
  Stats stats() const {
    return {ctx_.open.load(std::memory_order_relaxed), accepted_.load(std::memory_order_relaxed),
            refused_.load(std::memory_order_relaxed)};
  }

 private:
  Status load_tls() {
    tls_.emplace(net::ssl::context::tls_server);
    return load_tls_context(*tls_, options_.ssl_certfile, options_.ssl_keyfile);
  }

  // The one catch boundary of an I/O thread: a handler that throws (a bug) is logged and the
  // loop goes on.
  void run_io() {
    while (true) {
      try {
        ioc_.run();
        return;
      } catch (const std::exception& e) {
        DP_LOG_ERROR("http: an I/O handler threw (a bug in dualpath): {}", e.what());
      } catch (...) {
        DP_LOG_ERROR("http: an I/O handler threw (a bug in dualpath)");
      }
    }
  }

  // The one catch boundary of the handler pool.
  void post_blocking(std::function<void()> work) {
    if (stopping_.load(std::memory_order_acquire)) return;  // dropped: its exchange answers 500
    net::post(pool_, [w = std::move(work)] {
      try {
        w();
      } catch (const std::exception& e) {
        DP_LOG_ERROR("http: a request handler threw (a bug in dualpath): {}", e.what());
      } catch (...) {
        DP_LOG_ERROR("http: a request handler threw (a bug in dualpath)");
      }
    });
  }

  void do_accept() {
    acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec,
                                                          net::ip::tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      if (ec) {
        // Out of descriptors (EMFILE) and the like: wait a little rather than spin.
        DP_LOG_WARN("http: accept failed: {}; retrying in 50 ms", ec.message());
        retry_.expires_after(std::chrono::milliseconds(50));
        retry_.async_wait([this](beast::error_code e) {
          if (!e) do_accept();
        });
        return;
      }
      accepted_.fetch_add(1, std::memory_order_relaxed);
      if (ctx_.open.load(std::memory_order_relaxed) >= options_.max_connections) {
        refused_.fetch_add(1, std::memory_order_relaxed);
        socket.close(ec);
      } else {
        socket.set_option(net::ip::tcp::no_delay(true), ec);  // SSE: each event at once
        if (tls_) {
          std::make_shared<Session<TlsStream>>(TlsStream(TcpStream(std::move(socket)), *tls_), ctx_)
              ->start();
        } else {
          std::make_shared<Session<TcpStream>>(TcpStream(std::move(socket)), ctx_)->start();
        }
      }
      do_accept();
    });
  }

  const HttpServerOptions options_;
  // Declared before ioc_: sessions destroyed with ioc_'s pending handlers deregister here.
  SessionContext ctx_;
  std::atomic<bool> stopping_{false};  // release in ~Impl, acquire in post_blocking
  net::thread_pool pool_;
  net::io_context ioc_;
  net::executor_work_guard<net::io_context::executor_type> work_{ioc_.get_executor()};
  net::ip::tcp::acceptor acceptor_;
  net::steady_timer retry_;
  std::optional<net::ssl::context> tls_;
  std::vector<std::thread> io_threads_;
  int port_ = 0;
  std::atomic<int64_t> accepted_{0}, refused_{0};  // relaxed: statistics
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;

Result<std::unique_ptr<HttpServer>> HttpServer::start(HttpServerOptions options,
                                                      HttpHandler& handler,
                                                      std::optional<ListeningSocket> socket) {
  if (!socket) {
    DP_ASSIGN_OR_RETURN(ListeningSocket s, ListeningSocket::bind(options.host, options.port));
    socket.emplace(std::move(s));
  }
  auto impl = std::make_unique<Impl>(std::move(options), handler);
  DP_RETURN_IF_ERROR(impl->start(std::move(*socket)));
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->port(); }
bool HttpServer::tls() const { return impl_->tls(); }
HttpServer::Stats HttpServer::stats() const { return impl_->stats(); }

}  // namespace dualpath::serve
