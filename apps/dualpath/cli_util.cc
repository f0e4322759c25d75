#include "apps/dualpath/cli_util.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace dualpath::app {

namespace {

std::string parent_dir(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// An existing path that is not a plain file: a symlink (/dev/stdout), a device, a FIFO.
bool is_special(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
}

// Writes `text` into `file` (truncating it); errors name `path`, the file the user asked for.
Status write_to(const std::string& file, const std::string& path, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) {
    return Status::io_error(fmt::format("cannot write '{}': {}; check that its directory exists "
                                        "and is writable", path, std::strerror(errno)));
  }
  out << text;
  if (!out.flush()) {
    return Status::io_error(fmt::format("writing '{}' failed: {}", path, std::strerror(errno)));
  }
  return Status::ok();
}

}  // namespace

Status write_text_file(const std::string& path, const std::string& text) {
  if (is_directory(path)) {
    return Status::io_error(
        fmt::format("cannot write '{}': it is a directory; give a file name", path));
  }
  // A rename would replace the link or device itself (`--json /dev/stdout` must print).
  if (is_special(path)) return write_to(path, path, text);
  std::string tmp = path + ".tmp";
  if (Status s = write_to(tmp, path, text); !s.is_ok()) {
    std::remove(tmp.c_str());
    return s;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    return Status::io_error(fmt::format("cannot rename '{}' to '{}': {}", tmp, path,
                                        std::strerror(err)));
  }
  return Status::ok();
}

Status check_output_file(const std::string& flag, const std::string& path) {
  if (path.empty()) {
    return Status::invalid_argument(fmt::format("{} '': give a file name, e.g. {} out.json", flag,
                                                flag));
  }
  if (is_directory(path)) {
    return Status::invalid_argument(fmt::format(
        "{} '{}' is a directory; give a file name, e.g. {} {}/out.json", flag, path, flag,
        path));
  }
  if (is_special(path) && ::access(path.c_str(), W_OK) == 0) return Status::ok();
  std::string dir = parent_dir(path);
  if (!is_directory(dir) || ::access(dir.c_str(), W_OK) != 0) {
    return Status::invalid_argument(fmt::format(
        "{} '{}': directory '{}' does not exist or is not writable; create it or write elsewhere",
        flag, path, dir));
  }
  return Status::ok();
}

Status check_output_file_if_given(const std::string& flag, const std::string& path) {
  return path.empty() ? Status::ok() : check_output_file(flag, path);
}

Status prepare_output_dir(const std::string& flag, const std::string& dir) {
  if (dir.empty()) {
    return Status::invalid_argument(
        fmt::format("{} '': give a folder, e.g. {} /tmp/results", flag, flag));
  }
  if (!is_directory(dir) && ::mkdir(dir.c_str(), 0755) != 0) {
    return Status::invalid_argument(fmt::format("{} '{}': cannot create it: {}; its parent must "
                                                "exist and be writable",
                                                flag, dir, std::strerror(errno)));
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    return Status::invalid_argument(
        fmt::format("{} '{}' is not writable; write elsewhere", flag, dir));
  }
  return Status::ok();
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) != 0; }

}  // namespace dualpath::app
