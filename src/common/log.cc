#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace dualpath {
namespace {

LogLevel level_from_env() {
  const char* v = std::getenv("DUALPATH_LOG");
  if (v == nullptr) return LogLevel::kWarn;
  std::string_view s(v);
  if (s == "error") return LogLevel::kError;
  if (s == "info") return LogLevel::kInfo;
  if (s == "debug") return LogLevel::kDebug;
  return LogLevel::kWarn;
}

// Relaxed: the level is a hint read on every log call; no other data is published through it.
std::atomic<int> g_level{static_cast<int>(level_from_env())};

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) {
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

void log_line(LogLevel level, std::string_view text) {
  static constexpr std::string_view kNames[] = {"error", "warning", "info", "debug"};
  std::string line = fmt::format("dualpath: {}: {}\n", kNames[static_cast<int>(level)], text);
  // One write(2) so that lines from several threads or processes do not interleave.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace dualpath
