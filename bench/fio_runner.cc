#include "bench/fio_runner.h"

#include "common/subprocess.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

namespace dualpath::store {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string temp_path(const char* what) {
  const char* base = std::getenv("TMPDIR");
  return fmt::format("{}/dualpath-fio-{}-{}.{}", base ? base : "/tmp", ::getpid(),
                     std::chrono::steady_clock::now().time_since_epoch().count(), what);
}

}  // namespace

std::vector<std::string> FioRunner::command_line(const FioJob& job,
                                                 const std::string& output_path) const {
  std::vector<std::string> argv = {
      fio_path_,
      "--name=dualpath-bench",
      "--opendir=" + job.directory,
      std::string("--rw=") + (job.write ? "write" : "read"),
      fmt::format("--bs={}", job.block_bytes),
      "--ioengine=io_uring",
      fmt::format("--iodepth={}", job.queue_depth),
      fmt::format("--direct={}", job.direct ? 1 : 0),
      // Drop the files' cached pages before the run (posix_fadvise DONTNEED), as the dualpath
      // side does: both start cold.
      "--invalidate=1",
      "--output-format=json",
      "--output=" + output_path,
  };
  if (job.write) argv.push_back("--end_fsync=1");  // durable, like dualpath's fsync per block
  return argv;
}

Result<std::string> FioRunner::run_and_capture(const std::vector<std::string>& argv,
                                               const std::string& stdout_path) const {
  const std::string err_path = temp_path("stderr");
  SpawnOptions o;
  o.argv = argv;
  o.search_path = true;
  o.stdout_path = stdout_path;
  o.stderr_path = err_path;
  o.die_with_parent = true;
  auto child = Subprocess::spawn(o);
  if (!child.is_ok()) {
    if (child.status().is_not_found()) {
      return Status::not_found(fmt::format(
          "cannot run '{}'; install fio (scripts/install-deps.sh, or apt-get install fio) or pass "
          "--fio PATH",
          argv[0]));
    }
    return child.status().with_context("cannot start fio");
  }
  auto waited = child->wait_for(timeout_);
  if (!waited.is_ok()) {
    child->stop(SIGKILL, Duration(0));
    ::unlink(err_path.c_str());
    return Status::timed_out(
        fmt::format("fio ran past {:.0f} s and was killed", to_seconds(timeout_)));
  }
  const int status = *waited;
  std::string err = read_text(err_path);
  ::unlink(err_path.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return Status::not_found(fmt::format(
        "cannot run '{}'; install fio (scripts/install-deps.sh, or apt-get install fio) or pass "
        "--fio PATH",
        argv[0]));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::unavailable(fmt::format("fio failed (status {}): {}", status, err));
  }
  return err;
}

Result<std::string> FioRunner::version() const {
  const std::string out_path = temp_path("version");
  auto ran = run_and_capture({fio_path_, "--version"}, out_path);
  std::string out = read_text(out_path);
  ::unlink(out_path.c_str());
  if (!ran.is_ok()) return ran.status();
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

Result<FioResult> FioRunner::run(const FioJob& job) const {
  const std::string json_path = temp_path("json");
  const std::string out_path = temp_path("stdout");
  auto ran = run_and_capture(command_line(job, json_path), out_path);
  ::unlink(out_path.c_str());
  if (!ran.is_ok()) {
    ::unlink(json_path.c_str());
    return ran.status();
  }
  const std::string text = read_text(json_path);
  ::unlink(json_path.c_str());
  // nlohmann::json throws on bad input; the exception stops here (STYLE.md: one error model).
  try {
    const auto doc = nlohmann::json::parse(text);
    const auto& j = doc.at("jobs").at(0).at(job.write ? "write" : "read");
    FioResult r;
    r.io_bytes = j.at("io_bytes").get<int64_t>();
    // runtime is in ms; the bandwidth figure is fio's own bytes-per-second, higher resolution.
    const double bw = j.at("bw_bytes").get<double>();
    r.seconds =
        bw > 0 ? static_cast<double>(r.io_bytes) / bw : j.at("runtime").get<double>() / 1000.0;
    r.iops = j.at("iops").get<double>();
    if (r.io_bytes <= 0) {
      return Status::unavailable(
          fmt::format("fio moved no bytes under '{}'; are the files there?", job.directory));
    }
    return r;
  } catch (const std::exception& e) {
    return Status::unavailable(fmt::format("cannot parse fio's JSON output: {}", e.what()));
  }
}

}  // namespace dualpath::store
