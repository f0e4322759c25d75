#pragma once
// Small helpers shared by the subcommands: writing files with clear errors, terminal checks.

#include <string>

#include "dualpath/status.h"

namespace dualpath::app {

// Writes `text` to `path` (atomically: a temporary file, then rename). Errors name the path.
Status write_text_file(const std::string& path, const std::string& text);
bool stderr_is_terminal();

}  // namespace dualpath::app
