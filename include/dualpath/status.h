#pragma once
// Status: the one error channel of dualpath (STYLE.md "One error model").
// Cheap when OK (no allocation), carries a code and a message that says what failed, where, and
// what to try. Nothing throws across a module boundary; adapters catch and return a Status.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace dualpath {

// Codes are grouped by meaning, not by module; the message carries the module's context.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,     // the caller's input or configuration is wrong
  kNotFound = 2,            // a key, file or peer does not exist
  kAlreadyExists = 3,
  kOutOfRange = 4,          // an offset or index outside the valid range
  kFailedPrecondition = 5,  // the object is not in a state that allows the call
  kResourceExhausted = 6,   // disk full, buffer full, no HBM
  kCorruption = 7,          // stored bytes failed validation (checksum, header)
  kIoError = 8,             // the OS or device reported an error
  kUnavailable = 9,         // a peer is gone or unreachable; retrying elsewhere may work
  kTimedOut = 10,           // a deadline passed; the operation may still be running
  kAborted = 11,            // cancelled
  kInProgress = 12,         // a normal poll answer: not done yet
  kUnimplemented = 13,
  kInternal = 14,           // a bug in dualpath
};

std::string_view status_code_name(StatusCode code);
// A code that came from outside (a peer's message): itself when it is one, else kInternal.
StatusCode status_code_from_int(int64_t code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status ok() { return Status(); }
  static Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status already_exists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status failed_precondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status resource_exhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status timed_out(std::string m) { return {StatusCode::kTimedOut, std::move(m)}; }
  static Status aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
  static Status in_progress(std::string m = {}) { return {StatusCode::kInProgress, std::move(m)}; }
  static Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool is_ok() const { return state_ == nullptr; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  // The message alone; empty when OK.
  const std::string& message() const;
  // "CodeName: message", or "OK".
  std::string to_string() const;

  // Returns a copy whose message is prefixed with `context: `. OK stays OK.
  Status with_context(std::string_view context) const;

  bool is_invalid_argument() const { return code() == StatusCode::kInvalidArgument; }
  bool is_not_found() const { return code() == StatusCode::kNotFound; }
  bool is_corruption() const { return code() == StatusCode::kCorruption; }
  bool is_io_error() const { return code() == StatusCode::kIoError; }
  bool is_unavailable() const { return code() == StatusCode::kUnavailable; }
  bool is_timed_out() const { return code() == StatusCode::kTimedOut; }
  bool is_resource_exhausted() const { return code() == StatusCode::kResourceExhausted; }
  bool is_in_progress() const { return code() == StatusCode::kInProgress; }
  bool is_aborted() const { return code() == StatusCode::kAborted; }
  bool is_failed_precondition() const { return code() == StatusCode::kFailedPrecondition; }
  bool is_already_exists() const { return code() == StatusCode::kAlreadyExists; }

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<State> state_;  // null means OK
};

}  // namespace dualpath
