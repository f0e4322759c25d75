#pragma once
// One POST whose response is read as it streams (SSE), for the benchmarks' HTTP clients
// (`bench serve`, `bench soak`, `bench control`): a JSON body, each chunk of the answer handed to
// `feed` as it arrives. True when the exchange completed at the HTTP level (`res.status` then
// says how it went); false with `err` set otherwise.

#include <httplib.h>

#include <functional>
#include <string>

namespace dualpath::bench {

inline bool post_streamed(httplib::Client& cli, const std::string& path, std::string body,
                          const std::function<void(const char*, size_t)>& feed,
                          httplib::Response& res, httplib::Error& err) {
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = {{"Accept", "text/event-stream"}};
  req.body = std::move(body);
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    feed(data, n);
    return true;
  };
  err = httplib::Error::Success;
  return cli.send(req, res, err);
}

}  // namespace dualpath::bench
