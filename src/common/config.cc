#include "common/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>

// Header-only, without exceptions: parse errors come back as values (STYLE.md). The Debian
// shared library is built with exceptions, so it is not linked.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

namespace dualpath {

struct Config::Doc {
  toml::table table;
};

Config::Config() : doc_(std::make_unique<Doc>()) {}
Config::~Config() = default;
Config::Config(Config&&) noexcept = default;
Config& Config::operator=(Config&&) noexcept = default;

Result<Config> Config::from_string(std::string_view text, std::string origin) {
  toml::parse_result parsed = toml::parse(text, origin);
  if (!parsed) {
    const auto& err = parsed.error();
    return Status::invalid_argument(fmt::format(
        "{}:{}:{}: TOML syntax error: {}; fix the file (see configs/*.toml for examples)", origin,
        err.source().begin.line, err.source().begin.column, err.description()));
  }
  Config cfg;
  cfg.doc_->table = std::move(parsed).table();
  cfg.origin_ = std::move(origin);
  return cfg;
}

Result<Config> Config::from_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {  // toml++ would read it as an empty document
    return Status::invalid_argument(fmt::format(
        "config file '{}' is a directory; give a TOML file, e.g. --config configs/emu-1p2d.toml",
        path));
  }
  toml::parse_result parsed = toml::parse_file(path);
  if (!parsed) {
    const auto& err = parsed.error();
    if (err.source().begin.line == 0) {
      return Status::not_found(fmt::format(
          "cannot read config file '{}': {}; check the path given to --config", path,
          err.description()));
    }
    return Status::invalid_argument(fmt::format("{}:{}:{}: TOML syntax error: {}", path,
                                                err.source().begin.line,
                                                err.source().begin.column, err.description()));
  }
  Config cfg;
  cfg.doc_->table = std::move(parsed).table();
  cfg.origin_ = path;
  return cfg;
}

const void* Config::lookup(std::string_view key) const {
  const toml::node* n = doc_->table.at_path(key).node();
  return n;
}

bool Config::has(std::string_view key) const { return lookup(key) != nullptr; }

void Config::touch(std::string_view key) { read_keys_.emplace(key); }

std::string Config::value_text(std::string_view key) const {
  const auto* n = static_cast<const toml::node*>(lookup(key));
  if (n == nullptr) return "<missing>";
  std::ostringstream os;
  n->visit([&](auto&& v) { os << v; });
  return os.str();
}

void Config::fail(std::string_view key, std::string_view message) {
  errors_.push_back(fmt::format("{}: key '{}' = {}: {}", origin_, key, value_text(key), message));
}

double Config::number(std::string_view key, double fallback, std::string_view what) {
  touch(key);
  const auto* n = static_cast<const toml::node*>(lookup(key));
  if (n == nullptr) return fallback;
  if (auto v = n->value<double>()) return *v;
  fail(key, fmt::format("expected a number{}{}", what.empty() ? "" : ": ", what));
  return fallback;
}

double Config::positive_number(std::string_view key, double fallback, std::string_view what) {
  double v = number(key, fallback, what);
  if (!(v > 0) || !std::isfinite(v)) {
    fail(key, fmt::format("must be a positive number{}{}", what.empty() ? "" : " (", what) +
                  (what.empty() ? "" : ")"));
    return fallback;
  }
  return v;
}

double Config::non_negative_number(std::string_view key, double fallback, std::string_view what) {
  double v = number(key, fallback, what);
  if (!(v >= 0) || !std::isfinite(v)) {
    fail(key, fmt::format("must be zero or positive{}{}", what.empty() ? "" : " (", what) +
                  (what.empty() ? "" : ")"));
    return fallback;
  }
  return v;
}

int64_t Config::integer(std::string_view key, int64_t fallback, int64_t min, int64_t max,
                        std::string_view what) {
  touch(key);
  const auto* n = static_cast<const toml::node*>(lookup(key));
  if (n == nullptr) return fallback;
  auto v = n->value_exact<int64_t>();
  if (!v) {
    fail(key, fmt::format("expected an integer{}{}", what.empty() ? "" : ": ", what));
    return fallback;
  }
  if (*v < min || *v > max) {
    fail(key, fmt::format("out of range; use an integer in [{}, {}]{}{}", min, max,
                          what.empty() ? "" : " for ", what));
    return fallback;
  }
  return *v;
}

bool Config::boolean(std::string_view key, bool fallback) {
  touch(key);
  const auto* n = static_cast<const toml::node*>(lookup(key));
  if (n == nullptr) return fallback;
  if (auto v = n->value_exact<bool>()) return *v;
  fail(key, "expected true or false");
  return fallback;
}

std::string Config::string(std::string_view key, std::string fallback, std::string_view what) {
  touch(key);
  const auto* n = static_cast<const toml::node*>(lookup(key));
  if (n == nullptr) return fallback;
  if (auto v = n->value_exact<std::string>()) return *v;
  fail(key, fmt::format("expected a string{}{}", what.empty() ? "" : ": ", what));
  return fallback;
}

