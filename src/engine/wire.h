#pragma once
// WireReader: reads the fields of one control message (JSON from another process) without ever
// throwing. nlohmann's accessors (value(), get<T>()) throw on a type mismatch, so a malformed
// message used to terminate the node that received it; every accessor here checks the type and
// the range before it converts, records the first problem, and returns the fallback. status()
// then names the message, the field and what was expected:
//
//   WireReader r(msg, "prefill request");
//   req.request_id = r.u64("request_id");
//   req.tokens = r.tokens("tokens", vocab);
//   DP_RETURN_IF_ERROR(r.status());
//
// Thread-compatible. The JSON must outlive the reader.

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "dualpath/status.h"
#include "engine/control_channel.h"

namespace dualpath::engine {

class WireReader {
 public:
  WireReader(const Json& message, std::string what) : j_(message), what_(std::move(what)) {
    if (!j_.is_object()) fail("", "the message is not a JSON object");
  }
  // The reader keeps a reference to the message, so a temporary would dangle.
  WireReader(Json&&, std::string) = delete;

  // Required fields: a missing or mistyped one is an error.
  int64_t i64(std::string_view key,
              int64_t lo = std::numeric_limits<int64_t>::min(),
              int64_t hi = std::numeric_limits<int64_t>::max());
  uint64_t u64(std::string_view key);
  double number(std::string_view key, double lo = -1e300, double hi = 1e300);
  bool boolean(std::string_view key);
  std::string str(std::string_view key);
  // An array of integers, each in [lo, hi].
  std::vector<int32_t> int32_list(std::string_view key, int64_t lo, int64_t hi);
  std::vector<std::string> str_list(std::string_view key);
  std::vector<float> float_list(std::string_view key);
  // A nested object or array (required): a reference to it, or to an empty one on error.
  const Json& object(std::string_view key);
  const Json& array(std::string_view key);

  // Optional fields: absent gives the fallback; present but mistyped is still an error.
  int64_t i64_or(std::string_view key,
                 int64_t fallback,
                 int64_t lo = std::numeric_limits<int64_t>::min(),
                 int64_t hi = std::numeric_limits<int64_t>::max());
  uint64_t u64_or(std::string_view key, uint64_t fallback);
  double number_or(std::string_view key, double fallback, double lo = -1e300, double hi = 1e300);
  bool boolean_or(std::string_view key, bool fallback);
  std::string str_or(std::string_view key, std::string fallback);
  bool has(std::string_view key) const;

  // Records a caller-side problem with a field (a cross-field check).
  void fail(std::string_view key, std::string_view problem);
  // OK, or kInvalidArgument naming the message, the first bad field and the problem.
  Status status() const { return status_; }

 private:
  const Json* find(std::string_view key) const;
  const Json& j_;
  const std::string what_;
  Status status_;
};

// A status code from the wire, range-checked: an unknown number becomes kInternal (a peer bug
// or a corrupted message), never an out-of-range enum value.
StatusCode status_code_from_wire(int64_t code);
// The Status of an {"ok": false, "code", "error"} reply (or OK for "ok": true), read safely.
Status reply_status(const Json& reply, std::string_view from);

}  // namespace dualpath::engine
