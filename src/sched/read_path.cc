#include "sched/read_path.h"

#include <fmt/format.h>

namespace dualpath::sched {

std::string_view read_path_name(ReadPath path) {
  switch (path) {
    case ReadPath::kPe:
      return "pe";
    case ReadPath::kDe:
      return "de";
    case ReadPath::kRecompute:
      return "recompute";
    case ReadPath::kOracle:
      return "oracle";
    case ReadPath::kSplit:
      return "split";
  }
  return "?";
}

Result<ReadPath> parse_read_path(std::string_view name) {
  for (ReadPath p : {ReadPath::kPe, ReadPath::kDe, ReadPath::kRecompute, ReadPath::kOracle,
                     ReadPath::kSplit}) {
    if (read_path_name(p) == name) return p;
  }
  return Status::invalid_argument(
      fmt::format("read path '{}' is not one of pe, de, recompute, oracle, split", name));
}

std::string_view path_request_name(const PathRequest& request) {
  return request ? read_path_name(*request) : "auto";
}

Result<PathRequest> parse_path_request(std::string_view name) {
  if (name == "auto") return PathRequest();
  auto p = parse_read_path(name);
  if (!p.is_ok()) {
    return Status::invalid_argument(
        fmt::format("path '{}' is not one of auto, pe, de, recompute, oracle, split", name));
  }
  return PathRequest(*p);
}

}  // namespace dualpath::sched
