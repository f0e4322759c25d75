#include "engine/wire.h"

#include <fmt/format.h>

#include <cmath>

namespace dualpath::engine {

namespace {

const Json& empty_object() {
  static const Json kEmpty = Json::object();
  return kEmpty;
}

const Json& empty_array() {
  static const Json kEmpty = Json::array();
  return kEmpty;
}

// The JSON type of a value, for messages.
std::string_view type_name(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

}  // namespace

void WireReader::fail(std::string_view key, std::string_view problem) {
  if (!status_.is_ok()) return;  // the first problem is the one reported
  status_ =
      Status::invalid_argument(key.empty() ? fmt::format("{}: {}", what_, problem)
                                           : fmt::format("{}: field '{}' {}", what_, key, problem));
}

const Json* WireReader::find(std::string_view key) const {
  if (!j_.is_object()) return nullptr;
  auto it = j_.find(key);
  return it == j_.end() ? nullptr : &*it;
}

bool WireReader::has(std::string_view key) const { return find(key) != nullptr; }

int64_t WireReader::i64_or(std::string_view key, int64_t fallback, int64_t lo, int64_t hi) {
  const Json* v = find(key);
  if (v == nullptr) return fallback;
  int64_t out = 0;
  if (v->is_number_unsigned()) {
    const auto u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(key, fmt::format("= {} is out of range [{}, {}]", u, lo, hi));
      return fallback;
    }
    out = static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    out = v->get<int64_t>();
  } else {
    fail(key, fmt::format("must be an integer, not {}", type_name(*v)));
    return fallback;
  }
  if (out < lo || out > hi) {
    fail(key, fmt::format("= {} is out of range [{}, {}]", out, lo, hi));
    return fallback;
  }
  return out;
}

int64_t WireReader::i64(std::string_view key, int64_t lo, int64_t hi) {
  if (!has(key)) {
    fail(key, "is missing");
    return lo > 0 ? lo : (hi < 0 ? hi : 0);
  }
  return i64_or(key, 0, lo, hi);
}

uint64_t WireReader::u64_or(std::string_view key, uint64_t fallback) {
  const Json* v = find(key);
  if (v == nullptr) return fallback;
  if (v->is_number_unsigned()) return v->get<uint64_t>();
  if (v->is_number_integer() && v->get<int64_t>() >= 0) {
    return static_cast<uint64_t>(v->get<int64_t>());
  }
  fail(key, fmt::format("must be an unsigned integer, not {}", type_name(*v)));
  return fallback;
}

uint64_t WireReader::u64(std::string_view key) {
  if (!has(key)) {
    fail(key, "is missing");
    return 0;
  }
  return u64_or(key, 0);
}

double WireReader::number_or(std::string_view key, double fallback, double lo, double hi) {
  const Json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) {
    fail(key, fmt::format("must be a number, not {}", type_name(*v)));
    return fallback;
  }
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    fail(key, fmt::format("= {} is out of range [{}, {}]", d, lo, hi));
    return fallback;
  }
  return d;
}

double WireReader::number(std::string_view key, double lo, double hi) {
  if (!has(key)) {
    fail(key, "is missing");
    return 0;
  }
  return number_or(key, 0, lo, hi);
}

bool WireReader::boolean_or(std::string_view key, bool fallback) {
  const Json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) {
    fail(key, fmt::format("must be true or false, not {}", type_name(*v)));
    return fallback;
  }
  return v->get<bool>();
}

bool WireReader::boolean(std::string_view key) {
  if (!has(key)) {
    fail(key, "is missing");
    return false;
  }
  return boolean_or(key, false);
}

std::string WireReader::str_or(std::string_view key, std::string fallback) {
  const Json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) {
    fail(key, fmt::format("must be a string, not {}", type_name(*v)));
    return fallback;
  }
  return v->get<std::string>();
}

std::string WireReader::str(std::string_view key) {
  if (!has(key)) {
    fail(key, "is missing");
    return {};
  }
  return str_or(key, {});
}

std::vector<int32_t> WireReader::int32_list(std::string_view key, int64_t lo, int64_t hi) {
  const Json& a = array(key);
  std::vector<int32_t> out;
  out.reserve(a.size());
  for (const Json& v : a) {
    if (!v.is_number_integer()) {
      fail(key, fmt::format("must hold integers, not {}", type_name(v)));
      return {};
    }
    const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)
                          ? hi + 1
                          : v.get<int64_t>();
    if (x < lo || x > hi) {
      fail(key, fmt::format("holds {}, outside [{}, {}]", x, lo, hi));
      return {};
    }
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

std::vector<std::string> WireReader::str_list(std::string_view key) {
  const Json& a = array(key);
  std::vector<std::string> out;
  for (const Json& v : a) {
    if (!v.is_string()) {
      fail(key, fmt::format("must hold strings, not {}", type_name(v)));
      return {};
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::vector<float> WireReader::float_list(std::string_view key) {
  const Json& a = array(key);
  std::vector<float> out;
  out.reserve(a.size());
  for (const Json& v : a) {
    if (!v.is_number()) {
      fail(key, fmt::format("must hold numbers, not {}", type_name(v)));
      return {};
    }
    out.push_back(v.get<float>());
  }
  return out;
}

const Json& WireReader::object(std::string_view key) {
  const Json* v = find(key);
  if (v == nullptr) {
    fail(key, "is missing");
    return empty_object();
  }
  if (!v->is_object()) {
    fail(key, fmt::format("must be an object, not {}", type_name(*v)));
    return empty_object();
  }
  return *v;
}

const Json& WireReader::array(std::string_view key) {
  const Json* v = find(key);
  if (v == nullptr) {
    fail(key, "is missing");
    return empty_array();
  }
  if (!v->is_array()) {
    fail(key, fmt::format("must be an array, not {}", type_name(*v)));
    return empty_array();
  }
  return *v;
}

StatusCode status_code_from_wire(int64_t code) {
  if (code < static_cast<int64_t>(StatusCode::kOk) ||
      code > static_cast<int64_t>(StatusCode::kInternal)) {
    return StatusCode::kInternal;
  }
  return static_cast<StatusCode>(code);
}

Status reply_status(const Json& reply, std::string_view from) {
  WireReader r(reply, fmt::format("reply from {}", from));
  if (r.boolean_or("ok", false)) return r.status();
  const int64_t code = r.i64_or("code", static_cast<int64_t>(StatusCode::kInternal));
  std::string error = r.str_or("error", "no message");
  if (!r.status().is_ok()) return Status::internal(r.status().message());
  StatusCode c = status_code_from_wire(code);
  if (c == StatusCode::kOk) c = StatusCode::kInternal;  // "ok": false with code 0
  return Status(c, fmt::format("{}: {}", from, error));
}

}  // namespace dualpath::engine
