#include "apps/dualpath/gnuplot.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdio>

namespace dualpath::app {

Status run_gnuplot(const std::string& script) {
  FILE* p = ::popen("gnuplot 2>&1", "w");
  if (p == nullptr) {
    return Status::unavailable("cannot start gnuplot; install it with scripts/install-deps.sh");
  }
  std::fwrite(script.data(), 1, script.size(), p);
  int rc = ::pclose(p);
  if (rc != 0) {
    int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    return Status::io_error(fmt::format(
        "gnuplot exited with status {}{}", code,
        code == 127 ? " (not installed? run scripts/install-deps.sh)" : ""));
  }
  return Status::ok();
}

}  // namespace dualpath::app
