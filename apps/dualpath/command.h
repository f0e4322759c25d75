#pragma once
// Subcommand registry: each cmd_*.cc file registers its subcommand with DP_REGISTER_COMMAND, so
// adding a subcommand touches no shared file. main() builds the CLI11 tree from the registry.

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace dualpath::app {

// Adds the subcommand to `parent` and sets, when it runs, `exit_code`.
using CommandSetup = std::function<void(CLI::App& parent, int& exit_code)>;

// parent: "" for a top-level command, "bench" for `dualpath bench <x>`.
bool register_command(std::string parent, std::string name, CommandSetup setup);

// Prints a one-line error for a bad input and returns the exit code to use (2).
int usage_error(const std::string& message);

}  // namespace dualpath::app

#define DP_REGISTER_COMMAND(parent, name, setup) \
  static const bool DP_CONCAT_CMD_(dp_cmd_registered_, __LINE__) =     \
      ::dualpath::app::register_command(parent, name, setup)
#define DP_CONCAT_CMD_INNER_(a, b) a##b
#define DP_CONCAT_CMD_(a, b) DP_CONCAT_CMD_INNER_(a, b)
