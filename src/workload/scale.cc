#include "workload/scale.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "workload/shape.h"

namespace dualpath::workload {

Result<Dataset> scale(const Dataset& ds, double append_scale, double gen_scale) {
  for (double f : {append_scale, gen_scale}) {
    if (!(f > 0) || !std::isfinite(f)) {
      return Status::invalid_argument(fmt::format(
          "scale factor {} (workload.append_scale = {}, workload.gen_scale = {}); use a "
          "positive number such as 1.5",
          f, append_scale, gen_scale));
    }
  }
  Dataset out;
  out.name = ds.name;
  if (append_scale != 1.0 || gen_scale != 1.0) {
    out.name += fmt::format("*a{}g{}", append_scale, gen_scale);
  }
  out.max_len_tokens = ds.max_len_tokens;
  out.trajectories.reserve(ds.trajectories.size());
  for (const Trajectory& tr : ds.trajectories) {
    Trajectory st;
    st.id = tr.id;
    int64_t seen = 0;
    for (const Turn& t : tr.turns) {
      Turn s = t;
      s.append_tokens = std::llround(static_cast<double>(t.append_tokens) * append_scale);
      s.gen_tokens =
          std::max<int64_t>(1, std::llround(static_cast<double>(t.gen_tokens) * gen_scale));
      // A trace's cut point lies inside the recorded context, which grew by both factors; the
      // append scale is used because appends dominate what a cut keeps (prompts, tool output).
      if (t.keep_tokens >= 0) {
        s.keep_tokens = std::llround(static_cast<double>(t.keep_tokens) * append_scale);
      }
      const int64_t context = s.keep_tokens >= 0 ? std::min(s.keep_tokens, seen) : seen;
      const int64_t end = context + s.append_tokens + s.gen_tokens;
      if (out.max_len_tokens > 0 && end > out.max_len_tokens) {
        if (!st.turns.empty()) break;
        // The first turn alone is too long: cut its append so the trajectory keeps one turn.
        s.gen_tokens = std::min(s.gen_tokens, out.max_len_tokens - 1);
        s.append_tokens = out.max_len_tokens - s.gen_tokens;
        st.turns.push_back(s);
        break;
      }
      seen = end;
      st.turns.push_back(s);
    }
    out.trajectories.push_back(std::move(st));
  }
  return out;
}

}  // namespace dualpath::workload
