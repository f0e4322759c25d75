#include "transport/peer_process.h"

#include <fmt/format.h>
#include <signal.h>
#include <charconv>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>

#include "common/log.h"
#include "transport/wire_format.h"


namespace dualpath::transport {
namespace {

constexpr auto kOobTimeout = std::chrono::seconds(20);

}  // namespace

std::vector<std::string> peer_arguments(const PeerOptions& options) {
  return {"--peer-port",         std::to_string(options.oob_port),
          "--peer-tls",          options.transports,
          "--peer-devices",      options.net_devices.empty() ? "-" : options.net_devices,
          "--peer-region-bytes", std::to_string(options.region_bytes),
          "--peer-name",         options.name,
          "--peer-poll-us",      std::to_string(options.poll_us),
          "--peer-busy-us",      std::to_string(options.poll_in_flight_us)};
}

int run_transport_peer(const PeerOptions& options) {
  auto fail = [&](const Status& s) {
    std::fprintf(stderr, "transport peer '%s': %s\n", options.name.c_str(), s.to_string().c_str());
    return 1;
  };
  auto channel = OobChannel::connect("127.0.0.1", options.oob_port, kOobTimeout);
  if (!channel.is_ok()) return fail(channel.status());
  ContextOptions co;
  co.transports = options.transports;
  co.net_devices = options.net_devices;
  auto context = Context::create(co);
  if (!context.is_ok()) return fail(context.status());
  WorkerOptions model_options{options.name};
  model_options.poll_before_sleep = std::chrono::microseconds(options.poll_us);
  if (options.poll_in_flight_us >= 0) {
    model_options.poll_while_in_flight = std::chrono::microseconds(options.poll_in_flight_us);
  }
  auto worker = Worker::create(**context, model_options);
  if (!worker.is_ok()) return fail(worker.status());
  Worker& w = **worker;
  // A second worker (progress thread) for the KV class, on the same context: the peer side of
  // the per-class lanes (docs/transport.md). It only receives puts, so it needs no handlers.
  WorkerOptions kv_options{options.name + "-kv"};
  kv_options.nice = kKvWorkerNice;
  kv_options.poll_before_sleep = model_options.poll_before_sleep;
  kv_options.poll_while_in_flight = model_options.poll_while_in_flight;
  auto kv_worker = Worker::create(**context, kv_options);
  if (!kv_worker.is_ok()) return fail(kv_worker.status());
  // UCX-allocated, so that shared-memory peers can map it (a direct memcpy per put).
  auto region = w.allocate_memory(options.region_bytes);
  if (!region.is_ok()) return fail(region.status());
  std::span<std::byte> buffer = (*region)->span();
  std::memset(buffer.data(), 0, buffer.size());

  auto parent_address = (*channel)->receive(kOobTimeout);
  if (!parent_address.is_ok()) return fail(parent_address.status());
  Status st = (*channel)->send(w.address(), kOobTimeout);
  if (st.is_ok()) st = (*channel)->send((*kv_worker)->address(), kOobTimeout);
  if (st.is_ok()) st = (*channel)->send((*region)->descriptor(), kOobTimeout);
  if (!st.is_ok()) return fail(st);
  auto parent = w.connect(*parent_address);
  if (!parent.is_ok()) return fail(parent.status());
  Endpoint& reply_ep = **parent;

  // Replies are fire-and-forget from the progress thread (the header is copied).
  std::atomic<uint64_t> sink_bytes{0};  // relaxed: a statistic
  auto reply = [&](const AmMessage& m) {
    auto op = w.send_am(reply_ep, kEchoReplyAm, m.header, {});
    if (op.is_ok()) {
      op->detach();
    } else {
      DP_LOG_WARN("peer: reply failed: {}", op.status().to_string());
    }
  };
  st = w.set_am_handler(kEchoAm, reply);
  if (st.is_ok()) {
    st = w.set_am_handler(kSinkAm, [&](const AmMessage& m) {
      sink_bytes.fetch_add(m.data.size(), std::memory_order_relaxed);
      if (m.header.empty() || m.header[0] == std::byte{0}) return;
      if (m.header[0] == std::byte{1}) return reply(m);
      std::vector<std::byte> ack(m.header.begin(), m.header.end());
      uint64_t sum = fnv1a64(m.data);
      const auto* b = reinterpret_cast<const std::byte*>(&sum);
      ack.insert(ack.end(), b, b + sizeof sum);
      reply(AmMessage{m.id, ack, {}});
    });
  }
  if (!st.is_ok()) return fail(st);
  (void)(*channel)->send(to_bytes("ready"), kOobTimeout);

  for (;;) {
    auto msg = (*channel)->receive(std::chrono::hours(24));
    if (!msg.is_ok()) break;  // the parent closed the channel: exit
    std::string cmd = to_text(*msg);
    std::string answer = "ok";
    if (cmd == "quit") break;
    if (cmd == "checksum") {
      answer = std::to_string(fnv1a64(buffer));
    } else if (cmd.rfind("fill ", 0) == 0) {
      int value = 0;
      const auto [end, ec] = std::from_chars(cmd.data() + 5, cmd.data() + cmd.size(), value);
      if (ec == std::errc() && end == cmd.data() + cmd.size() && value >= 0 && value <= 255) {
        std::memset(buffer.data(), value, buffer.size());
      } else {
        answer = "fill takes a byte value 0..255";
      }
    } else {
      answer = "unknown command";
    }
    if (!(*channel)->send(to_bytes(answer), kOobTimeout).is_ok()) break;
  }
  parent->reset();
  region->reset();
  kv_worker->reset();
  return 0;
}

Result<std::unique_ptr<PeerProcess>> PeerProcess::spawn(Worker& worker,
                                                        const std::string& program,
                                                        const std::vector<std::string>& args,
                                                        PeerOptions options,
                                                        Duration timeout,
                                                        Worker* kv_worker) {
  DP_ASSIGN_OR_RETURN(auto listener, OobListener::listen("127.0.0.1"));
  options.oob_port = listener->port();
  SpawnOptions spawn;
  spawn.argv = {program};
  spawn.argv.insert(spawn.argv.end(), args.begin(), args.end());
  auto peer_args = peer_arguments(options);
  spawn.argv.insert(spawn.argv.end(), peer_args.begin(), peer_args.end());
  spawn.die_with_parent = true;

  std::unique_ptr<PeerProcess> peer(new PeerProcess());
  auto child = Subprocess::spawn(spawn);
  if (!child.is_ok()) {
    return child.status().with_context(fmt::format("cannot start peer process '{}'", program));
  }
  peer->process_ = std::move(child).value();
  auto context = [&](Status s) {
    return s.with_context(
        fmt::format("peer process '{}' (pid {})", options.name, peer->process_.pid()));
  };
  auto channel = listener->accept(timeout);
  if (!channel.is_ok()) return context(channel.status());
  peer->channel_ = std::move(channel).value();
  DP_RETURN_IF_ERROR(context(peer->channel_->send(worker.address(), timeout)));
  auto address = peer->channel_->receive(timeout);
  if (!address.is_ok()) return context(address.status());
  auto kv_address = peer->channel_->receive(timeout);
  if (!kv_address.is_ok()) return context(kv_address.status());
  auto descriptor = peer->channel_->receive(timeout);
  if (!descriptor.is_ok()) return context(descriptor.status());
  peer->address_ = *address;
  peer->descriptor_ = *descriptor;
  DP_ASSIGN_OR_RETURN(peer->endpoint_, worker.connect(*address));
  DP_ASSIGN_OR_RETURN(peer->region_, worker.import_region(*peer->endpoint_, *descriptor));
  if (kv_worker != nullptr) {
    DP_ASSIGN_OR_RETURN(peer->kv_endpoint_, kv_worker->connect(*kv_address));
    DP_ASSIGN_OR_RETURN(peer->kv_region_,
                        kv_worker->import_region(*peer->kv_endpoint_, *descriptor));
  }
  auto ready = peer->channel_->receive(timeout);
  if (!ready.is_ok()) return context(ready.status());
  return peer;
}

Result<std::string> PeerProcess::command(const std::string& text, Duration timeout) {
  DP_RETURN_IF_ERROR(channel_->send(to_bytes(text), timeout));
  DP_ASSIGN_OR_RETURN(auto answer, channel_->receive(timeout));
  return to_text(answer);
}

Result<uint64_t> PeerProcess::region_checksum(Duration timeout) {
  DP_ASSIGN_OR_RETURN(std::string answer, command("checksum", timeout));
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(answer.data(), answer.data() + answer.size(), value);
  if (ec != std::errc() || end != answer.data() + answer.size()) {
    return Status::internal(fmt::format("peer answered '{}' to checksum, not a number", answer));
  }
  return value;
}

Status PeerProcess::fill_region(uint8_t value, Duration timeout) {
  auto answer = command(fmt::format("fill {}", value), timeout);
  if (!answer.is_ok()) return answer.status();
  if (answer->size() == 2 && answer->compare("ok") == 0) return Status::ok();
  return Status::internal("peer answered: " + *answer);
}

Status PeerProcess::stop() {
  const pid_t pid = process_.pid();
  if (!process_.running()) return Status::failed_precondition("the peer process has exited");
  if (::kill(pid, SIGSTOP) != 0) {
    return Status::io_error(fmt::format("SIGSTOP to pid {}: {}", pid, std::strerror(errno)));
  }
  // WUNTRACED: returns once the child is stopped (it is not reaped).
  int wstatus = 0;
  if (waitpid(pid, &wstatus, WUNTRACED) != pid || !WIFSTOPPED(wstatus)) {
    return Status::internal(fmt::format("peer pid {} did not stop", pid));
  }
  return Status::ok();
}

void PeerProcess::kill_now() { process_.stop(SIGKILL, Duration(0)); }

void PeerProcess::disconnect() {
  kv_region_.reset();
  kv_endpoint_.reset();
  region_.reset();
  endpoint_.reset();
}

PeerProcess::~PeerProcess() {
  disconnect();
  if (!process_.running()) return;
  if (channel_) (void)channel_->send(to_bytes("quit"), std::chrono::seconds(1));
  // Reap with a deadline; a child that does not exit in time is killed.
  if (!process_.wait_for(std::chrono::seconds(5)).is_ok()) kill_now();
}

}  // namespace dualpath::transport
