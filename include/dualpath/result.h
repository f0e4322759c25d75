#pragma once
// Result<T>: a value or a non-OK Status (our small std::expected; that needs C++23).

#include <cassert>
#include <optional>
#include <utility>

#include "dualpath/status.h"

namespace dualpath {
namespace internal {
// Prints "Result::value() of an error: <status>" to stderr and aborts.
[[noreturn]] void die_on_value_of_error(const Status& status);
}  // namespace internal

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.is_ok() && "Result built from an OK status carries no value");
    if (status_.is_ok()) status_ = Status::internal("Result built from an OK status");
  }

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }

  // Taking the value of an error is a bug in the caller: it aborts with the status in every build
  // type (never undefined behaviour under NDEBUG).
  T& value() & { check_ok(); return *value_; }
  const T& value() const& { check_ok(); return *value_; }
  T&& value() && { check_ok(); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  T value_or(T fallback) const& { return is_ok() ? *value_ : std::move(fallback); }

 private:
  void check_ok() const {
    if (!is_ok()) internal::die_on_value_of_error(status_);
  }

  std::optional<T> value_;
  Status status_;  // OK iff value_ is set
};

}  // namespace dualpath

#define DP_CONCAT_INNER_(a, b) a##b
#define DP_CONCAT_(a, b) DP_CONCAT_INNER_(a, b)

// DP_RETURN_IF_ERROR(expr) or DP_RETURN_IF_ERROR(expr, "fmt {}", args...): returns the Status of
// `expr` when it is not OK, prefixed with the formatted context when one is given.
#define DP_RETURN_IF_ERROR(expr, ...)                                               \
  do {                                                                              \
    ::dualpath::Status dp_status_ = (expr);                                         \
    if (!dp_status_.is_ok()) {                                                      \
      return ::dualpath::internal::add_context(std::move(dp_status_) __VA_OPT__(, ) \
                                                   __VA_ARGS__);                    \
    }                                                                               \
  } while (0)

// DP_ASSIGN_OR_RETURN(lhs, expr) or DP_ASSIGN_OR_RETURN(lhs, expr, "fmt {}", args...): evaluates
// the Result `expr`; on error returns its Status (prefixed with the formatted context when one is
// given), else assigns (moves) the value to `lhs` (which may be a declaration, e.g. `auto x`).
#define DP_ASSIGN_OR_RETURN(lhs, expr, ...) \
  DP_ASSIGN_OR_RETURN_IMPL_(DP_CONCAT_(dp_result_, __LINE__), lhs, expr __VA_OPT__(, ) __VA_ARGS__)
#define DP_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr, ...)                                     \
  auto tmp = (expr);                                                                      \
  if (!tmp.is_ok()) {                                                                     \
    return ::dualpath::internal::add_context(tmp.status() __VA_OPT__(, ) __VA_ARGS__); \
  }                                                                                       \
  lhs = std::move(tmp).value()

#include <fmt/format.h>

namespace dualpath::internal {
inline Status add_context(Status s) { return s; }
template <typename... Args>
Status add_context(Status s, fmt::format_string<Args...> f, Args&&... args) {
  return s.with_context(fmt::format(f, std::forward<Args>(args)...));
}
}  // namespace dualpath::internal
