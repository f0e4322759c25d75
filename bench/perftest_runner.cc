#include "bench/perftest_runner.h"

#include "bench/free_port.h"

#include "common/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>


namespace dualpath::transport {
namespace {

using Clock = std::chrono::steady_clock;

// Whether something listens on `port` (read from /proc/net/tcp, so that we do not connect: the
// perftest server would take our probe for its client).
bool is_listening(uint16_t port) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);
  std::string want = fmt::format(":{:04X}", port);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A" && local.size() >= want.size() &&
        local.compare(local.size() - want.size(), want.size(), want) == 0) {
      return true;
    }
  }
  return false;
}

Result<Subprocess> spawn(const std::vector<std::string>& args,
                         const std::vector<std::string>& env_extra,
                         const std::string& output_path) {
  SpawnOptions o;
  o.argv = args;
  o.search_path = true;
  o.env = env_extra;
  o.unset_env = {"UCX_TLS", "UCX_NET_DEVICES"};
  o.stdout_path = output_path;
  o.stderr_to_stdout = true;
  o.die_with_parent = true;
  auto child = Subprocess::spawn(o);
  if (!child.is_ok()) {
    return Status::not_found(fmt::format("cannot run '{}': {}; install ucx-utils", args[0],
                                         child.status().message()));
  }
  return child;
}

// Waits for the child with a deadline; kills it when the deadline passes. Returns the exit code.
int reap(Subprocess& child, Clock::time_point deadline) {
  auto status = child.wait_for(std::max(Duration(0), std::chrono::duration_cast<Duration>(
                                                         deadline - Clock::now())));
  if (!status.is_ok()) {
    child.stop(SIGKILL, Duration(0));
    return 124;
  }
  return WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Result<PerftestResult> run_perftest(const PerftestRun& run) {
  auto deadline = Clock::now() + run.timeout;
  DP_ASSIGN_OR_RETURN(const uint16_t port, bench::free_loopback_port());
  std::vector<std::string> env{"UCX_TLS=" + run.transports};
  if (!run.net_devices.empty()) env.push_back("UCX_NET_DEVICES=" + run.net_devices);
  std::string base = fmt::format("/tmp/dp-perftest-{}-{}", getpid(), port);
  std::vector<std::string> server_args{run.perftest, "-p", std::to_string(port)};
  if (run.peer_error_handling) server_args.push_back("-e");
  const std::string server_out = base + ".server", client_out = base + ".client";
  DP_ASSIGN_OR_RETURN(Subprocess server, spawn(server_args, env, server_out));
  // Polling /proc for the listening socket: the server has no readiness signal of its own.
  while (!is_listening(port)) {
    if (Clock::now() > deadline || !server.running()) {
      server.stop(SIGKILL, Duration(0));
      return Status::io_error(
          fmt::format("ucx_perftest server did not start: {}", slurp(server_out)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::vector<std::string> client_args{run.perftest, "127.0.0.1",
                                       "-p",         std::to_string(port),
                                       "-t",         run.test,
                                       "-s",         std::to_string(run.message_bytes),
                                       "-n",         std::to_string(run.iterations),
                                       "-w",         std::to_string(run.warmup_iterations),
                                       "-v"};
  if (run.peer_error_handling) client_args.push_back("-e");
  auto client = spawn(client_args, env, client_out);
  if (!client.is_ok()) return client.status();  // the server is killed with its Subprocess
  int client_rc = reap(*client, deadline);
  int server_rc = reap(server, Clock::now() + std::chrono::seconds(10));
  std::string out = slurp(client_out);
  std::remove(client_out.c_str());
  std::remove(server_out.c_str());
  if (client_rc != 0) {
    return Status::io_error(fmt::format("ucx_perftest -t {} -s {} exited with {} (server {}): {}",
                                        run.test, run.message_bytes, client_rc, server_rc, out));
  }
  // The last CSV line: iterations,p50_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr
  // with bandwidth in MB/s (2^20 bytes) and latency in microseconds.
  std::istringstream lines(out);
  std::string line;
  std::string last;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.find(',') != std::string::npos &&
        line.find("iterations") == std::string::npos && line.find('[') == std::string::npos) {
      last = line;
    }
  }
  std::vector<double> fields;
  std::istringstream csv(last);
  std::string field;
  while (std::getline(csv, field, ',')) {
    try {
      fields.push_back(std::stod(field));
    } catch (...) {
      fields.clear();
      break;
    }
  }
  if (fields.size() < 6) {
    return Status::io_error(fmt::format("cannot parse ucx_perftest output: {}", out));
  }
  PerftestResult r;
  r.latency_us = fields[3];
  r.bandwidth_bytes_per_s = fields[5] * 1024.0 * 1024.0;
  return r;
}

}  // namespace dualpath::transport