std::string Config::choice(std::string_view key, std::string fallback,
                           const std::vector<std::string>& allowed) {
  std::string v = string(key, fallback);
  if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
    std::string hint = closest_match(v, allowed);
    fail(key, fmt::format("unknown value; use one of {}{}", fmt::join(allowed, ", "),
                          hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
    return fallback;
  }
  return v;
}

std::vector<std::string> Config::string_list(std::string_view key,
                                             std::vector<std::string> fallback) {
  touch(key);
  const auto* n = static_cast<const toml::node*>(lookup(key));
  if (n == nullptr) return fallback;
  const toml::array* arr = n->as_array();
  if (arr == nullptr) {
    // A single string is accepted as a one-element list, and a comma-separated string is split,
    // like the seeds' "data_paths = /mnt/nvme0n1,/mnt/nvme1n1".
    if (auto s = n->value_exact<std::string>()) {
      std::vector<std::string> out;
      std::string item;
      std::istringstream is(*s);
      while (std::getline(is, item, ',')) {
        if (!item.empty()) out.push_back(item);
      }
      return out;
    }
    fail(key, "expected a list of strings, e.g. [\"/mnt/a\", \"/mnt/b\"]");
    return fallback;
  }
  std::vector<std::string> out;
  for (const auto& el : *arr) {
    auto s = el.value_exact<std::string>();
    if (!s) {
      fail(key, "every element must be a string");
      return fallback;
    }
    out.push_back(*s);
  }
  return out;
}

std::vector<int64_t> Config::integer_list(std::string_view key, std::vector<int64_t> fallback) {
  touch(key);
  const auto* n = static_cast<const toml::node*>(lookup(key));
  if (n == nullptr) return fallback;
  const toml::array* arr = n->as_array();
  if (arr == nullptr) {
    fail(key, "expected a list of integers, e.g. [0, 1, 2, 3]");
    return fallback;
  }
  std::vector<int64_t> out;
  for (const auto& el : *arr) {
    auto v = el.value_exact<int64_t>();
    if (!v) {
      fail(key, "every element must be an integer");
      return fallback;
    }
    out.push_back(*v);
  }
  return out;
}

Result<int64_t> parse_size_bytes(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::invalid_argument(fmt::format(
        "'{}' is not a size: {}; write a number of bytes or one with a suffix, e.g. \"64M\", "
        "\"80G\", \"1.5T\"",
        text, why));
  };
  std::string_view t = text;
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  size_t digits = 0;
  while (digits < t.size() && (std::isdigit(static_cast<unsigned char>(t[digits])) != 0 ||
                               t[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return bad("it does not start with a number");
  double value = 0;
  {
    const std::string number(t.substr(0, digits));
    char* end = nullptr;
    value = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size()) return bad("the number is malformed");
  }
  std::string unit(t.substr(digits));
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() >= 2 && unit.substr(unit.size() - 2) == "IB") unit.resize(unit.size() - 2);
  else if (unit.size() >= 2 && unit.back() == 'B') unit.pop_back();
  double scale = 1;
  if (unit.empty() || unit == "B") {
    scale = 1;
  } else if (unit == "K") {
    scale = 1024.0;
  } else if (unit == "M") {
    scale = 1024.0 * 1024;
  } else if (unit == "G") {
    scale = 1024.0 * 1024 * 1024;
  } else if (unit == "T") {
    scale = 1024.0 * 1024 * 1024 * 1024;
  } else {
    return bad(fmt::format("unknown unit '{}' (use K, M, G or T)", t.substr(digits)));
  }
  const double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes < 0 || bytes > 9.0e18) return bad("it is out of range");
  return static_cast<int64_t>(bytes);
}

int64_t Config::size_bytes(std::string_view key, int64_t fallback, std::string_view what) {
  touch(key);
  const auto* n = static_cast<const toml::node*>(lookup(key));
  if (n == nullptr) return fallback;
  if (auto v = n->value_exact<int64_t>()) {
    if (*v >= 0) return *v;
  } else if (auto text = n->value_exact<std::string>()) {
    auto parsed = parse_size_bytes(*text);
    if (parsed.is_ok()) return *parsed;
    fail(key, parsed.status().message());
    return fallback;
  }
  fail(key, fmt::format("expected a size, bytes or a string like \"64M\" or \"80G\"{}{}",
                        what.empty() ? "" : ": ", what));
  return fallback;
}

void Config::ignore_section(std::string_view prefix) { ignored_prefixes_.emplace(prefix); }

namespace {
void collect_leaf_keys(const toml::table& t, const std::string& prefix,
                       std::vector<std::string>& out) {
  for (const auto& [k, v] : t) {
    std::string path = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const auto* sub = v.as_table()) {
      collect_leaf_keys(*sub, path, out);
    } else {
      out.push_back(path);
    }
  }
}
}  // namespace

Status Config::finish() const {
  if (!errors_.empty()) {
    std::string msg = errors_.front();
    if (errors_.size() > 1) msg += fmt::format(" (and {} more problems)", errors_.size() - 1);
    return Status::invalid_argument(msg);
  }
  std::vector<std::string> keys;
  collect_leaf_keys(doc_->table, "", keys);
  std::vector<std::string> known(read_keys_.begin(), read_keys_.end());
  for (const auto& k : keys) {
    if (read_keys_.contains(k)) continue;
    bool ignored = std::any_of(ignored_prefixes_.begin(), ignored_prefixes_.end(),
                               [&](const std::string& p) {
                                 return k.size() > p.size() && k.rfind(p, 0) == 0 &&
                                        k[p.size()] == '.';
                               });
    if (ignored) continue;
    std::string hint = closest_match(k, known);
    return Status::invalid_argument(fmt::format(
        "{}: unknown key '{}'; {}", origin_, k,
        hint.empty() ? "remove it or check the spelling against configs/*.toml"
                     : fmt::format("did you mean '{}'?", hint)));
  }
  return Status::ok();
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // A plausible typo: at most a third of the word differs.
  if (best_d <= std::max<size_t>(2, word.size() / 3)) return best;
  return {};
}

}  // namespace dualpath
