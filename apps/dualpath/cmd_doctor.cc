// `dualpath doctor --config FILE`: the seed deployment guide's troubleshooting list, checked
// before anything starts (src/serve/doctor.h; docs/deploy.md "Troubleshooting").

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "serve/api_keys.h"
#include "serve/doctor.h"
#include "serve/serve_config.h"
#include "serve/serve_guide.h"

namespace dualpath::app {
namespace {

struct DoctorArgs {
  std::string config_path;
  std::string settings_path;
  std::string api_keys;
  bool external_nodes = false;
};

int run(const DoctorArgs& a) {
  auto cfg = serve::read_serve_config(a.config_path);
  if (!cfg.is_ok()) {
    std::printf("error: config: %s\n", cfg.status().message().c_str());
    return 2;
  }
  serve::DoctorInput in;
  in.config = std::move(cfg).value();
  std::string settings_error;
  if (!a.settings_path.empty()) {
    auto s = serve::apply_settings_json(a.settings_path, in.config);
    if (!s.is_ok()) {
      settings_error = s.status().message();  // reported with the rest; the checks go on
    } else {
      in.settings = std::move(s).value();
    }
  }
  std::unique_ptr<serve::ApiKeys> keys;
  if (!a.api_keys.empty()) {
    auto k = serve::ApiKeys::load(a.api_keys);
    if (!k.is_ok()) {
      std::printf("error: keys: %s\n", k.status().message().c_str());
      return 2;
    }
    keys = std::move(k).value();
    in.keys = keys.get();
  }
  in.local_nodes = !a.external_nodes;
  in.host = serve::this_host();
  auto findings = serve::run_doctor(in);
  if (!settings_error.empty()) {
    findings.insert(findings.begin(), {serve::Severity::kError, "settings", settings_error});
  }
  std::fputs(serve::format_findings(findings).c_str(), stdout);
  int warnings = 0, errors = 0;
  for (const auto& f : findings) {
    warnings += f.severity == serve::Severity::kWarning ? 1 : 0;
    errors += f.severity == serve::Severity::kError ? 1 : 0;
  }
  std::printf("%s: %d error%s, %d warning%s\n",
              a.config_path.empty() ? "embedded defaults" : a.config_path.c_str(), errors,
              errors == 1 ? "" : "s", warnings, warnings == 1 ? "" : "s");
  return errors > 0 ? 2 : 0;
}

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<DoctorArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "doctor",
      "Check a config against the deployment guide's troubleshooting list before starting it\n"
      "(`dualpath serve` runs the same checks): the compute and storage NICs exist (naming the\n"
      "devices that do), they are not one device or one subnet (DualPath would degrade to one\n"
      "path), the DRAM buffers hold a Full Block and at real scale 20 GiB or more, model\n"
      "traffic outranks the KV class, P/D is within the bottleneck-free range, and with health\n"
      "checks on every API key may call /v1/models. Lines start with ok:, warning: or error:.\n"
      "Exit 2 on any error, 0 otherwise.\n"
      "Examples:\n"
      "  dualpath doctor --config configs/emu-1p2d.toml\n"
      "  dualpath doctor --config config.toml --settings settings.json --api-keys keys.toml");
  cmd->add_option("--config", args->config_path,
                  "TOML cluster file, ours or the guide's ([storage_node], [dualpath_engine], "
                  "[prefill_engine], [decode_engine])")
      ->required();
  cmd->add_option("--settings", args->settings_path,
                  "the guide's settings.json: its dualpath and health_check blocks");
  cmd->add_option("--api-keys", args->api_keys, "the API key file serve would load");
  cmd->add_flag("--external-nodes", args->external_nodes,
                "the nodes run on other hosts (skips the local memory check)");
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("", "doctor", setup);

}  // namespace
}  // namespace dualpath::app
