// dualpath: one CLI for the simulator, the planner, the live system and the benchmarks.
// Subcommands live in cmd_*.cc and register themselves (command.h).

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "apps/dualpath/command.h"
#include "common/config.h"

namespace dualpath::app {
namespace {

struct Entry {
  std::string parent;
  std::string name;
  CommandSetup setup;
};

std::vector<Entry>& registry() {
  static std::vector<Entry> entries;
  return entries;
}

}  // namespace

bool register_command(std::string parent, std::string name, CommandSetup setup) {
  registry().push_back({std::move(parent), std::move(name), std::move(setup)});
  return true;
}

namespace {

const CLI::App* g_root = nullptr;  // the command tree, while main() parses and runs it

// The deepest subcommand the command line selected ("dualpath bench store" -> store).
const CLI::App* selected(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) return selected(*sub);
  return &app;
}

// The libraries' errors name config keys ("online.aps = 0: ..."), so that they read right behind
// the HTTP API too. On the command line, a key the running command also takes as a flag gets the
// flag after its value: "online.aps = 0 (--aps): ...". The flag is the key's last part with
// dashes (workload.gen_scale: --gen-scale), or without its unit (online.duration_s: --duration,
// online.slo_tpot_ms: --slo-tpot), when the command has such an option.
std::string with_flags(const std::string& message, const CLI::App& cmd) {
  auto word_char = [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; };
  std::string out;
  size_t copied = 0;
  for (size_t eq = message.find(" = "); eq != std::string::npos; eq = message.find(" = ", eq + 3)) {
    // "section.key = ": the key is the word after the dot right before " = ".
    size_t key_begin = eq;
    while (key_begin > 0 && word_char(message[key_begin - 1])) --key_begin;
    if (key_begin == eq || key_begin == 0 || message[key_begin - 1] != '.') continue;
    const size_t section_end = key_begin - 1;
    size_t section_begin = section_end;
    while (section_begin > 0 && word_char(message[section_begin - 1])) --section_begin;
    if (section_begin == section_end || section_begin < copied) continue;
    std::string name = message.substr(key_begin, eq - key_begin);
    std::replace(name.begin(), name.end(), '_', '-');
    std::string flag;
    for (const std::string& candidate :
         {name, name.ends_with("-s") ? name.substr(0, name.size() - 2) : std::string(),
          name.ends_with("-ms") ? name.substr(0, name.size() - 3) : std::string()}) {
      if (!candidate.empty() && cmd.get_option_no_throw("--" + candidate) != nullptr) {
        flag = "--" + candidate;
        break;
      }
    }
    if (flag.empty() || message.find("(" + flag + ")") != std::string::npos) continue;
    // After the value: up to the next space, colon, comma, semicolon or parenthesis.
    const size_t value = eq + 3;
    const size_t end = std::min(message.find_first_of(" :,;)", value), message.size());
    out += message.substr(copied, end - copied) + " (" + flag + ")";
    copied = end;
  }
  return out + message.substr(copied);
}

}  // namespace

int usage_error(const std::string& message) {
  const std::string text = g_root != nullptr ? with_flags(message, *selected(*g_root)) : message;
  std::fprintf(stderr, "dualpath: error: %s\n", text.c_str());
  return 2;
}

namespace {

std::string command_path(const CLI::App* app) {
  std::string path;
  for (; app != nullptr; app = app->get_parent()) {
    std::string name = app->get_parent() ? app->get_name() : "dualpath";
    path = path.empty() ? name : name + " " + path;
  }
  return path;
}

// "did you mean" for a word the command line did not expect: an option of the selected command
// or one of its subcommands.
std::string suggestion(const CLI::App& cmd, const std::string& word) {
  std::vector<std::string> candidates;
  if (word.rfind("-", 0) == 0) {
    for (const CLI::Option* opt : cmd.get_options()) {
      for (const auto& l : opt->get_lnames()) candidates.push_back("--" + l);
      for (const auto& s : opt->get_snames()) candidates.push_back("-" + s);
    }
  } else {
    for (const CLI::App* sub : cmd.get_subcommands({})) candidates.push_back(sub->get_name());
  }
  std::string key = word.substr(0, word.find('='));
  return closest_match(key, candidates);
}

// One line, "dualpath: error: ...", naming what was wrong and where to look; exit code 2 like
// every other usage error. Help and version requests keep CLI11's handling.
int report_parse_error(CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  if (e.get_exit_code() == 0) return app.exit(e);
  const CLI::App* cmd = selected(app);
  std::string message = e.what();
  std::string hint;
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    // CLI11 lists the unexpected words last first; a number is an option's value, not a typo.
    std::vector<std::string> words;
    std::string list = message.substr(message.find(": ") + 2);
    for (size_t pos = 0; pos < list.size();) {
      size_t end = std::min(list.find(' ', pos), list.size());
      words.insert(words.begin(), list.substr(pos, end - pos));
      pos = end + 1;
    }
    for (const std::string& word : words) {
      if (word.find_first_not_of("-+.0123456789eE") == std::string::npos) continue;
      if (std::string close = suggestion(*cmd, word); !close.empty()) {
        hint = fmt::format("; did you mean '{}'?", close);
        break;
      }
    }
  } else if (!cmd->get_subcommands({}).empty() && cmd->get_subcommands().empty()) {
    // A command that needs a subcommand got none, or a word that is not one.
    std::vector<std::string> names;
    for (const CLI::App* sub : cmd->get_subcommands({})) names.push_back(sub->get_name());
    std::vector<std::string> path;  // the words that selected `cmd` ("bench")
    for (const CLI::App* a = cmd; a->get_parent() != nullptr; a = a->get_parent()) {
      path.push_back(a->get_name());
    }
    std::string given;
    for (int i = 1; i < argc; ++i) {
      std::string word = argv[i];
      if (word.rfind("-", 0) != 0 && std::find(path.begin(), path.end(), word) == path.end()) {
        given = word;
        break;
      }
    }
    message = given.empty() ? "a subcommand is required"
                            : fmt::format("unknown subcommand '{}'", given);
    std::string close = given.empty() ? "" : closest_match(given, names);
    hint = close.empty() ? fmt::format("; use one of {}", fmt::join(names, ", "))
                         : fmt::format("; did you mean '{}'?", close);
  }
  std::fprintf(stderr, "dualpath: error: %s%s (see '%s --help')\n", message.c_str(),
               hint.c_str(), command_path(cmd).c_str());
  return 2;
}

}  // namespace
}  // namespace dualpath::app

int main(int argc, char** argv) {
  using dualpath::app::registry;
  CLI::App app{
      "dualpath: DualPath agentic LLM inference -- cluster simulator, P/D planner, live\n"
      "prefill/decode engines that load cached KV by two paths (PE-side and DE-side storage\n"
      "reads), and benchmarks. See README.md and docs/ for a tour.\n"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dualpath 0.1.0");
  int exit_code = 0;

  auto entries = registry();
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<std::string, CLI::App*> parents;
  parents[""] = &app;
  for (const auto& e : entries) {
    if (e.parent.empty() || parents.count(e.parent)) continue;
    CLI::App* group = app.add_subcommand(
        e.parent, e.parent == "bench" ? "Benchmarks of the real parts, measured side by side "
                                        "with a reference tool in the same run"
                                      : e.parent);
    group->require_subcommand(1);
    parents[e.parent] = group;
  }
  for (const auto& e : entries) e.setup(*parents[e.parent], exit_code);

  dualpath::app::g_root = &app;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return dualpath::app::report_parse_error(app, e, argc, argv);
  }
  return exit_code;
}
