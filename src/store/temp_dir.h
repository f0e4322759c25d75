#pragma once
// TempDir: a per-test temporary directory, removed with its contents on destruction; and a file
// counter for checks on it. Test-only.

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace dualpath::store {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/dp_store_test.XXXXXX";
    if (char* p = ::mkdtemp(pattern.data())) path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // A subdirectory, created.
  std::string sub(const std::string& name) const {
    std::string p = path_ + "/" + name;
    std::error_code ec;
    std::filesystem::create_directories(p, ec);
    return p;
  }

 private:
  std::string path_;
};

// Regular files below `dir`, recursively (0 when it does not exist).
inline size_t count_regular_files(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    n += it->is_regular_file() ? 1 : 0;
  }
  return n;
}

}  // namespace dualpath::store
