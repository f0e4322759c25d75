// `dualpath serve`: the scheduler service of the live system and, by default, the config's
// node processes on this machine (src/serve/, docs/serve.md).

#include <signal.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "control/credential.h"
#include "serve/api_keys.h"
#include "serve/cluster.h"
#include "serve/doctor.h"
#include "serve/http_api.h"
#include "serve/serve_guide.h"

namespace dualpath::app {
namespace {

struct ServeArgs {
  std::string config_path;
  std::string host = "127.0.0.1";
  int port = 8000;
  bool external_nodes = false;
  std::optional<int> scheduler_port;
  std::optional<std::string> scheduler_host;
  std::string cluster_key;
  std::string api_keys;
  std::string settings;
  bool skip_doctor = false;
  std::string served_model_name;
  std::string model;
  int max_concurrent = 128;
  int64_t max_model_len = 16384;
  int64_t request_timeout_s = 600;
  int max_connections = 1024;
  std::string ssl_certfile;
  std::string ssl_keyfile;
  std::string tool_call_parser;
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
  if (a.scheduler_host) cfg->scheduler.host = *a.scheduler_host;
  if (!a.cluster_key.empty()) cfg->scheduler.cluster_key = a.cluster_key;
  if (!cfg->scheduler.cluster_key.empty()) {
    // Checked now, so that a bad file is a usage error naming the flag, not a failed start.
    auto cred = control::read_credential(cfg->scheduler.cluster_key);
    if (!cred.is_ok()) return usage_error(cred.status().message());
  }
  if (a.external_nodes && !control::is_loopback_host(cfg->scheduler.host) &&
      cfg->scheduler.cluster_key.empty()) {
    return usage_error(fmt::format(
        "--external-nodes with the scheduler on {} (--scheduler-host, scheduler.host) and no "
        "--cluster-key would let anyone who reaches port {} join as a node; make a credential "
        "with `dualpath keygen --out cluster.key` and give --cluster-key cluster.key here and to "
        "every `dualpath node`",
        cfg->scheduler.host, cfg->scheduler.port));
  }
  std::shared_ptr<serve::ApiKeys> keys;
  if (!a.api_keys.empty()) {
    auto k = serve::ApiKeys::load(a.api_keys);
    if (!k.is_ok()) return usage_error(k.status().message());
    keys = std::move(k).value();
    for (const std::string& w : keys->warnings()) {
      std::fprintf(stderr, "dualpath serve: warning: %s\n", w.c_str());
    }
  } else if (!loopback(a.host)) {
    return usage_error(fmt::format(
        "--host {} without --api-keys would let anyone on the network use the API: give "
        "--api-keys FILE (docs/api.md), or keep --host 127.0.0.1",
        a.host));
  }
  if (!a.model.empty()) {
    if (a.model == "tiny" || a.model == "small") {
      cfg->engine.model = a.model;
    } else if (std::filesystem::is_directory(a.model)) {
      // A Hugging Face llama checkpoint: the nodes load its weights, the API its tokenizer.
      cfg->engine.weights = a.model;
      cfg->engine.compute = "cpu";
      if (Status s = cfg->engine.validate(); !s.is_ok()) {
        return usage_error(fmt::format("--model {}: {}", a.model, s.message()));
      }
    } else {
      return usage_error(fmt::format(
          "--model {}: not a built-in model (tiny, small) nor a directory; give a Hugging Face "
          "llama checkpoint directory (config.json, *.safetensors, tokenizer.model)",
          a.model));
    }
  }
  // The served model's tokenizer, before anything starts: a checkpoint needs its tokenizer.model.
  auto tokenizer = serve::tokenizer_for(cfg->engine);
  if (!tokenizer.is_ok()) return usage_error(tokenizer.status().message());
  std::optional<serve::GuideSettings> settings;
  if (!a.settings.empty()) {
    auto s = serve::apply_settings_json(a.settings, *cfg);
    if (!s.is_ok()) return usage_error(s.status().message());
    settings = std::move(s).value();
  }
  // The deployment guide's troubleshooting list, before anything starts (`dualpath doctor`).
  if (!a.skip_doctor) {
    serve::DoctorInput in;
    in.config = *cfg;
    in.keys = keys.get();
    in.settings = settings;
    in.local_nodes = !a.external_nodes;
    in.host = serve::this_host();
    const auto findings = serve::run_doctor(in);
    std::fputs(serve::format_findings(findings, /*with_ok=*/false).c_str(), stderr);
    if (serve::has_errors(findings)) {
      std::fprintf(stderr,
                   "dualpath serve: the checks above failed (`dualpath doctor --config %s` "
                   "repeats them; --skip-doctor starts anyway)\n",
                   a.config_path.empty() ? "FILE" : a.config_path.c_str());
      return 2;
    }
  }
  if (a.max_concurrent < 1) {
    return usage_error(fmt::format("--max-concurrent {}: give at least 1", a.max_concurrent));
  }
  if (a.max_model_len < 2) {
    return usage_error(fmt::format("--max-model-len {}: give at least 2 tokens", a.max_model_len));
  }
  if (a.request_timeout_s < 0) {
    return usage_error(fmt::format("--request-timeout {}: give seconds, 0 for none (default 600)",
                                   a.request_timeout_s));
  }
  if (a.max_connections < 1) {
    return usage_error(fmt::format("--max-connections {}: give at least 1", a.max_connections));
  }
  if (a.ssl_certfile.empty() != a.ssl_keyfile.empty()) {
    return usage_error(
        "HTTPS needs both --ssl-certfile (the certificate chain, PEM) and --ssl-keyfile (its "
        "private key, PEM)");
  }
  for (const std::string* f : {&a.ssl_certfile, &a.ssl_keyfile}) {
    if (!f->empty() && !std::filesystem::is_regular_file(*f)) {
      return usage_error(fmt::format(
          "{} {}: no such file", f == &a.ssl_certfile ? "--ssl-certfile" : "--ssl-keyfile", *f));
    }
  }
  // Loaded once here, so that a bad file stops `serve` before any node starts.
  if (!a.ssl_certfile.empty()) {
    if (Status s = serve::check_tls_files(a.ssl_certfile, a.ssl_keyfile); !s.is_ok()) {
      return usage_error(s.message());
    }
  }
  if (!a.tool_call_parser.empty() && a.tool_call_parser != "hermes") {
    return usage_error(fmt::format(
        "--tool-call-parser {}: the one parser here is hermes (<tool_call>{{json}}</tool_call>, "
        "vLLM's name)",
        a.tool_call_parser));
  }
  // The API's port first, before any node starts: a port held by another server (another
  // `serve`) fails here at once, with exit 1 and no `ready` (issue 37).
  auto socket = serve::ListeningSocket::bind(a.host, a.port);
  if (!socket.is_ok()) {
    std::fprintf(stderr, "dualpath: error: %s\n", socket.status().message().c_str());
    return 1;
  }
  // SIGINT / SIGTERM are taken by this thread (sigwait) for a clean shutdown; every thread the
  // service starts inherits the blocked mask, and the nodes get a fresh one (Subprocess).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);  // reloads the API keys
  ::pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  serve::ClusterOptions options;
  options.config = *cfg;
  options.spawn_nodes = !a.external_nodes;
  options.ready_timeout = cfg->scheduler.register_timeout;
  const auto& e = cfg->engine;
  const engine::BackendSpec spec = e.backend_spec();
  // [cache] (issue 35), when it is on: the DRAM tier held per decode node, read-or-recompute.
  std::string cache;
  if (cfg->tier_bytes() > 0) {
    cache += fmt::format("; DRAM tier {:.0f} MB per decode node for {:g} s",
                         static_cast<double>(cfg->tier_bytes()) / 1e6, cfg->cache.de_dram_ttl_s);
  }
  if (cfg->cache_applies() && cfg->cache.recompute != "never") {
    cache += "; recompute " + cfg->cache.recompute;
  }
  std::fprintf(stderr,
               "dualpath serve: scheduler on %s:%u, %s; %d prefill + %d decode nodes (%s, %s "
               "compute, %s tokenizer)%s%s\n",
               cfg->scheduler.host.c_str(), cfg->scheduler.port,
               std::string(serve::serve_mode_name(cfg->scheduler.mode)).c_str(), e.prefill_nodes,
               e.decode_nodes, spec.is_checkpoint() ? spec.weights.c_str() : e.model.c_str(),
               e.compute.c_str(), (*tokenizer)->describe().c_str(), cache.c_str(),
               a.external_nodes ? "; waiting for nodes started with `dualpath node`" : "");
  auto cluster = serve::Cluster::start(options);
  if (!cluster.is_ok()) {
    std::fprintf(stderr, "dualpath: error: %s\n", cluster.status().to_string().c_str());
    return 1;
  }
  serve::ApiOptions api_options;
  api_options.host = a.host;
  api_options.port = a.port;
  api_options.served_model_name = a.served_model_name;
  api_options.keys = keys;
  api_options.max_concurrent = a.max_concurrent;
  api_options.max_model_len = a.max_model_len;
  api_options.tokenizer = *tokenizer;
  api_options.request_timeout = std::chrono::seconds(a.request_timeout_s);
  api_options.max_connections = a.max_connections;
  api_options.ssl_certfile = a.ssl_certfile;
  api_options.ssl_keyfile = a.ssl_keyfile;
  api_options.tool_call_parser = a.tool_call_parser;
  auto api = serve::HttpApi::start(api_options, (*cluster)->service(), std::move(*socket));
  if (!api.is_ok()) {
    std::fprintf(stderr, "dualpath: error: %s\n", api.status().to_string().c_str());
    return 1;
  }
  std::printf(
      "dualpath serve: ready: %s://%s:%d/v1 serving '%s' (%s); %d prefill + %d decode nodes "
      "registered; scheduler at %s; live page at %s://%s:%d/dashboard\n",
      (*api)->tls() ? "https" : "http", a.host.c_str(), (*api)->port(),
      (*api)->model_name().c_str(),
      keys ? fmt::format("{} API keys", keys->size()).c_str() : "no API keys: loopback only",
      e.prefill_nodes, e.decode_nodes, (*cluster)->service().address().c_str(),
      (*api)->tls() ? "https" : "http", a.host.c_str(), (*api)->port());
  std::fflush(stdout);
  int sig = 0;
  while (true) {
    sigwait(&stop, &sig);
    if (sig != SIGHUP) break;
    Status s = (*api)->reload_keys();
    if (s.is_ok()) {
      std::fprintf(stderr, "dualpath serve: SIGHUP: reloaded %s (%zu keys)\n",
                   keys ? keys->path().c_str() : "nothing", keys ? keys->size() : size_t{0});
      for (const std::string& w : keys ? keys->warnings() : std::vector<std::string>{}) {
        std::fprintf(stderr, "dualpath serve: warning: %s\n", w.c_str());
      }
    } else {
      std::fprintf(stderr, "dualpath serve: SIGHUP: kept the old keys: %s\n",
                   s.message().c_str());
    }
  }
  api->reset();
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
      "It serves the OpenAI-compatible API on --host:--port (GET /v1/models, POST\n"
      "/v1/chat/completions and /v1/completions with SSE streaming, /health, /version,\n"
      "/metrics; docs/api.md), prints a line containing `ready` once it does, and stops the\n"
      "nodes on SIGINT / SIGTERM.\n"
      "Examples:\n"
      "  dualpath serve\n"
      "  curl -s localhost:8000/v1/models | jq '.data[].id'\n"
      "  dualpath serve --host 0.0.0.0 --api-keys keys.toml\n"
      "  dualpath serve --ssl-certfile cert.pem --ssl-keyfile key.pem --tool-call-parser hermes\n"
      "  dualpath serve --config configs/emu-2p4d.toml\n"
      "  dualpath serve --model ~/models/my-llama   # a Hugging Face llama checkpoint\n"
      "  dualpath serve --config cluster.toml --external-nodes --scheduler-host 0.0.0.0 \\\n"
      "      --cluster-key cluster.key   # nodes on other hosts (dualpath keygen)");
  cmd->add_option("--config", args->config_path,
                  "TOML cluster file ([model], [cluster], [store], [live], [scheduler], ...)");
  cmd->add_option("--host", args->host,
                  "address the HTTP API binds (default 127.0.0.1); the scheduler's port for nodes "
                  "is --scheduler-host's");
  cmd->add_option("--port", args->port, "port the API binds (default 8000)");
  cmd->add_option("--scheduler-port", args->scheduler_port,
                  "port nodes connect to (default scheduler.port, 8100; 0: any free one)");
  cmd->add_option("--scheduler-host", args->scheduler_host,
                  "address the scheduler binds for nodes (default scheduler.host, 127.0.0.1; "
                  "--host moves the API only). Another host's nodes need it on an address they "
                  "reach, and then --cluster-key");
  cmd->add_option("--cluster-key", args->cluster_key,
                  "the cluster credential (`dualpath keygen --out FILE`): the scheduler and the "
                  "nodes speak mutual TLS and only holders of the file may join (default: "
                  "scheduler.cluster_key; local nodes get an ephemeral one)");
  cmd->add_option("--api-keys", args->api_keys,
                  "TOML file of [[keys]] (name, key_sha256 or key, scopes: models, chat, "
                  "completions, metrics, admin); reloaded on SIGHUP. Without it the API serves "
                  "loopback only");
  cmd->add_option("--settings", args->settings,
                  "the deployment guide's settings.json: its dualpath block (enable, "
                  "rebalance_interval_ms) and health_check block");
  cmd->add_flag("--skip-doctor", args->skip_doctor,
                "start even when `dualpath doctor`'s checks find an error");
  cmd->add_option("--served-model-name", args->served_model_name,
                  "the model id clients send and /v1/models lists (default: the model preset)");
  cmd->add_option("--model", args->model,
                  "tiny or small (the built-in CPU models; default: the config's model.preset), "
                  "or DIR: a Hugging Face llama checkpoint (config.json, fp32/bf16/fp16 "
                  "*.safetensors, tokenizer.model) that the nodes run and the API tokenizes with "
                  "its SentencePiece model, in the Llama 2 chat layout; served as DIR's name");
  cmd->add_option("--max-concurrent", args->max_concurrent,
                  "requests in flight before the API answers 429 (default 128)");
  cmd->add_option("--max-model-len", args->max_model_len,
                  "prompt + output tokens one request may use (default 16384)");
  cmd->add_option("--request-timeout", args->request_timeout_s,
                  "seconds a request may take from its body to its answer's end; beyond, it gets "
                  "504 and its turn is cancelled (default 600; 0: none)");
  cmd->add_option("--max-connections", args->max_connections,
                  "open connections the API keeps; more are closed at accept (default 1024)");
  cmd->add_option("--ssl-certfile", args->ssl_certfile,
                  "serve HTTPS with this certificate chain (PEM; with --ssl-keyfile)");
  cmd->add_option("--ssl-keyfile", args->ssl_keyfile, "the private key (PEM) of --ssl-certfile");
  cmd->add_option("--tool-call-parser", args->tool_call_parser,
                  "hermes: replies with <tool_call>{json}</tool_call> blocks come back as OpenAI "
                  "tool_calls (finish_reason tool_calls), when the request has tools");
  cmd->add_flag("--external-nodes", args->external_nodes,
                "start no nodes: wait for nodes started by hand with `dualpath node`");
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("", "serve", setup);

}  // namespace
}  // namespace dualpath::app
