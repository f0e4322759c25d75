#pragma once
// FreshStore: an empty block store for one benchmark run, so that no run hits the blocks of
// another: a directory inside each configured data path, removed with its contents when the
// run ends. With no data paths configured it holds none (the scheduler service then makes, and
// removes, a temporary store itself).

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::bench {

class FreshStore {
 public:
  // `tag` names the run (e.g. "bench-serve-full").
  static Result<FreshStore> make(const std::vector<std::string>& data_paths,
                                 const std::string& tag) {
    FreshStore s;
    for (const std::string& base : data_paths) {
      std::string dir = fmt::format("{}/dualpath-{}-{}", base, tag, ::getpid());
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      if (!std::filesystem::create_directories(dir, ec)) {
        return Status::io_error(fmt::format(
            "cannot create the store directory {}: {}; check that the data path {} exists and "
            "is writable",
            dir, ec.message(), base));
      }
      s.paths_.push_back(std::move(dir));
    }
    return s;
  }
  FreshStore(FreshStore&& o) noexcept : paths_(std::move(o.paths_)) { o.paths_.clear(); }
  FreshStore& operator=(FreshStore&&) = delete;
  FreshStore(const FreshStore&) = delete;
  ~FreshStore() {
    for (const auto& d : paths_) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
  const std::vector<std::string>& paths() const { return paths_; }

 private:
  FreshStore() = default;
  std::vector<std::string> paths_;
};

}  // namespace dualpath::bench
