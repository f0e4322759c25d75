// dualpath bench transport: put/get/AM bandwidth through the traffic manager next to ucx_perftest
// on the same transport, operation and size, plus the model/KV isolation experiment (issue 4).
// The logic lives in bench/transport_bench.{h,cc}; docs/transport.md explains the figures.

#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "common/config.h"
#include "transport/peer_process.h"
#include "bench/transport_bench.h"

namespace dualpath::app {
namespace {

using transport::PeerOptions;
using transport::TransportBenchOptions;

// "64K", "4M", "16MiB", "65536" -> bytes (the config's size format, common/config.h).
Result<uint64_t> parse_size(const std::string& text) {
  DP_ASSIGN_OR_RETURN(int64_t bytes, parse_size_bytes(text));
  return static_cast<uint64_t>(bytes);
}

void setup(CLI::App& parent, int& exit_code) {
  auto opt = std::make_shared<TransportBenchOptions>();
  auto peer = std::make_shared<PeerOptions>();
  auto json_path = std::make_shared<std::string>();
  auto sizes = std::make_shared<std::vector<std::string>>();
  auto bytes_per_case = std::make_shared<std::string>("auto");
  auto no_perftest = std::make_shared<bool>(false);
  auto no_isolation = std::make_shared<bool>(false);
  auto no_perftest_err = std::make_shared<bool>(false);
  auto peer_devices = std::make_shared<std::string>("-");
  CLI::App* cmd = parent.add_subcommand(
      "transport",
      "UCX transport: put, get and active-message bandwidth through the traffic manager, with\n"
      "ucx_perftest (ucp_put_bw, ucp_get, ucp_am_bw) on the same transport, operation and size\n"
      "in the same run, and the isolation experiment: model-class message round trips alone and\n"
      "under a saturating KV-class stream. A peer process is started for each transport.\n"
      "Bandwidth in Gb/s (1e9 bits/s), the median of --repeats runs of both tools, interleaved.\n"
      "Our side runs twice: 'polled' (progress threads poll, as ucx_perftest's busy-poll: the\n"
      "ratio column) and 'event' (threads sleep on the UCX event fd: the default on shared\n"
      "cores). The reference is ucx_perftest in our endpoints' mode: -e (peer error handling)\n"
      "on tcp, where the failure model needs it; plain perftest is printed beside it.\n"
      "Example: dualpath bench transport --json transport.json");
  cmd->add_option("--json", *json_path,
                  "Write the results here as JSON (`cases` array and `isolation` object)");
  cmd->add_option("--transports", opt->transports, "sm, tcp or both (default both)")
      ->delimiter(',');
  cmd->add_option("--ops", opt->ops, "put, get, am (default all three)")->delimiter(',');
  cmd->add_option("--sizes", *sizes, "Message sizes (default 64K,256K,1M,4M,16M)")->delimiter(',');
  cmd->add_option(
      "--bytes-per-case", *bytes_per_case,
      "Bytes moved per measurement, iterations = bytes / size within [8, 16384] (default "
      "auto: 1G on sm, 128M on tcp, ~0.1 s each; shorter runs are mostly noise)");
  cmd->add_option("--repeats", opt->repeats, "Runs per tool and case, interleaved (default 5)");
  cmd->add_option("--statistic", opt->statistic,
                  "Which run of each tool counts: median (default) or best (the fastest: one "
                  "quiet window then decides a cell)")
      ->check(CLI::IsMember({"median", "best"}));
  cmd->add_option("--perftest", opt->perftest_program, "The ucx_perftest binary");
  cmd->add_flag("--no-perftest", *no_perftest, "Skip ucx_perftest (ratios are then 0)");
  cmd->add_flag("--no-perftest-error-handling", *no_perftest_err,
                "Skip the second ucx_perftest run with -e (peer error handling, as our tcp "
                "endpoints)");
  cmd->add_option("--isolation-transports", opt->isolation_transports,
                  "Transports for the isolation experiment (default sm,tcp)")
      ->delimiter(',');
  cmd->add_option("--isolation-probes", opt->isolation_probes,
                  "Model-class round trips per phase (default 2000)");
  cmd->add_flag("--no-isolation", *no_isolation, "Skip the isolation experiment");
  cmd->add_flag(
      "--no-isolation-control", [opt](int64_t) { opt->isolation_control = false; },
      "Skip the isolation control (probes beside a plain copy loop, no UCX)");
  cmd->add_option("--chunk-bytes", opt->traffic.chunk_bytes,
                  "Traffic manager: largest piece handed to UCX (default 1048576)");
  cmd->add_option("--max-inflight-bytes", opt->traffic.max_inflight_bytes,
                  "Traffic manager: bytes in flight (default 4194304)");
  cmd->add_option("--modes", opt->modes,
                  "Our progress modes: polled (threads poll --polled-us before sleeping, as "
                  "ucx_perftest busy-polls: the like-for-like comparison, dualpath_gbps) and/or "
                  "event (threads sleep on the UCX event fd, the default on shared cores: "
                  "dualpath_event_gbps); default both")
      ->delimiter(',');
  cmd->add_option("--polled-us", opt->polled_us,
                  "Polled mode: how long a progress thread polls after its last event (default "
                  "20000; the bench waits 1.5x as long before measuring anything else)");
  cmd->add_option("--poll-us", opt->worker_poll_us,
                  "Event mode: progress threads (ours and the peer's) poll this long after their "
                  "last event before sleeping (default 0)");
  cmd->add_option("--poll-in-flight-us", opt->worker_poll_in_flight_us,
                  "Event mode: progress threads poll this long after their last event while "
                  "transfers are in flight (default -1: the worker default, 200 on tcp, 0 on sm)");
  cmd->add_option("--am-batch", opt->am_batch,
                  "Active messages per traffic-manager submission (default 0: all of a "
                  "measurement's messages in one, as a put's requests are; 1: one per message)");
  // The peer process: this same binary, started by the benchmark with these hidden options.
  cmd->add_option("--peer-port", peer->oob_port)->group("");
  cmd->add_option("--peer-tls", peer->transports)->group("");
  cmd->add_option("--peer-devices", *peer_devices)->group("");
  cmd->add_option("--peer-region-bytes", peer->region_bytes)->group("");
  cmd->add_option("--peer-name", peer->name)->group("");
  cmd->add_option("--peer-poll-us", peer->poll_us)->group("");
  cmd->add_option("--peer-busy-us", peer->poll_in_flight_us)->group("");
  cmd->callback([=, &exit_code] {
    if (Status st = check_output_file_if_given("--json", *json_path); !st.is_ok()) {
      exit_code = usage_error(st.message());
      return;
    }
    if (peer->oob_port != 0) {
      peer->net_devices = *peer_devices == "-" ? "" : *peer_devices;
      exit_code = transport::run_transport_peer(*peer);
      return;
    }
    if (!sizes->empty()) {
      opt->sizes.clear();
      for (const auto& s : *sizes) {
        auto bytes = parse_size(s);
        if (!bytes.is_ok()) {
          exit_code = usage_error(bytes.status().message());
          return;
        }
        opt->sizes.push_back(*bytes);
      }
    }
    if (*bytes_per_case != "auto") {
      auto total = parse_size(*bytes_per_case);
      if (!total.is_ok()) {
        exit_code = usage_error(total.status().message());
        return;
      }
      opt->bytes_per_case = *total;
    }
    opt->run_perftest = !*no_perftest;
    opt->perftest_error_handling = !*no_perftest_err;
    if (*no_isolation) opt->isolation_transports.clear();
    opt->peer_program = "/proc/self/exe";
    opt->peer_args = {"bench", "transport"};
    auto report = transport::run_transport_bench(
        *opt, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
    if (!report.is_ok() && report.status().is_invalid_argument()) {
      exit_code = usage_error(report.status().message());
      return;
    }
    if (!report.is_ok()) {
      usage_error("bench transport: " + report.status().to_string());
      exit_code = 1;
      return;
    }
    std::fputs(transport::format_transport_report(*report).c_str(), stdout);
    if (!json_path->empty()) {
      Status st = write_text_file(*json_path, transport::transport_report_json(*report).dump(2));
      if (!st.is_ok()) {
        usage_error("bench transport: " + st.to_string());
        exit_code = 1;
        return;
      }
    }
    exit_code = 0;
  });
}

DP_REGISTER_COMMAND("bench", "transport", setup);

}  // namespace
}  // namespace dualpath::app
