// `dualpath keygen --out FILE`: a new cluster credential (control/credential.h), the file that
// `serve --cluster-key` and every `node --cluster-key` take: the control plane is then mutual
// TLS, and only holders of the file may join as nodes.

#include <fmt/format.h>

#include <cstdio>

#include "apps/dualpath/command.h"
#include "control/credential.h"

namespace dualpath::app {
namespace {

struct KeygenArgs {
  std::string out;
  bool force = false;
};

void setup(CLI::App& parent, int& exit_code) {
  auto a = std::make_shared<KeygenArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "keygen",
      "Write a new cluster credential: a private certificate authority (EC P-256) in one PEM\n"
      "file, created owner-only (0600). Give the same file to `dualpath serve --cluster-key`\n"
      "and to every `dualpath node --cluster-key`: the scheduler and its nodes then speak\n"
      "mutual TLS, and a node without the file is refused before the scheduler allocates\n"
      "anything for it. Whoever holds the file may join the cluster: copy it only to the\n"
      "cluster's hosts (scp, a secrets manager), never into a world-readable place.\n"
      "Examples:\n"
      "  dualpath keygen --out /etc/dualpath/cluster.key\n"
      "  dualpath serve --config cluster.toml --external-nodes --scheduler-host 0.0.0.0 \\\n"
      "      --cluster-key /etc/dualpath/cluster.key");
  cmd->add_option("--out", a->out, "the file to write (it must not exist, unless --force)")
      ->required();
  cmd->add_flag("--force", a->force, "replace an existing file (every node then needs the new one)");
  cmd->callback([a, &exit_code] {
    auto cred = control::generate_credential();
    if (!cred.is_ok()) {
      std::fprintf(stderr, "dualpath: error: %s\n", cred.status().message().c_str());
      exit_code = 1;
      return;
    }
    const Status written = control::write_credential(*cred, a->out, a->force);
    if (!written.is_ok()) {
      if (written.is_already_exists()) {
        exit_code = usage_error(fmt::format("--out {}", written.message()));
      } else {
        std::fprintf(stderr, "dualpath: error: %s\n", written.message().c_str());
        exit_code = 1;
      }
      return;
    }
    std::printf("wrote the cluster credential to %s (mode 0600); pass it as --cluster-key to "
                "`dualpath serve` and to every `dualpath node`\n",
                a->out.c_str());
    exit_code = 0;
  });
}

DP_REGISTER_COMMAND("", "keygen", setup);

}  // namespace
}  // namespace dualpath::app
