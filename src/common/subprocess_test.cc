#include "common/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dualpath {
namespace {

using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string temp_file(const char* name) {
  return (std::filesystem::temp_directory_path() /
          (std::string("dp_subprocess_") + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(Subprocess, ReportsTheExitStatusAndCapturesOutputAndEnvironment) {
  SpawnOptions o;
  o.argv = {"sh", "-c", "echo out $DP_TEST_VALUE; echo err >&2; exit 3"};
  o.search_path = true;
  o.env = {"DP_TEST_VALUE=42"};
  o.stdout_path = temp_file("out");
  o.stderr_path = temp_file("err");
  auto p = Subprocess::spawn(o);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  auto status = p->wait_for(10s);
  ASSERT_TRUE(status.is_ok()) << status.status().to_string();
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 3);
  EXPECT_EQ(Subprocess::describe(*status), "exit 3");
  EXPECT_EQ(read_file(o.stdout_path), "out 42\n");
  EXPECT_EQ(read_file(o.stderr_path), "err\n");
  EXPECT_FALSE(p->running());
  std::filesystem::remove(o.stdout_path);
  std::filesystem::remove(o.stderr_path);
}

TEST(Subprocess, WaitTimesOutAndStopEscalatesToSigkill) {
  SpawnOptions o;
  // Ignores SIGTERM, so stop() must escalate after its grace.
  o.argv = {"sh", "-c", "trap '' TERM; sleep 30"};
  o.search_path = true;
  auto p = Subprocess::spawn(o);
  ASSERT_TRUE(p.is_ok());
  auto early = p->wait_for(50ms);
  ASSERT_FALSE(early.is_ok());
  EXPECT_TRUE(early.status().is_timed_out());
  EXPECT_TRUE(p->running());
  const int status = p->stop(SIGTERM, 200ms);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_FALSE(p->running());
}

TEST(Subprocess, DestructionKillsAndReapsARunningChild) {
  pid_t pid = -1;
  {
    SpawnOptions o;
    o.argv = {"sleep", "30"};
    o.search_path = true;
    auto p = Subprocess::spawn(o);
    ASSERT_TRUE(p.is_ok());
    pid = p->pid();
    EXPECT_EQ(::kill(pid, 0), 0);
  }
  // Reaped: the pid is gone, not a zombie.
  EXPECT_EQ(::kill(pid, 0), -1);
}

TEST(Subprocess, AMissingProgramIsNotFoundAndAFailedExecIs127) {
  SpawnOptions o;
  o.argv = {"dualpath-no-such-program"};
  o.search_path = true;
  auto missing = Subprocess::spawn(o);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_TRUE(missing.status().is_not_found());
  EXPECT_NE(missing.status().message().find("not on PATH"), std::string::npos);
  o.argv = {"/nonexistent/program"};
  o.search_path = false;
  auto p = Subprocess::spawn(o);
  ASSERT_TRUE(p.is_ok());
  auto status = p->wait_for(10s);
  ASSERT_TRUE(status.is_ok());
  EXPECT_EQ(WEXITSTATUS(*status), 127);
}

}  // namespace
}  // namespace dualpath
