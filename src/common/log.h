#pragma once
// Minimal leveled logging to stderr. Thread-safe (one write(2) per line).
// The level comes from DUALPATH_LOG (error|warn|info|debug), default warn, or set_log_level().

#include <fmt/format.h>

#include <string_view>

namespace dualpath {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_line(LogLevel level, std::string_view text);

template <typename... Args>
void log_at(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (level <= log_level()) log_line(level, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace dualpath

#define DP_LOG_ERROR(...) ::dualpath::log_at(::dualpath::LogLevel::kError, __VA_ARGS__)
#define DP_LOG_WARN(...) ::dualpath::log_at(::dualpath::LogLevel::kWarn, __VA_ARGS__)
#define DP_LOG_INFO(...) ::dualpath::log_at(::dualpath::LogLevel::kInfo, __VA_ARGS__)
#define DP_LOG_DEBUG(...) ::dualpath::log_at(::dualpath::LogLevel::kDebug, __VA_ARGS__)
