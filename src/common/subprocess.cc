#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

extern char** environ;

namespace dualpath {

namespace {

// How often wait_for() checks a running child (a poll period, not a synchronisation).
constexpr auto kWaitSlice = std::chrono::milliseconds(2);

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

}  // namespace

Result<std::string> find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (executable(name)) return name;
    return Status::not_found(fmt::format("program '{}' does not exist or is not executable", name));
  }
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  for (;;) {
    const size_t end = dirs.find(':', start);
    const std::string_view dir = std::string_view(dirs).substr(
        start, end == std::string::npos ? std::string::npos : end - start);
    // An empty entry means the working directory (fmt, not operator+: GCC 12 warns falsely
    // about std::string assignment of a literal here).
    const std::string candidate = fmt::format("{}/{}", dir.empty() ? "." : dir, name);
    if (executable(candidate)) return candidate;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return Status::not_found(fmt::format("program '{}' is not on PATH ({})", name, dirs));
}

Result<Subprocess> Subprocess::spawn(const SpawnOptions& o) {
  if (o.argv.empty()) return Status::invalid_argument("spawn: no program given");
  std::string program = o.argv[0];
  if (o.search_path) {
    DP_ASSIGN_OR_RETURN(program, find_program(o.argv[0]));
  }
  // Everything the child touches is built here, before fork().
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& add : o.env) {
      if (add.substr(0, add.find('=')) == name) replaced = true;
    }
    for (const std::string& unset : o.unset_env) {
      if (unset == name) replaced = true;
    }
    if (!replaced) env_strings.push_back(std::move(entry));
  }
  for (const std::string& add : o.env) env_strings.push_back(add);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = o.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) {
    return Status::unavailable(
        fmt::format("cannot start '{}': fork failed: {}", program, std::strerror(errno)));
  }
  if (pid == 0) {
    // The child: async-signal-safe calls only.
    if (o.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(126);  // the parent died before prctl took effect
    }
    // The parent may block signals in its threads (a signal-handling thread); the child starts
    // with none blocked and the default dispositions a program expects.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &dfl, nullptr);
    auto redirect = [](const std::string& path, int fd) {
      const int f = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (f < 0) ::_exit(125);
      ::dup2(f, fd);  // dup2 clears O_CLOEXEC on the new descriptor
    };
    if (!o.stdout_path.empty()) redirect(o.stdout_path, STDOUT_FILENO);
    if (o.stderr_to_stdout) {
      ::dup2(STDOUT_FILENO, STDERR_FILENO);
    } else if (!o.stderr_path.empty()) {
      redirect(o.stderr_path, STDERR_FILENO);
    }
    ::execve(program.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  return Subprocess(pid);
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), status_(std::exchange(other.status_, std::nullopt)) {}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    if (running()) stop(SIGKILL, Duration(0));
    pid_ = std::exchange(other.pid_, -1);
    status_ = std::exchange(other.status_, std::nullopt);
  }
  return *this;
}

Subprocess::~Subprocess() {
  if (running()) stop(SIGKILL, Duration(0));
}

std::optional<int> Subprocess::poll() {
  if (status_ || pid_ <= 0) return status_;
  int wstatus = 0;
  const pid_t r = ::waitpid(pid_, &wstatus, WNOHANG);
  if (r == pid_) status_ = wstatus;
  if (r < 0 && errno == ECHILD) status_ = 0;  // reaped elsewhere
  return status_;
}

bool Subprocess::running() { return pid_ > 0 && !poll().has_value(); }

Result<int> Subprocess::wait_for(Duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto s = poll()) return *s;
    if (pid_ <= 0) return Status::failed_precondition("no child process");
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::timed_out(
          fmt::format("process {} still running after {:.1f} s", pid_, to_seconds(timeout)));
    }
    std::this_thread::sleep_for(kWaitSlice);
  }
}

void Subprocess::signal(int sig) {
  if (running()) ::kill(pid_, sig);
}

int Subprocess::stop(int sig, Duration grace) {
  if (!running()) return status_.value_or(0);
  ::kill(pid_, sig);
  if (sig != SIGKILL) {
    if (auto s = wait_for(grace); s.is_ok()) return *s;
    ::kill(pid_, SIGKILL);
  }
  int wstatus = 0;
  while (::waitpid(pid_, &wstatus, 0) < 0 && errno == EINTR) {
  }
  status_ = wstatus;
  return wstatus;
}

std::string Subprocess::describe(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("exit {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    return fmt::format("killed by signal {} ({})", sig, ::strsignal(sig));
  }
  return fmt::format("wait status {}", wait_status);
}

}  // namespace dualpath
