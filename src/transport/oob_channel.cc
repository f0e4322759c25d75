#include "transport/oob_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace dualpath::transport {
namespace {

// Largest message we accept: addresses and descriptors are a few KiB.
constexpr uint32_t kMaxMessageBytes = 64u << 20;

using Clock = std::chrono::steady_clock;

int millis_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

Status wait_fd(int fd, short events, Clock::time_point deadline, std::string_view what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, millis_left(deadline));
    if (n > 0) return Status::ok();
    if (n == 0) return Status::timed_out(fmt::format("out-of-band {} timed out", what));
    if (errno != EINTR) {
      return Status::io_error(
          fmt::format("poll for out-of-band {}: {}", what, std::strerror(errno)));
    }
  }
}

Result<sockaddr_in> make_addr(const std::string& host, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return Status::invalid_argument(
        fmt::format("'{}' is not an IPv4 address (use e.g. 127.0.0.1)", host));
  }
  return addr;
}

}  // namespace

std::vector<std::byte> to_bytes(std::string_view text) {
  const auto* b = reinterpret_cast<const std::byte*>(text.data());
  return {b, b + text.size()};
}

std::string to_text(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

Result<std::unique_ptr<OobChannel>> OobChannel::connect(const std::string& host,
                                                        uint16_t port,
                                                        Duration timeout) {
  DP_ASSIGN_OR_RETURN(sockaddr_in addr, make_addr(host, port));
  auto deadline = Clock::now() + timeout;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::io_error(fmt::format("socket: {}", std::strerror(errno)));
  auto channel = std::make_unique<OobChannel>(fd);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) {
      return Status::unavailable(
          fmt::format("connect to {}:{}: {}", host, port, std::strerror(errno)));
    }
    DP_RETURN_IF_ERROR(wait_fd(fd, POLLOUT, deadline, "connect"));
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      return Status::unavailable(
          fmt::format("connect to {}:{}: {}", host, port, std::strerror(err)));
    }
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return channel;
}

OobChannel::~OobChannel() {
  if (fd_ >= 0) close(fd_);
}

Status OobChannel::write_all(const void* data, size_t size, Duration timeout) {
  auto deadline = Clock::now() + timeout;
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd_, p, size, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      DP_RETURN_IF_ERROR(wait_fd(fd_, POLLOUT, deadline, "send"));
    } else {
      return Status::unavailable(fmt::format("out-of-band send: {}", std::strerror(errno)));
    }
  }
  return Status::ok();
}

Status OobChannel::read_all(void* data, size_t size, Duration timeout) {
  auto deadline = Clock::now() + timeout;
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::recv(fd_, p, size, 0);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
    } else if (n == 0) {
      return Status::unavailable("out-of-band peer closed the connection");
    } else if (errno == EAGAIN || errno == EINTR) {
      DP_RETURN_IF_ERROR(wait_fd(fd_, POLLIN, deadline, "receive"));
    } else {
      return Status::unavailable(fmt::format("out-of-band receive: {}", std::strerror(errno)));
    }
  }
  return Status::ok();
}

Status OobChannel::send(std::span<const std::byte> message, Duration timeout) {
  auto size = static_cast<uint32_t>(message.size());
  DP_RETURN_IF_ERROR(write_all(&size, sizeof size, timeout));
  return write_all(message.data(), message.size(), timeout);
}

Result<std::vector<std::byte>> OobChannel::receive(Duration timeout) {
  uint32_t size = 0;
  DP_RETURN_IF_ERROR(read_all(&size, sizeof size, timeout));
  if (size > kMaxMessageBytes) {
    return Status::corruption(fmt::format("out-of-band message of {} bytes is too large", size));
  }
  std::vector<std::byte> message(size);
  DP_RETURN_IF_ERROR(read_all(message.data(), size, timeout));
  return message;
}

Result<std::unique_ptr<OobListener>> OobListener::listen(const std::string& host, uint16_t port) {
  DP_ASSIGN_OR_RETURN(sockaddr_in addr, make_addr(host, port));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::io_error(fmt::format("socket: {}", std::strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 16) != 0) {
    int err = errno;
    close(fd);
    return Status::io_error(fmt::format("listen on {}:{}: {}", host, port, std::strerror(err)));
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return std::unique_ptr<OobListener>(new OobListener(fd, ntohs(addr.sin_port)));
}

OobListener::~OobListener() {
  if (fd_ >= 0) close(fd_);
}

Result<std::unique_ptr<OobChannel>> OobListener::accept(Duration timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return std::make_unique<OobChannel>(fd);
    }
    if (errno != EAGAIN && errno != EINTR) {
      return Status::io_error(fmt::format("accept: {}", std::strerror(errno)));
    }
    DP_RETURN_IF_ERROR(wait_fd(fd_, POLLIN, deadline, "accept"));
  }
}

}  // namespace dualpath::transport
