#pragma once
// Subprocess: the one way dualpath starts another program (node processes, the transport test
// peer, fio, ucx_perftest). Move-only; owns the child: destruction SIGKILLs a child that is still
// running and reaps it, so no zombie or orphan outlives its owner.
//
// Between fork() and exec() the child runs only async-signal-safe calls (open, dup2, sigaction,
// sigprocmask, prctl, execve): everything it needs (argv, the environment, the resolved program
// path) is built before the fork, because a forked copy of a multi-threaded process may not
// allocate (another thread may have held the allocator's lock).
//
// Thread-compatible.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "dualpath/result.h"
#include "dualpath/units.h"

namespace dualpath {

struct SpawnOptions {
  // argv[0] is the program: a path, or (search_path) a name looked up on PATH.
  std::vector<std::string> argv;
  bool search_path = false;
  // "NAME=value" entries added to the inherited environment (replacing a variable of that name).
  std::vector<std::string> env;
  // Names of inherited variables the child does not get.
  std::vector<std::string> unset_env;
  // Redirections: a file to create (truncated) for stdout / stderr; empty: inherited.
  std::string stdout_path;
  std::string stderr_path;
  bool stderr_to_stdout = false;  // stderr goes where stdout goes
  // The child gets SIGKILL when this process dies (PR_SET_PDEATHSIG), so a killed launcher
  // leaves no orphans (nodes started by `dualpath serve`). Linux sends it when the *thread*
  // that spawned the child exits: spawn from a thread that lives as long as the child should
  // (the main thread).
  bool die_with_parent = false;
};

class Subprocess {
 public:
  // Errors: an empty argv, a program not found (kNotFound naming it and the PATH searched), a
  // failed fork (kUnavailable). A failed exec shows as exit status 127.
  static Result<Subprocess> spawn(const SpawnOptions& options);

  Subprocess() = default;
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  // Whether the child has been started and not reaped yet.
  bool running();
  // The wait status once the child has exited (reaped here), without blocking; nullopt while
  // it runs.
  std::optional<int> poll();
  // Waits for the child to exit; kTimedOut (the child left running) after `timeout`.
  Result<int> wait_for(Duration timeout);
  // Sends `signal` (no-op when the child is gone).
  void signal(int signal);
  // Sends `signal`, waits up to `grace`, then SIGKILLs; returns the wait status.
  int stop(int signal, Duration grace);
  // "exit 0", "exit 2", "killed by signal 9 (Killed)".
  static std::string describe(int wait_status);
  // The wait status of a child that has exited, or nullopt.
  const std::optional<int>& exit_status() const { return status_; }

 private:
  explicit Subprocess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// The path a program name resolves to on PATH (a name with a '/' is returned as is when it is
// executable); kNotFound otherwise.
Result<std::string> find_program(const std::string& name);

}  // namespace dualpath
