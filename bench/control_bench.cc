#include "bench/control_bench.h"

#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench/fake_nodes.h"
#include "bench/free_port.h"
#include "bench/http_stream.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/subprocess.h"

namespace dualpath::bench {

using Json = nlohmann::json;

namespace {

// CPU seconds (user + system) of process `pid` so far, from /proc/PID/stat: the accounting
// getrusage reports for a process; -1 when it is gone.
double process_cpu_s(pid_t pid) {
  std::ifstream f(fmt::format("/proc/{}/stat", pid));
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = all.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(all.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  // Fields 3..13 after the command, then utime (14) and stime (15).
  for (int i = 3; i <= 13 && rest >> field; ++i) {
  }
  rest >> utime >> stime;
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double self_cpu_s() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// One request as the client saw it.
struct Sample {
  bool ok = false;
  std::string error;
  int64_t send_ns = 0, done_ns = 0;
  std::vector<std::pair<int64_t, int64_t>> chunks;  // (when, tokens) of each text chunk
};

// Reads a completion stream's events: the 'x' tokens of each chunk's text, [DONE], errors.
class StreamReader {
 public:
  StreamReader(Sample& s, const dualpath::Clock& clock) : s_(s), clock_(clock) {}
  void feed(const char* data, size_t n) {
    buf_.append(data, n);
    for (size_t end; (end = buf_.find("\n\n")) != std::string::npos;) {
      event(std::string_view(buf_).substr(0, end));
      buf_.erase(0, end + 2);
    }
  }
  bool done() const { return done_; }

 private:
  void event(std::string_view e) {
    if (e.rfind("data: ", 0) != 0) return;
    e.remove_prefix(6);
    if (e == "[DONE]") {
      done_ = true;
      return;
    }
    if (e.find("\"error\"") != std::string_view::npos) {
      if (s_.error.empty()) s_.error = std::string(e.substr(0, 200));
      return;
    }
    static constexpr std::string_view kText = "\"text\":\"";
    const size_t at = e.find(kText);
    if (at == std::string_view::npos) return;
    int64_t n = 0;
    for (size_t i = at + kText.size(); i < e.size() && e[i] != '"'; ++i) n += e[i] == 'x' ? 1 : 0;
    if (n > 0) s_.chunks.emplace_back(clock_.now().count(), n);
  }
  Sample& s_;
  const dualpath::Clock& clock_;
  std::string buf_;
  bool done_ = false;
};

struct Cluster {
  Subprocess serve;
  std::unique_ptr<FakeNodes> nodes;
  int api_port = 0;
  std::string log_path;
};

std::string cluster_toml(const ControlBenchOptions& o, const std::string& data_dir) {
  return fmt::format(
      "# bench control: the scheduler over fake nodes (generated)\n"
      "[model]\npreset = \"ds660b\"\n\n"
      "[hardware]\npreset = \"h800\"\nhbm_gb = 141\n\n"
      "[cluster]\nprefill_nodes = {}\ndecode_nodes = {}\npe_ep_nodes = 1\nde_ep_nodes = {}\n\n"
      "[scheduler]\nmode = \"full\"\nreport_interval_ms = {}\nlease_ttl_ms = {}\n{}\n"
      "[store]\nblock_tokens = 64\ndata_paths = [\"{}\"]\n\n"
      "[live]\ncompute = \"modeled\"\n",
      o.prefill_nodes, o.decode_nodes, std::min(4, o.decode_nodes), o.report_interval_ms,
      std::max(2000, 20 * o.report_interval_ms),
      o.fetch_interval_s > 0 ? fmt::format("fetch_interval_ms = {}\n", o.fetch_interval_s * 1e3) : "",
      data_dir);
}

Result<Cluster> start_cluster(const ControlBenchOptions& o, const std::string& dir,
                              const std::function<void(const std::string&)>& progress) {
  const std::string data_dir = dir + "/store";
  std::filesystem::create_directories(data_dir);
  const std::string config = dir + "/cluster.toml";
  {
    std::ofstream f(config);
    f << cluster_toml(o, data_dir);
    if (!f) return Status::io_error(fmt::format("bench control: cannot write {}", config));
  }
  Cluster c;
  DP_ASSIGN_OR_RETURN(c.api_port, free_loopback_port());
  DP_ASSIGN_OR_RETURN(const int sched_port, free_loopback_port());
  c.log_path = dir + "/serve.log";
  SpawnOptions so;
  so.argv = {o.dualpath_program,
             "serve",
             "--config",
             config,
             "--external-nodes",
             "--skip-doctor",
             "--port",
             std::to_string(c.api_port),
             "--scheduler-port",
             std::to_string(sched_port),
             "--max-concurrent",
             std::to_string(std::max(128, 4 * o.clients)),
             "--max-connections",
             std::to_string(std::max(1024, 4 * o.clients)),
             "--request-timeout",
             "120"};
  so.stdout_path = c.log_path;
  so.stderr_to_stdout = true;
  so.die_with_parent = true;
  DP_ASSIGN_OR_RETURN(c.serve, Subprocess::spawn(so));
  dualpath::Clock& clock = real_clock();
  auto log_tail = [&] {
    std::ifstream log(c.log_path);
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    if (text.size() > 600) text = "..." + text.substr(text.size() - 600);
    return text;
  };
  // The scheduler's port first: a serve that refuses its config exits, and says why.
  for (const Duration deadline = clock.now() + std::chrono::seconds(120);;) {
    if (!c.serve.running()) {
      return Status::unavailable(
          fmt::format("bench control: `dualpath serve` exited: {}", log_tail()));
    }
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(sched_port));
    const bool up = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    if (fd >= 0) ::close(fd);
    if (up) break;
    if (clock.now() > deadline) {
      return Status::unavailable(fmt::format(
          "bench control: the scheduler's port {} did not open in 120 s: {}", sched_port, log_tail()));
    }
    clock.sleep_for(std::chrono::milliseconds(50));
  }
  if (progress) progress(fmt::format("serve started (pid {}); registering {}P{}D fake nodes",
                                     c.serve.pid(), o.prefill_nodes, o.decode_nodes));
  FakeNodesOptions fo;
  fo.scheduler = fmt::format("127.0.0.1:{}", sched_port);
  fo.prefill_nodes = o.prefill_nodes;
  fo.decode_nodes = o.decode_nodes;
  fo.token_rate = o.token_rate;
  fo.register_pause = o.register_pause;
  DP_ASSIGN_OR_RETURN(c.nodes, FakeNodes::start(fo));
  // Ready: the serve process prints a line with "ready" once every node joined.
  const Duration deadline = clock.now() + std::chrono::seconds(120);
  for (;;) {
    std::ifstream log(c.log_path);
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    if (text.find("ready") != std::string::npos) break;
    if (!c.serve.running() || clock.now() > deadline) {
      return Status::unavailable(fmt::format(
          "bench control: `dualpath serve` did not get ready ({}): {}",
          c.serve.running() ? "120 s passed" : "it exited", log_tail()));
    }
    clock.sleep_for(std::chrono::milliseconds(50));
  }
  return c;
}

// One loaded phase: `offered` turns at o.rate through the API, decodes of `tokens` tokens.
ControlPhase run_phase(const ControlBenchOptions& o, Cluster& c, const std::string& name,
                       int64_t tokens) {
  dualpath::Clock& clock = real_clock();
  ControlPhase ph;
  ph.name = name;
  ph.tokens_per_turn = tokens;
  ph.offered = std::max<int64_t>(1, static_cast<int64_t>(o.rate * o.duration_s));
  std::vector<Sample> samples(static_cast<size_t>(ph.offered));
  std::atomic<int64_t> next{0}, late{0};
  std::string pad(static_cast<size_t>(std::max<int64_t>(0, o.prompt_bytes - 16)), 'a');
  for (size_t i = 0; i < pad.size(); i += 7) pad[i] = ' ';
  const double cpu0 = process_cpu_s(c.serve.pid());
  const double self0 = self_cpu_s();
  const Duration t0 = clock.now() + std::chrono::milliseconds(20);
  auto client = [&] {
    httplib::Client cli("127.0.0.1", c.api_port);
    cli.set_keep_alive(true);
    // As curl and the OpenAI SDKs do: without it a request's body waits for the server's delayed
    // ACK of its headers (Nagle), ~40 ms, at any rate that keeps the connection warm.
    cli.set_tcp_nodelay(true);
    cli.set_read_timeout(120, 0);
    for (;;) {
      const int64_t k = next.fetch_add(1, std::memory_order_relaxed);
      if (k >= ph.offered) return;
      const Duration due = t0 + std::chrono::duration_cast<Duration>(
                                    std::chrono::duration<double>(static_cast<double>(k) / o.rate));
      const Duration now = clock.now();
      if (now < due) {
        clock.sleep_until(due);
      } else if (now - due > std::chrono::milliseconds(5)) {
        late.fetch_add(1, std::memory_order_relaxed);
      }
      Sample& s = samples[static_cast<size_t>(k)];
      const Json body = {{"prompt", fake_request_marker(k) + pad},
                         {"max_tokens", tokens},
                         {"temperature", 0},
                         {"stream", true}};
      StreamReader reader(s, clock);
      httplib::Response res;
      httplib::Error err = httplib::Error::Success;
      s.send_ns = clock.now().count();
      const bool sent = post_streamed(
          cli, "/v1/completions", body.dump(),
          [&](const char* data, size_t n) { reader.feed(data, n); }, res, err);
      s.done_ns = clock.now().count();
      if (!sent) {
        s.error = fmt::format("HTTP: {}", httplib::to_string(err));
      } else if (res.status != 200) {
        s.error = fmt::format("HTTP {}", res.status);
      } else if (s.error.empty() && !reader.done()) {
        s.error = "the stream ended without [DONE]";
      }
      s.ok = s.error.empty();
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < std::max(1, o.clients); ++i) threads.emplace_back(client);
  for (auto& t : threads) t.join();
  const double cpu1 = process_cpu_s(c.serve.pid());
  ph.scheduler_cpu_s = cpu1 - cpu0;
  ph.bench_cpu_s = self_cpu_s() - self0;
  ph.late = late.load();

  const std::vector<FakeRequestTimes> times = c.nodes->take_times(samples.size());
  std::vector<double> placement, delivery, e2e;
  int64_t first_send = 0, last_done = 0;
  for (size_t k = 0; k < samples.size(); ++k) {
    const Sample& s = samples[k];
    if (first_send == 0 || s.send_ns < first_send) first_send = s.send_ns;
    last_done = std::max(last_done, s.done_ns);
    int64_t got = 0;
    for (const auto& [when, n] : s.chunks) got += n;
    if (s.ok && got != tokens) {
      ++ph.errors;
      if (ph.first_error.empty()) {
        ph.first_error = fmt::format("request {}: {} tokens streamed, {} asked", k, got, tokens);
      }
      continue;
    }
    if (!s.ok) {
      ++ph.errors;
      if (ph.first_error.empty()) ph.first_error = fmt::format("request {}: {}", k, s.error);
      continue;
    }
    ++ph.completed;
    ph.tokens += got;
    e2e.push_back(static_cast<double>(s.done_ns - s.send_ns) / 1e6);
    const FakeRequestTimes& t = times[k];
    if (t.prefill_ns > 0) placement.push_back(static_cast<double>(t.prefill_ns - s.send_ns) / 1e6);
    size_t i = 0;
    for (const auto& [when, n] : s.chunks) {
      for (int64_t j = 0; j < n; ++j, ++i) {
        if (i < t.token_sent_ns.size()) {
          delivery.push_back(static_cast<double>(when - t.token_sent_ns[i]) / 1e6);
        }
      }
    }
  }
  ph.wall_s = static_cast<double>(last_done - first_send) / 1e9;
  ph.turns_per_s = ph.wall_s > 0 ? static_cast<double>(ph.completed) / ph.wall_s : 0;
  ph.placement_ms = summarize(std::move(placement));
  ph.token_delivery_ms = summarize(std::move(delivery));
  ph.e2e_ms = summarize(std::move(e2e));
  return ph;
}

Json phase_json(const ControlPhase& p) {
  auto stats = [](const LatencyStats& s) {
    return Json{{"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}, {"mean", s.mean},
                {"max", s.max}, {"count", s.count}};
  };
  return {{"name", p.name},
          {"tokens_per_turn", p.tokens_per_turn},
          {"offered", p.offered},
          {"completed", p.completed},
          {"errors", p.errors},
          {"late_arrivals", p.late},
          {"wall_s", p.wall_s},
          {"turns_per_s", p.turns_per_s},
          {"tokens", p.tokens},
          {"placement_ms", stats(p.placement_ms)},
          {"token_delivery_ms", stats(p.token_delivery_ms)},
          {"e2e_ms", stats(p.e2e_ms)},
          {"scheduler_cpu_s", p.scheduler_cpu_s},
          {"bench_cpu_s", p.bench_cpu_s},
          {"first_error", p.first_error}};
}

}  // namespace

Json ControlBenchResult::to_json() const {
  const auto& o = options;
  Json j = {{"nodes", fmt::format("{}P{}D", o.prefill_nodes, o.decode_nodes)},
            {"rate", o.rate},
            {"tokens", o.tokens},
            {"token_rate", o.token_rate},
            {"duration_s", o.duration_s},
            {"clients", o.clients},
            {"prompt_bytes", o.prompt_bytes},
            {"report_interval_ms", o.report_interval_ms},
            {"turns_per_s", main.turns_per_s},
            {"errors", main.errors + (has_one_token ? one_token.errors : 0)},
            {"placement_ms", {{"p50", main.placement_ms.p50}, {"p99", main.placement_ms.p99}}},
            {"token_delivery_ms",
             {{"p50", main.token_delivery_ms.p50}, {"p99", main.token_delivery_ms.p99}}},
            {"scheduler_cpu_us_per_turn", scheduler_cpu_us_per_turn},
            {"scheduler_cpu_us_per_token", scheduler_cpu_us_per_token},
            {"scheduler_cpu_us_per_turn_all_in", scheduler_cpu_us_per_turn_all_in},
            {"scheduler_cpu_us_per_report", scheduler_cpu_us_per_report},
            {"api_cpu_us_per_turn", 0.0},
            {"api_cpu_us_per_token", 0.0},
            {"api_in_scheduler_process", true},
            {"idle", {{"wall_s", idle_wall_s},
                      {"scheduler_cpu_s", idle_scheduler_cpu_s},
                      {"reports", idle_reports}}},
            {"phases", Json::array({phase_json(main)})}};
  if (has_one_token) j["phases"].push_back(phase_json(one_token));
  return j;
}

Result<ControlBenchResult> run_control_bench(const ControlBenchOptions& options,
                                             const std::function<void(const std::string&)>& progress) {
  ControlBenchOptions o = options;
  if (o.rate <= 0) return Status::invalid_argument("--rate must be above 0 turns per second");
  if (o.tokens < 1) return Status::invalid_argument("--tokens must be at least 1");
  if (o.duration_s <= 0) return Status::invalid_argument("--duration must be above 0 seconds");
  std::string dir = o.work_dir;
  bool remove_dir = false;
  if (dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dp-bench-control-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return Status::io_error("bench control: cannot make a temporary directory");
    }
    dir = tmpl;
    remove_dir = true;
  }
  std::filesystem::create_directories(dir);
  ControlBenchResult r;
  r.options = o;
  {
    DP_ASSIGN_OR_RETURN(Cluster c, start_cluster(o, dir, progress));
    dualpath::Clock& clock = real_clock();
    // Idle: the nodes report, nothing else.
    if (progress) progress(fmt::format("idle phase: {:.0f} s of load reports", o.idle_s));
    const auto reports0 = c.nodes->counts().reports;
    const double cpu0 = process_cpu_s(c.serve.pid());
    const Duration i0 = clock.now();
    clock.sleep_for(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(o.idle_s)));
    r.idle_wall_s = to_seconds(clock.now() - i0);
    r.idle_scheduler_cpu_s = process_cpu_s(c.serve.pid()) - cpu0;
    r.idle_reports = c.nodes->counts().reports - reports0;
    if (r.idle_reports > 0) {
      r.scheduler_cpu_us_per_report = r.idle_scheduler_cpu_s * 1e6 / static_cast<double>(r.idle_reports);
    }
    if (progress) {
      progress(fmt::format("main phase: {:.0f} turns/s for {:.0f} s, {} tokens each", o.rate,
                           o.duration_s, o.tokens));
    }
    r.main = run_phase(o, c, "main", o.tokens);
    if (r.main.completed > 0) {
      r.scheduler_cpu_us_per_turn_all_in =
          r.main.scheduler_cpu_s * 1e6 / static_cast<double>(r.main.completed);
    }
    r.has_one_token = o.per_token_phase && o.tokens > 1;
    if (r.has_one_token) {
      if (progress) progress("one-token phase: the same turns, one token each");
      r.one_token = run_phase(o, c, "one_token", 1);
      if (r.one_token.completed > 0) {
        r.scheduler_cpu_us_per_turn =
            r.one_token.scheduler_cpu_s * 1e6 / static_cast<double>(r.one_token.completed);
      }
      const double per_turn_main = r.scheduler_cpu_us_per_turn_all_in;
      r.scheduler_cpu_us_per_token =
          std::max(0.0, (per_turn_main - r.scheduler_cpu_us_per_turn) /
                            static_cast<double>(o.tokens - 1));
    } else {
      r.scheduler_cpu_us_per_turn = r.scheduler_cpu_us_per_turn_all_in;
    }
    c.serve.stop(SIGTERM, std::chrono::seconds(10));
  }
  if (remove_dir) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return r;
}

std::string format_control_bench(const ControlBenchResult& r) {
  const auto& o = r.options;
  std::string out = fmt::format(
      "control plane, {}P{}D fake nodes, {:.0f} turns/s offered, {} tokens per decode{}\n",
      o.prefill_nodes, o.decode_nodes, o.rate, o.tokens,
      o.token_rate > 0 ? fmt::format(" at {:.0f}/s", o.token_rate) : "");
  out += fmt::format("{:<34}{:>14}{:>14}\n", "", "main", r.has_one_token ? "one token" : "");
  auto row = [&](const std::string& label, const std::function<std::string(const ControlPhase&)>& f) {
    out += fmt::format("{:<34}{:>14}{:>14}\n", label, f(r.main),
                       r.has_one_token ? f(r.one_token) : "");
  };
  row("turns offered / completed / errors", [](const ControlPhase& p) {
    return fmt::format("{}/{}/{}", p.offered, p.completed, p.errors);
  });
  row("turns/s sustained", [](const ControlPhase& p) { return fmt::format("{:.1f}", p.turns_per_s); });
  row("late arrivals (clients busy)", [](const ControlPhase& p) { return fmt::format("{}", p.late); });
  row("placement p50 / p99 (ms)", [](const ControlPhase& p) {
    return fmt::format("{:.2f}/{:.2f}", p.placement_ms.p50, p.placement_ms.p99);
  });
  row("token delivery p50 / p99 (ms)", [](const ControlPhase& p) {
    return fmt::format("{:.2f}/{:.2f}", p.token_delivery_ms.p50, p.token_delivery_ms.p99);
  });
  row("request e2e p50 / p99 (ms)", [](const ControlPhase& p) {
    return fmt::format("{:.1f}/{:.1f}", p.e2e_ms.p50, p.e2e_ms.p99);
  });
  row("scheduler CPU (s)", [](const ControlPhase& p) { return fmt::format("{:.2f}", p.scheduler_cpu_s); });
  row("bench CPU: client + fake nodes (s)",
      [](const ControlPhase& p) { return fmt::format("{:.2f}", p.bench_cpu_s); });
  out += fmt::format("scheduler CPU per turn        {:.0f} us (one-token turns, reports included)\n",
                     r.scheduler_cpu_us_per_turn);
  out += fmt::format("scheduler CPU per token       {:.2f} us ({:.0f} us per 1,000)\n",
                     r.scheduler_cpu_us_per_token, 1000 * r.scheduler_cpu_us_per_token);
  out += fmt::format("scheduler CPU per report      {:.1f} us ({} reports in {:.1f} s idle)\n",
                     r.scheduler_cpu_us_per_report, r.idle_reports, r.idle_wall_s);
  out += "API process                   none: the API lives in the scheduler's process\n";
  if (!r.main.first_error.empty()) out += "first error: " + r.main.first_error + "\n";
  return out;
}

}  // namespace dualpath::bench
