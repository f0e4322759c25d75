// The whole request on any bytes: request line, path, headers and body, through the server's
// connection code (Beast's parser, the limits, keep-alive, pipelining, chunked bodies; replayed
// on an in-memory stream by replay_http_connection) and the API's handlers and error paths
// (routing, keys, the body parser, tools, streaming), on a fake control plane that answers
// without nodes (serve/fake_turn_service.h). The first byte picks how the bytes trickle in.
// Checks besides "no crash, no UB, no exception": no answer is a 500 (only our bugs give one),
// and every byte the server writes is valid UTF-8 (it serialises client strings with
// replacement).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "serve/fake_turn_service.h"
#include "serve/http_api.h"
#include "serve/http_server.h"

namespace {

using namespace dualpath::serve;

HttpApi& api() {
  static FakeTurnService turns;
  static std::unique_ptr<HttpApi> a = [] {
    // One key, so that the dictionary's Authorization header reaches the scoped handlers.
    const std::string path = "/tmp/dualpath-http-request-fuzz-keys." + std::to_string(::getpid());
    std::ofstream(path) << "[[keys]]\nname = \"fuzz\"\nkey = \"fuzz-key-1\"\ncache_namespace = "
                           "\"t\"\nscopes = [\"models\", \"chat\", \"completions\", "
                           "\"metrics\"]\n";
    auto keys = ApiKeys::load(path);
    ::unlink(path.c_str());
    if (!keys.is_ok()) std::abort();
    ApiOptions o;
    o.keys = std::move(keys).value();
    o.tool_call_parser = "hermes";
    o.max_model_len = 4096;
    o.max_body_bytes = 1 << 16;
    auto made = HttpApi::create(o, turns);
    if (!made.is_ok()) std::abort();
    return std::move(made).value();
  }();
  return *a;
}

// The API, with a 500 (a handler that threw or never answered: our bug) made a crash.
class NoInternalErrors final : public HttpHandler {
 public:
  explicit NoInternalErrors(HttpApi& api) : api_(api) {}
  std::optional<HttpResponse> check_head(const HttpRequest& head) override {
    return api_.check_head(head);
  }
  void handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override {
    api_.handle(std::move(request), std::move(exchange));
  }
  HttpResponse protocol_error(int status, const std::string& message) override {
    if (status == 500) std::abort();
    return api_.protocol_error(status, message);
  }

 private:
  HttpApi& api_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  HttpApi& a = api();
  // 1 to 15: the bytes trickle in that many at a time (each read a trip through Beast's parser,
  // slow: one input in 16); else as much as a read asks for.
  const size_t chunk = data[0] < 16 ? data[0] : 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  NoInternalErrors handler(a);
  const std::string out = replay_http_connection(input, handler, a.limits(), chunk);
  if (invalid_utf8_at(out)) std::abort();
  return 0;
}
