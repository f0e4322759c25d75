#include "dualpath/status.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "dualpath/result.h"

namespace dualpath {

StatusCode status_code_from_int(int64_t code) {
  if (code < static_cast<int64_t>(StatusCode::kOk) ||
      code > static_cast<int64_t>(StatusCode::kInternal)) {
    return StatusCode::kInternal;
  }
  return static_cast<StatusCode>(code);
}

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kAlreadyExists: return "AlreadyExists";
    case StatusCode::kOutOfRange: return "OutOfRange";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kTimedOut: return "TimedOut";
    case StatusCode::kAborted: return "Aborted";
    case StatusCode::kInProgress: return "InProgress";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) state_ = std::make_unique<State>(State{code, std::move(message)});
}

Status::Status(const Status& other)
    : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
  return *this;
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::to_string() const {
  if (is_ok()) return "OK";
  return std::string(status_code_name(state_->code)) + ": " + state_->message;
}

Status Status::with_context(std::string_view context) const {
  if (is_ok() || context.empty()) return *this;
  return Status(state_->code, std::string(context) + ": " + state_->message);
}

namespace internal {
void die_on_value_of_error(const Status& status) {
  std::fprintf(stderr, "Result::value() of an error: %s\n", status.to_string().c_str());
  std::abort();
}
}  // namespace internal

}  // namespace dualpath
