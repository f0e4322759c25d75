// The server's connection code (http_session.h) on Beast's in-memory test stream: what the
// fuzzer and the framing tests drive (http_server.h replay_http_connection).
#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>

#include "serve/http_server.h"
#include "serve/http_session.h"

namespace dualpath::serve {
namespace http_detail {

using ReplayStream = beast::test::stream;

// No clock (deadlines and the hang-up poll are the sockets'), no TLS; closing ends the stream.
template <>
struct StreamTraits<ReplayStream> {
  static constexpr bool kHasClock = false;
  static constexpr bool kTls = false;
  static void expires_after(ReplayStream&, HttpDuration) {}
  static int native_fd(ReplayStream&) { return -1; }
  template <class H>
  static void async_handshake(ReplayStream&, H&&) {}
  template <class H>
  static void async_shutdown(ReplayStream& s, H&& h) {
    net::post(s.get_executor(), [h = std::forward<H>(h)]() mutable { h(beast::error_code{}); });
  }
  static void close(ReplayStream& s) { s.close(); }
};

}  // namespace http_detail

std::string replay_http_connection(std::string_view input,
                                   HttpHandler& handler,
                                   const HttpLimits& limits,
                                   size_t read_chunk_bytes) {
  using namespace http_detail;
  net::io_context ioc;
  SessionContext ctx(handler, limits,
                     [&ioc](std::function<void()> work) { net::post(ioc, std::move(work)); });
  ReplayStream server(ioc);
  ReplayStream client(ioc);
  server.connect(client);
  server.append(beast::string_view(input.data(), input.size()));
  server.close_remote();  // the client's sending side ends after `input`
  if (read_chunk_bytes > 0) server.read_size(read_chunk_bytes);
  std::make_shared<Session<ReplayStream>>(std::move(server), ctx)->start();
  ioc.run();
  const auto out = client.str();
  return std::string(out.data(), out.size());
}

}  // namespace dualpath::serve
