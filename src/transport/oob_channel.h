#pragma once
// OobChannel: the out-of-band exchange of worker addresses and region descriptors between two
// processes, over a TCP socket (UCX needs the peer's address before it can connect; this is the
// bootstrap, in the role MPI or a key-value store plays elsewhere). Messages are framed
// (u32 length + bytes); every call takes a deadline. Thread-compatible.
//
//   parent:  auto listener = OobListener::listen("127.0.0.1");   // port 0: the kernel picks
//            spawn the child with listener->port() ...
//            auto ch = listener->accept(5s);  ch->send(my_address);  peer = ch->receive(5s);
//   child:   auto ch = OobChannel::connect("127.0.0.1", port, 5s); ...

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dualpath/result.h"
#include "dualpath/units.h"

namespace dualpath::transport {

class OobChannel {
 public:
  static Result<std::unique_ptr<OobChannel>> connect(const std::string& host,
                                                     uint16_t port,
                                                     Duration timeout);
  explicit OobChannel(int fd) : fd_(fd) {}
  ~OobChannel();
  OobChannel(const OobChannel&) = delete;
  OobChannel& operator=(const OobChannel&) = delete;

  Status send(std::span<const std::byte> message, Duration timeout);
  // kUnavailable when the peer closed the connection (e.g. it exited), kTimedOut on the deadline.
  Result<std::vector<std::byte>> receive(Duration timeout);
  int fd() const { return fd_; }

 private:
  Status write_all(const void* data, size_t size, Duration timeout);
  Status read_all(void* data, size_t size, Duration timeout);
  int fd_;
};

class OobListener {
 public:
  // Listens on `host` at `port` (0: any free port).
  static Result<std::unique_ptr<OobListener>> listen(const std::string& host, uint16_t port = 0);
  ~OobListener();
  OobListener(const OobListener&) = delete;
  OobListener& operator=(const OobListener&) = delete;

  uint16_t port() const { return port_; }
  Result<std::unique_ptr<OobChannel>> accept(Duration timeout);

 private:
  OobListener(int fd, uint16_t port) : fd_(fd), port_(port) {}
  int fd_;
  uint16_t port_;
};

// Helpers for messages made of strings (e.g. a command word) over the channel.
std::vector<std::byte> to_bytes(std::string_view text);
std::string to_text(std::span<const std::byte> bytes);

}  // namespace dualpath::transport
