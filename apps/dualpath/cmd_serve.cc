// `dualpath serve`: the scheduler service of the live system and, by default, the config's
// node processes on this machine (src/serve/, docs/serve.md).

#include <signal.h>

#include <fmt/format.h>

#include <cstdio>
#include <optional>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "serve/cluster.h"

namespace dualpath::app {
namespace {

struct ServeArgs {
  std::string config_path;
  std::string host = "127.0.0.1";
  int port = 8000;
  bool external_nodes = false;
  std::optional<int> scheduler_port;
};

bool loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

int run(const ServeArgs& a) {
  auto cfg = serve::load_serve_config(a.config_path);
  if (!cfg.is_ok()) return usage_error(cfg.status().message());
  if (a.port < 1 || a.port > 65535) {
    return usage_error(fmt::format("--port {}: give a TCP port 1..65535 (default 8000)", a.port));
  }
  if (a.scheduler_port) {
    if (*a.scheduler_port < 0 || *a.scheduler_port > 65535)
      return usage_error(
          fmt::format("--scheduler-port {}: give a TCP port 0..65535 (0: any "
                      "free one)",
                      *a.scheduler_port));
    cfg->scheduler.port = static_cast<uint16_t>(*a.scheduler_port);
  }
  if (!loopback(a.host)) {
    std::fprintf(stderr,
                 "warning: --host %s exposes the service beyond this machine without API keys; "
                 "keep it on 127.0.0.1 until keys are configured\n",
                 a.host.c_str());
  }
  // SIGINT / SIGTERM are taken by this thread (sigwait) for a clean shutdown; every thread the
  // service starts inherits the blocked mask, and the nodes get a fresh one (Subprocess).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  serve::ClusterOptions options;
  options.config = *cfg;
  options.spawn_nodes = !a.external_nodes;
  options.ready_timeout = cfg->scheduler.register_timeout;
  const auto& e = cfg->engine;
  std::fprintf(stderr,
               "dualpath serve: scheduler on %s:%u, %s; %d prefill + %d decode nodes (%s, %s "
               "compute)%s\n",
               cfg->scheduler.host.c_str(), cfg->scheduler.port,
               std::string(serve::serve_mode_name(cfg->scheduler.mode)).c_str(), e.prefill_nodes,
               e.decode_nodes, e.model.c_str(), e.compute.c_str(),
               a.external_nodes ? "; waiting for nodes started with `dualpath node`" : "");
  auto cluster = serve::Cluster::start(options);
  if (!cluster.is_ok()) {
    std::fprintf(stderr, "dualpath: error: %s\n", cluster.status().to_string().c_str());
    return 1;
  }
  std::printf("dualpath serve: ready: %d prefill + %d decode nodes registered; scheduler at %s\n",
              e.prefill_nodes, e.decode_nodes, (*cluster)->service().address().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  std::fprintf(stderr, "dualpath serve: %s: stopping the nodes\n", ::strsignal(sig));
  cluster->reset();
  std::fprintf(stderr, "dualpath serve: stopped\n");
  return 0;
}

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "serve",
      "Run the live system's scheduler service. By default it also starts the config's prefill\n"
      "and decode node processes on this machine (the embedded default with no config: the\n"
      "tiny CPU model on 1P2D with a temporary block store); with --external-nodes it waits for\n"
      "nodes started by hand (`dualpath node --scheduler HOST:PORT --role R`), on any host.\n"
      "It prints a line containing `ready` once every node has registered, and stops them all\n"
      "on SIGINT / SIGTERM.\n"
      "Examples:\n"
      "  dualpath serve\n"
      "  dualpath serve --config configs/emu-2p4d.toml\n"
      "  dualpath serve --config cluster.toml --external-nodes");
  cmd->add_option("--config", args->config_path,
                  "TOML cluster file ([model], [cluster], [store], [live], [scheduler], ...)");
  cmd->add_option("--host", args->host, "address the API binds (default 127.0.0.1)");
  cmd->add_option("--port", args->port, "port the API binds (default 8000)");
  cmd->add_option("--scheduler-port", args->scheduler_port,
                  "port nodes connect to (default scheduler.port, 8100; 0: any free one)");
  cmd->add_flag("--external-nodes", args->external_nodes,
                "start no nodes: wait for nodes started by hand with `dualpath node`");
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("", "serve", setup);

}  // namespace
}  // namespace dualpath::app
