// dp_transport_peer: the peer process of the transport tests (peer_process.h).

#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>

#include "transport/peer_process.h"

namespace {

// Parses a whole decimal argument; false (nothing written) when it is not one.
template <class T>
bool parse(std::string_view text, T& out) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  dualpath::transport::PeerOptions options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    bool ok = true;
    if (key == "--peer-port") ok = parse(value, options.oob_port);
    if (key == "--peer-tls") options.transports = value;
    if (key == "--peer-devices") options.net_devices = value == "-" ? "" : value;
    if (key == "--peer-region-bytes") ok = parse(value, options.region_bytes);
    if (key == "--peer-name") options.name = value;
    if (key == "--peer-poll-us") ok = parse(value, options.poll_us);
    if (key == "--peer-busy-us") ok = parse(value, options.poll_in_flight_us);
    if (!ok) {
      std::fprintf(stderr, "dp_transport_peer: %s '%s' is not a number\n", key.c_str(),
                   value.c_str());
      return 2;
    }
  }
  return dualpath::transport::run_transport_peer(options);
}
