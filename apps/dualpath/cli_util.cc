#include "apps/dualpath/cli_util.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace dualpath::app {

Status write_text_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return Status::io_error(fmt::format("cannot write '{}': {}; check that its directory exists "
                                          "and is writable", path, std::strerror(errno)));
    }
    out << text;
    if (!out.flush()) {
      return Status::io_error(fmt::format("writing '{}' failed: {}", path, std::strerror(errno)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::io_error(fmt::format("cannot rename '{}' to '{}': {}", tmp, path,
                                        std::strerror(errno)));
  }
  return Status::ok();
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) != 0; }

}  // namespace dualpath::app
