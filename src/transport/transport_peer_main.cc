// dp_transport_peer: the peer process of the transport tests (peer_process.h).

#include <cstdlib>
#include <string>

#include "transport/peer_process.h"

int main(int argc, char** argv) {
  dualpath::transport::PeerOptions options;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    std::string value = argv[i + 1];
    if (key == "--peer-port") options.oob_port = static_cast<uint16_t>(std::stoi(value));
    if (key == "--peer-tls") options.transports = value;
    if (key == "--peer-devices") options.net_devices = value == "-" ? "" : value;
    if (key == "--peer-region-bytes") options.region_bytes = std::stoull(value);
    if (key == "--peer-name") options.name = value;
    if (key == "--peer-poll-us") options.poll_us = std::stoull(value);
    if (key == "--peer-busy-us") options.poll_in_flight_us = std::stoll(value);
  }
  return dualpath::transport::run_transport_peer(options);
}
