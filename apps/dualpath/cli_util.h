#pragma once
// Small helpers shared by the subcommands: writing files with clear errors, terminal checks.

#include <string>

#include "dualpath/status.h"

namespace dualpath::app {

// Writes `text` to `path` (atomically: a temporary file, then rename). Errors name the path; a
// failed write leaves no temporary file behind.
Status write_text_file(const std::string& path, const std::string& text);
// Checks, before a long run, that `flag`'s file `path` can be written when the run ends: not
// empty, not a directory, in an existing writable directory. Errors name the flag and the path.
Status check_output_file(const std::string& flag, const std::string& path);
// The same for a string flag whose empty value means "not given" (then OK).
Status check_output_file_if_given(const std::string& flag, const std::string& path);
// The same for an output folder: not empty; created if missing (its parent must exist); writable.
Status prepare_output_dir(const std::string& flag, const std::string& dir);
bool stderr_is_terminal();

}  // namespace dualpath::app
