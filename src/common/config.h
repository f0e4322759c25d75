#pragma once
// Config: typed reads from a TOML document with errors that name the key, the value and the fix.
//
//   DP_ASSIGN_OR_RETURN(auto cfg, Config::from_file(path));
//   double gbps = cfg.positive_number("cluster.snic_gbps", 400.0, "the storage NIC speed in Gb/s");
//   ...
//   DP_RETURN_IF_ERROR(cfg.finish());   // first bad value, or an unknown key (a typo)
//
// Reads never fail on their own: a bad value records an error and returns the fallback, so that
// one pass reads every key and finish() reports the first problem with its full context. Keys a
// program never read are reported by finish() as unknown, with the closest known key suggested.
// Thread-compatible.

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "dualpath/result.h"

namespace dualpath {

class Config {
 public:
  // An empty config: every read returns its fallback (the embedded defaults).
  Config();
  ~Config();
  Config(Config&&) noexcept;
  Config& operator=(Config&&) noexcept;

  static Result<Config> from_file(const std::string& path);
  static Result<Config> from_string(std::string_view text, std::string origin);

  // Where the values come from, for messages ("configs/emu-1p2d.toml", "<defaults>").
  const std::string& origin() const { return origin_; }
  bool has(std::string_view key) const;

  // `what` is a short description used in the fix part of an error ("the SNIC speed in Gb/s").
  double number(std::string_view key, double fallback, std::string_view what = {});
  double positive_number(std::string_view key, double fallback, std::string_view what = {});
  double non_negative_number(std::string_view key, double fallback, std::string_view what = {});
  int64_t integer(std::string_view key, int64_t fallback, int64_t min, int64_t max,
                  std::string_view what = {});
  bool boolean(std::string_view key, bool fallback);
  std::string string(std::string_view key, std::string fallback, std::string_view what = {});
  // A string that must be one of `allowed`.
  std::string choice(std::string_view key, std::string fallback,
                     const std::vector<std::string>& allowed);
  std::vector<std::string> string_list(std::string_view key, std::vector<std::string> fallback);
  std::vector<int64_t> integer_list(std::string_view key, std::vector<int64_t> fallback);
  // A size in bytes: an integer (bytes) or a string with a binary suffix, "64M", "80G", "1.5T",
  // "512KiB" (K, M, G, T = 2^10, 2^20, 2^30, 2^40; an optional "B" or "iB" after it).
  int64_t size_bytes(std::string_view key, int64_t fallback, std::string_view what = {});

  // Records a caller-side validation error for `key` (e.g. a cross-field check).
  void fail(std::string_view key, std::string_view message);

  // OK when every read value was valid and no key in the document went unread.
  Status finish() const;
  // Marks a whole table as known without reading it (sections owned by another program).
  void ignore_section(std::string_view prefix);
  // Marks one key as known without reading it (a key of a shared section that another program
  // reads, e.g. the scheduler service's keys of [scheduler] for the simulator).
  void ignore_key(std::string_view key) { touch(key); }

 private:
  struct Doc;
  const void* lookup(std::string_view key) const;
  void touch(std::string_view key);
  std::string value_text(std::string_view key) const;

  std::unique_ptr<Doc> doc_;
  std::string origin_ = "<defaults>";
  std::set<std::string, std::less<>> read_keys_;
  std::set<std::string, std::less<>> ignored_prefixes_;
  std::vector<std::string> errors_;
};

// "80G" -> 85899345920 (the size_bytes format); kInvalidArgument saying what is wrong.
Result<int64_t> parse_size_bytes(std::string_view text);

// Edit distance, for "did you mean" hints.
size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `word` when it is close enough to be a plausible typo, else empty.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace dualpath
