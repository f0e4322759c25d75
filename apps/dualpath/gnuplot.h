#pragma once
// Runs gnuplot (Debian gnuplot-nox) on a script to make PNG/SVG figures.

#include <string>

#include "dualpath/status.h"

namespace dualpath::app {

// Feeds `script` to `gnuplot` on stdin. Errors when gnuplot is missing or fails.
Status run_gnuplot(const std::string& script);

}  // namespace dualpath::app
