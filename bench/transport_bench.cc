#include "bench/transport_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>

#include "common/mutex.h"
#include "common/percentiles.h"
#include "transport/peer_process.h"
#include "bench/perftest_runner.h"

namespace dualpath::transport {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kSetupTimeout = std::chrono::seconds(30);
constexpr auto kCaseTimeout = std::chrono::seconds(300);

struct TransportSpec {
  std::string tls;
  std::string devices;
};

Result<TransportSpec> spec_for(const std::string& name) {
  if (name == "sm") return TransportSpec{"sm,self", ""};
  if (name == "tcp") return TransportSpec{"tcp,self", "lo"};
  return Status::invalid_argument(fmt::format("unknown transport '{}' (use sm or tcp)", name));
}

uint64_t bytes_per_case(const TransportBenchOptions& o, const std::string& transport) {
  if (o.bytes_per_case != 0) return o.bytes_per_case;
  return transport == "sm" ? kAutoBytesPerCaseSm : kAutoBytesPerCaseTcp;
}

double gbps(uint64_t bytes, Duration elapsed) {
  return bytes_per_s_to_gbps(static_cast<double>(bytes) / to_seconds(elapsed));
}

// Collects the peer's replies (kEchoReplyAm) and wakes whoever waits for a given sequence number.
class ReplyWaiter {
 public:
  void on_reply(const AmMessage& m) {
    // Header: byte 0 is the ack flag, bytes 1..8 the sequence number (seq_header).
    uint64_t seq = 0;
    if (m.header.size() >= 1 + sizeof seq) std::memcpy(&seq, m.header.data() + 1, sizeof seq);
    MutexLock lock(mu_);
    last_seq_ = std::max(last_seq_, seq);
    cv_.notify_all();
  }
  Status wait_for(uint64_t seq, Duration timeout) {
    MutexLock lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (last_seq_ < seq) {
      if (!cv_.wait_until(lock, deadline) && last_seq_ < seq) {
        return Status::timed_out(fmt::format("no reply {} from the peer within the deadline", seq));
      }
    }
    return Status::ok();
  }

 private:
  Mutex mu_;
  CondVar cv_;
  uint64_t last_seq_ DP_GUARDED_BY(mu_) = 0;
};

std::vector<std::byte> seq_header(uint64_t seq, bool ack) {
  std::vector<std::byte> h(sizeof seq + 1);
  std::memcpy(h.data() + 1, &seq, sizeof seq);
  h[0] = ack ? std::byte{1} : std::byte{0};
  return h;
}

// One transport's set-up: context, worker, traffic manager, the peer and our buffer.
class Session {
 public:
  // `mode`: "polled" (every progress thread polls options.polled_us before sleeping) or
  // "event" (options.worker_poll_*).
  static Result<std::unique_ptr<Session>> open(const std::string& name,
                                               const std::string& mode,
                                               const TransportBenchOptions& options,
                                               uint64_t buffer_bytes) {
    auto s = std::unique_ptr<Session>(new Session());
    const bool polled = mode == "polled";
    const uint64_t poll_us = polled ? options.polled_us : options.worker_poll_us;
    const int64_t poll_in_flight_us = polled ? -1 : options.worker_poll_in_flight_us;
    s->am_batch_ = options.am_batch;
    DP_ASSIGN_OR_RETURN(s->spec_, spec_for(name));
    ContextOptions co;
    co.transports = s->spec_.tls;
    co.net_devices = s->spec_.devices;
    DP_ASSIGN_OR_RETURN(s->context_, Context::create(co));
    WorkerOptions model_options{"bench", kCaseTimeout};
    model_options.poll_before_sleep = std::chrono::microseconds(poll_us);
    if (poll_in_flight_us >= 0) {
      model_options.poll_while_in_flight = std::chrono::microseconds(poll_in_flight_us);
    }
    DP_ASSIGN_OR_RETURN(s->worker_, Worker::create(*s->context_, model_options));
    // The KV class's own worker (progress thread): the per-class lane of docs/transport.md.
    WorkerOptions kv_options{"bench-kv", kCaseTimeout};
    kv_options.nice = kKvWorkerNice;
    kv_options.poll_before_sleep = model_options.poll_before_sleep;
    kv_options.poll_while_in_flight = model_options.poll_while_in_flight;
    DP_ASSIGN_OR_RETURN(s->kv_worker_, Worker::create(*s->context_, kv_options));
    DP_ASSIGN_OR_RETURN(s->tm_, TrafficManager::create(*s->worker_, options.traffic));
    // UCX-allocated like ucx_perftest's buffers, so both tools use the same kind of memory.
    DP_ASSIGN_OR_RETURN(s->region_, s->worker_->allocate_memory(buffer_bytes));
    s->buffer_ = s->region_->span();
    std::memset(s->buffer_.data(), 0x3c, s->buffer_.size());
    PeerOptions po;
    po.transports = s->spec_.tls;
    po.net_devices = s->spec_.devices;
    po.region_bytes = buffer_bytes;
    po.name = "bench-peer-" + name;
    po.poll_us = poll_us;
    po.poll_in_flight_us = poll_in_flight_us;
    DP_ASSIGN_OR_RETURN(s->peer_,
                        PeerProcess::spawn(*s->worker_, options.peer_program, options.peer_args, po,
                                           kSetupTimeout, s->kv_worker_.get()));
    ReplyWaiter* replies = &s->replies_;
    DP_RETURN_IF_ERROR(s->worker_->set_am_handler(
        kEchoReplyAm, [replies](const AmMessage& m) { replies->on_reply(m); }));
    return s;
  }

  ~Session() {
    tm_.reset();
    if (peer_) peer_->disconnect();
    region_.reset();
    peer_.reset();
    kv_worker_.reset();
    worker_.reset();
  }

  const TransportSpec& spec() const { return spec_; }
  // Whether our endpoints use UCX peer error handling on this transport.
  bool peer_error_handling() const { return context_->peer_failure_detection(); }

  // Moves `iterations` messages of `size` bytes with `op`; returns the elapsed time.
  Result<Duration> measure(const std::string& op, uint64_t size, uint64_t iterations) {
    std::span<std::byte> local = std::span(buffer_).first(size);
    OpOptions opts{kCaseTimeout, {}};
    auto t0 = Clock::now();
    if (op == "put" || op == "get") {
      // Like ucx_perftest: every message uses the same local buffer and remote offset.
      std::vector<RmaRequest> reqs(iterations, RmaRequest{local, &peer_->region(), 0});
      auto transfer = op == "put" ? tm_->put(TrafficClass::kKv, peer_->endpoint(), reqs, opts)
                                  : tm_->get(TrafficClass::kKv, peer_->endpoint(), reqs, opts);
      if (!transfer.is_ok()) return transfer.status();
      DP_RETURN_IF_ERROR(transfer->wait());
      return Clock::now() - t0;
    }
    // Active messages: submissions of `am_batch` messages (all of them by default, as a put of
    // many requests is one submission), each message its own UCX send; the last asks the peer
    // for an ack, so the time covers delivery.
    uint64_t seq = ++seq_;
    const std::vector<std::byte> plain = seq_header(0, false), last = seq_header(seq, true);
    const uint64_t per = am_batch_ == 0 ? iterations : std::min(am_batch_, iterations);
    std::vector<AmRequest> messages;
    std::deque<Operation> ops;
    for (uint64_t i = 0; i < iterations; i += per) {
      uint64_t n = std::min(per, iterations - i);
      messages.assign(n, AmRequest{plain, local});
      if (i + n == iterations) messages.back().header = last;
      auto sent = tm_->send_am(TrafficClass::kKv, peer_->endpoint(), kSinkAm, messages, opts);
      if (!sent.is_ok()) return sent.status();
      ops.push_back(std::move(sent).value());
      // Bound the unfinished submissions, as a windowed sender would.
      while (ops.size() > 64) {
        DP_RETURN_IF_ERROR(ops.front().wait());
        ops.pop_front();
      }
    }
    for (auto& o : ops) DP_RETURN_IF_ERROR(o.wait());
    DP_RETURN_IF_ERROR(replies_.wait_for(seq, kCaseTimeout));
    return Clock::now() - t0;
  }

  // Round trip of one active message in class `cls` (echoed by the peer's model worker).
  Result<double> probe_us(TrafficClass cls = TrafficClass::kModel) {
    uint64_t seq = ++seq_;
    auto header = seq_header(seq, false);
    auto t0 = Clock::now();
    auto sent = tm_->send_am(cls, peer_->endpoint(), kEchoAm, header, {},
                             OpOptions{std::chrono::seconds(10), {}});
    if (!sent.is_ok()) return sent.status();
    DP_RETURN_IF_ERROR(replies_.wait_for(seq, std::chrono::seconds(10)));
    auto t1 = Clock::now();
    DP_RETURN_IF_ERROR(sent->wait());
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  }

  // Keeps `depth` KV puts of `message_bytes` in flight until `stop`; returns bytes moved.
  Result<uint64_t> run_kv_stream(uint64_t message_bytes, int depth, const std::atomic<bool>& stop) {
    std::span<std::byte> local = std::span(buffer_).first(message_bytes);
    RmaRequest req{local, &peer_->kv_region(), 0};
    std::deque<Operation> inflight;
    uint64_t bytes = 0;
    while (!stop.load(std::memory_order_relaxed)) {  // relaxed: a stop flag, no data with it
      while (static_cast<int>(inflight.size()) < depth) {
        auto put = tm_->put(TrafficClass::kKv, peer_->kv_endpoint(), std::span(&req, 1),
                            OpOptions{kCaseTimeout, {}});
        if (!put.is_ok()) return put.status();
        inflight.push_back(std::move(put).value());
      }
      DP_RETURN_IF_ERROR(inflight.front().wait());
      inflight.pop_front();
      bytes += message_bytes;
    }
    for (auto& o : inflight) {
      DP_RETURN_IF_ERROR(o.wait());
      bytes += message_bytes;
    }
    return bytes;
  }

 private:
  Session() = default;

  TransportSpec spec_;
  std::unique_ptr<Context> context_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<Worker> kv_worker_;
  std::unique_ptr<TrafficManager> tm_;
  std::unique_ptr<MemoryRegion> region_;
  std::span<std::byte> buffer_;
  std::unique_ptr<PeerProcess> peer_;
  ReplyWaiter replies_;
  uint64_t seq_ = 0;
  uint64_t am_batch_ = 0;
};

// One case: per repeat, our polled and event modes (where open) and ucx_perftest (plain, and
// with -e where our endpoints use peer error handling), interleaved; each tool's median run
// (or best, --statistic best) counts.
Result<BenchCase> run_case(Session* polled,
                           Session* event,
                           const TransportBenchOptions& options,
                           const std::string& transport,
                           const std::string& op,
                           uint64_t size) {
  BenchCase c;
  c.transport = transport;
  c.op = op;
  c.message_bytes = size;
  c.iterations = std::clamp<uint64_t>(bytes_per_case(options, transport) / size, 8, 16384);
  c.dualpath_mode = polled ? "polled" : "event";
  Session& any = polled ? *polled : *event;
  uint64_t warmup = std::max<uint64_t>(2, c.iterations / 10);
  // A polled session's threads keep polling polled_us after their last event: let them fall
  // asleep before anything else is measured, or they take the cores from it.
  auto quiesce = [&] {
    if (polled) std::this_thread::sleep_for(std::chrono::microseconds(options.polled_us) * 3 / 2);
  };
  static const std::map<std::string, std::string> kPerftestName = {
      {"put", "ucp_put_bw"}, {"get", "ucp_get"}, {"am", "ucp_am_bw"}};
  // Every run of each tool is kept; the reported figure is the median run (or the best with
  // --statistic best), each tool's runs interleaved with the other's.
  struct Runs {
    std::vector<std::pair<double, double>> v;  // (Gb/s, us per message)
    void report(bool best, double& gbps_out, double& us_out) {
      if (v.empty()) return;
      std::sort(v.begin(), v.end());
      const auto& r = best ? v.back() : v[v.size() / 2];
      gbps_out = r.first;
      us_out = r.second;
    }
  };
  Runs ours_polled, ours_event, perftest_plain, perftest_err;
  // Each run warms up first, as each ucx_perftest run does: the repeats are seconds apart (the
  // other tool runs in between), and what sat idle that long starts cold (sleeping progress
  // threads; over tcp, a connection under slow start after idle). Measured without it: tcp AM
  // 16 MiB, 8 messages per run, 0.85-0.91 x ucx_perftest -e; with it 0.96.
  auto run_ours = [&](Session* s, Runs& runs) -> Status {
    if (!s) return Status::ok();
    DP_RETURN_IF_ERROR(s->measure(op, size, warmup).status(), "warm-up");
    DP_ASSIGN_OR_RETURN(Duration elapsed, s->measure(op, size, c.iterations));
    runs.v.emplace_back(gbps(size * c.iterations, elapsed),
                        to_seconds(elapsed) * 1e6 / static_cast<double>(c.iterations));
    return Status::ok();
  };
  auto run_reference = [&](const PerftestRun& pr, Runs& runs) -> Status {
    DP_ASSIGN_OR_RETURN(PerftestResult pf, run_perftest(pr));
    runs.v.emplace_back(bytes_per_s_to_gbps(pf.bandwidth_bytes_per_s), pf.latency_us);
    return Status::ok();
  };
  for (int r = 0; r < std::max(1, options.repeats); ++r) {
    DP_RETURN_IF_ERROR(run_ours(polled, ours_polled));
    quiesce();
    DP_RETURN_IF_ERROR(run_ours(event, ours_event));
    if (!options.run_perftest) continue;
    PerftestRun pr;
    pr.perftest = options.perftest_program;
    pr.test = kPerftestName.at(op);
    pr.transports = any.spec().tls;
    pr.net_devices = any.spec().devices;
    pr.message_bytes = size;
    pr.iterations = c.iterations;
    pr.warmup_iterations = warmup;
    DP_RETURN_IF_ERROR(run_reference(pr, perftest_plain));
    if (!options.perftest_error_handling || !any.peer_error_handling()) continue;
    pr.peer_error_handling = true;
    DP_RETURN_IF_ERROR(run_reference(pr, perftest_err));
  }
  const bool best = options.statistic == "best";
  ours_polled.report(best, c.dualpath_gbps, c.dualpath_us_per_message);
  ours_event.report(best, c.dualpath_event_gbps, c.dualpath_event_us_per_message);
  perftest_plain.report(best, c.perftest_gbps, c.perftest_us_per_message);
  perftest_err.report(best, c.perftest_err_gbps, c.perftest_err_us_per_message);
  if (!polled) {
    c.dualpath_gbps = c.dualpath_event_gbps;
    c.dualpath_us_per_message = c.dualpath_event_us_per_message;
  }
  return c;
}

Result<IsolationResult> run_isolation(Session& session,
                                      const TransportBenchOptions& options,
                                      const std::string& transport,
                                      const std::string& mode) {
  IsolationResult r;
  r.transport = transport;
  r.mode = mode;
  r.probes = options.isolation_probes;
  auto probe_set = [&](int n,
                       TrafficClass cls = TrafficClass::kModel) -> Result<std::vector<double>> {
    std::vector<double> v;
    v.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      DP_ASSIGN_OR_RETURN(double us, session.probe_us(cls));
      v.push_back(us);
    }
    return v;
  };
  DP_RETURN_IF_ERROR(probe_set(100).status(), "probe warm-up");

  // Starts the KV stream on a feeder thread; stop() ends it and returns bytes and seconds.
  struct Stream {
    std::atomic<bool> stop{false};
    Result<uint64_t> bytes = uint64_t{0};
    Clock::time_point t0 = Clock::now();
    std::thread feeder;
  };
  auto start_stream = [&](Stream& st) {
    st.t0 = Clock::now();
    st.feeder = std::thread(
        [&] { st.bytes = session.run_kv_stream(options.isolation_kv_message_bytes, 4, st.stop); });
  };
  auto stop_stream = [&](Stream& st, uint64_t& bytes, double& seconds) -> Status {
    st.stop.store(true, std::memory_order_relaxed);  // relaxed: a stop flag, no data with it
    st.feeder.join();
    DP_RETURN_IF_ERROR(st.bytes.status(), "KV stream");
    bytes += *st.bytes;
    seconds += to_seconds(Clock::now() - st.t0);
    return Status::ok();
  };
  {
    Stream alone;
    uint64_t bytes = 0;
    double seconds = 0;
    start_stream(alone);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    DP_RETURN_IF_ERROR(stop_stream(alone, bytes, seconds));
    r.kv_gbps_alone = bytes_per_s_to_gbps(static_cast<double>(bytes) / seconds);
  }

  // Idle and loaded probes alternate in blocks, so that whatever else the machine runs (other
  // users' builds on a shared host) weighs on both phases alike.
  constexpr int kBlocks = 10;
  const int per_block = std::max(1, options.isolation_probes / kBlocks);
  r.probes = per_block * kBlocks;
  r.fifo_probes = std::max(2, per_block / 10) * kBlocks;
  std::vector<double> idle, loaded, as_kv, control;
  uint64_t load_bytes = 0;
  double load_seconds = 0;
  uint64_t copy_bytes = 0;
  double copy_seconds = 0;
  // The control: a plain copy loop at the KV lane's nice level in a thread of its own, no UCX
  // and no traffic manager; what a CPU busy copying (the emulated NIC) costs the model path.
  std::vector<std::byte> copy_a(options.isolation_kv_message_bytes, std::byte{1});
  std::vector<std::byte> copy_b(options.isolation_kv_message_bytes, std::byte{2});
  auto control_block = [&](int n) -> Result<std::vector<double>> {
    std::atomic<bool> stop{false};
    uint64_t copied = 0;
    auto t0 = Clock::now();
    std::thread copier([&] {
      // Best effort, like the KV worker's own nice level: copy either way.
      (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kKvWorkerNice);
      while (!stop.load(std::memory_order_relaxed)) {  // relaxed: a stop flag, no data with it
        std::memcpy(copy_b.data(), copy_a.data(), copy_a.size());
        std::swap(copy_a, copy_b);
        copied += copy_a.size();
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto v = probe_set(n);
    stop.store(true, std::memory_order_relaxed);
    copier.join();
    copy_bytes += copied;
    copy_seconds += to_seconds(Clock::now() - t0);
    return v;
  };
  for (int b = 0; b < kBlocks; ++b) {
    DP_ASSIGN_OR_RETURN(auto idle_block, probe_set(per_block));
    idle.insert(idle.end(), idle_block.begin(), idle_block.end());
    if (options.isolation_control) {
      DP_ASSIGN_OR_RETURN(auto control_probes, control_block(per_block));
      control.insert(control.end(), control_probes.begin(), control_probes.end());
    }
    Stream st;
    start_stream(st);
    // Let the stream fill the window before probing.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto loaded_block = probe_set(per_block);
    auto kv_block =
        loaded_block.is_ok() ? probe_set(r.fifo_probes / kBlocks, TrafficClass::kKv) : loaded_block;
    DP_RETURN_IF_ERROR(stop_stream(st, load_bytes, load_seconds));
    if (!loaded_block.is_ok()) return loaded_block.status();
    if (!kv_block.is_ok()) return kv_block.status();
    loaded.insert(loaded.end(), loaded_block->begin(), loaded_block->end());
    as_kv.insert(as_kv.end(), kv_block->begin(), kv_block->end());
  }
  r.kv_gbps_during_load = bytes_per_s_to_gbps(static_cast<double>(load_bytes) / load_seconds);
  r.idle_p50_us = percentile(idle, 0.50);
  r.idle_p99_us = percentile(idle, 0.99);
  r.loaded_p50_us = percentile(loaded, 0.50);
  r.loaded_p99_us = percentile(loaded, 0.99);
  r.loaded_as_kv_p50_us = percentile(as_kv, 0.50);
  r.loaded_as_kv_p99_us = percentile(as_kv, 0.99);
  if (!control.empty()) {
    r.control_p50_us = percentile(control, 0.50);
    r.control_p99_us = percentile(control, 0.99);
    r.control_copy_gbps = bytes_per_s_to_gbps(static_cast<double>(copy_bytes) / copy_seconds);
  }
  return r;
}

std::string size_text(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

std::string case_line(const BenchCase& c) {
  std::string line = fmt::format(
      "{:<4} {:<4} {:>8} {:>6} {:>10.2f} {:>10.2f} {:>6.2f} {:>10.2f} {:>6.2f} {:>9.1f} {:>9.1f} "
      "{:>9.1f}",
      c.transport, c.op, size_text(c.message_bytes), c.iterations, c.dualpath_gbps,
      c.reference_gbps(), c.ratio(), c.dualpath_event_gbps, c.event_ratio(),
      c.dualpath_us_per_message, c.dualpath_event_us_per_message, c.reference_us_per_message());
  if (c.perftest_err_gbps > 0) {
    line += fmt::format("   (reference perftest -e; plain perftest {:.2f} Gb/s, ratio {:.2f})",
                        c.perftest_gbps, c.plain_ratio());
  }
  return line;
}

std::string isolation_line(const IsolationResult& r) {
  std::string control;
  if (r.control_p99_us > 0) {
    control = fmt::format(
        " | control, a plain {:.0f} Gb/s copy loop at nice {} instead of the stream: p50={:.1f} "
        "us p99={:.1f} us (p99 x{:.2f})",
        r.control_copy_gbps, kKvWorkerNice, r.control_p50_us, r.control_p99_us,
        r.control_p99_ratio());
  }
  return fmt::format("isolation {:<4} {:<6} probes={} idle p50={:.1f} us p99={:.1f} us",
                     r.transport, r.mode, r.probes, r.idle_p50_us, r.idle_p99_us) +
         fmt::format(" | under KV load p50={:.1f} us p99={:.1f} us (p99 x{:.2f})", r.loaded_p50_us,
                     r.loaded_p99_us, r.p99_ratio()) +
         fmt::format(" | same probes sent as KV class: p50={:.1f} us p99={:.1f} us",
                     r.loaded_as_kv_p50_us, r.loaded_as_kv_p99_us) +
         fmt::format(" | KV stream {:.1f} Gb/s alone, {:.1f} Gb/s with probes", r.kv_gbps_alone,
                     r.kv_gbps_during_load) +
         control;
}

}  // namespace

Result<TransportBenchReport> run_transport_bench(
    const TransportBenchOptions& options, const std::function<void(const std::string&)>& progress) {
  if (options.peer_program.empty()) {
    return Status::invalid_argument("transport bench: no peer program to start");
  }
  if (options.sizes.empty()) return Status::invalid_argument("transport bench: no sizes");
  // Each size is one registered buffer on both sides (in /dev/shm for sm): bounded so a typo
  // cannot fill memory.
  constexpr uint64_t kMaxMessage = 1ull << 30;
  for (uint64_t size : options.sizes) {
    if (size == 0 || size > kMaxMessage) {
      return Status::invalid_argument(fmt::format(
          "--sizes: message size {} B is out of range; use 1 B to 1G (e.g. 64K,1M,16M)", size));
    }
  }
  if (options.bytes_per_case > (64ull << 30)) {
    return Status::invalid_argument(fmt::format(
        "--bytes-per-case {} B is more than 64G; use auto or e.g. 512M", options.bytes_per_case));
  }
  if (options.repeats < 1 || options.repeats > 1000) {
    return Status::invalid_argument(
        fmt::format("--repeats {}: use 1 to 1000 runs per tool and case", options.repeats));
  }
  if (options.isolation_probes < 1 || options.isolation_probes > 10'000'000) {
    return Status::invalid_argument(fmt::format(
        "--isolation-probes {}: use 1 to 10000000 round trips", options.isolation_probes));
  }
  if (options.traffic.chunk_bytes == 0 || options.traffic.max_inflight_bytes == 0) {
    return Status::invalid_argument(fmt::format(
        "--chunk-bytes {} / --max-inflight-bytes {}: both must be positive (defaults 1048576 "
        "and 4194304)",
        options.traffic.chunk_bytes, options.traffic.max_inflight_bytes));
  }
  for (const auto& op : options.ops) {
    if (op != "put" && op != "get" && op != "am") {
      return Status::invalid_argument(fmt::format("unknown op '{}' (use put, get or am)", op));
    }
  }
  TransportBenchReport report;
  report.options = options;
  uint64_t buffer_bytes =
      std::max<uint64_t>(*std::max_element(options.sizes.begin(), options.sizes.end()),
                         options.isolation_kv_message_bytes);
  std::vector<std::string> transports = options.transports;
  for (const auto& t : options.isolation_transports) {
    if (std::find(transports.begin(), transports.end(), t) == transports.end()) {
      transports.push_back(t);
    }
  }
  for (const auto& m : options.modes) {
    if (m != "polled" && m != "event") {
      return Status::invalid_argument(
          fmt::format("unknown mode '{}' (use polled, event or both)", m));
    }
  }
  if (options.modes.empty()) return Status::invalid_argument("transport bench: no modes");
  const bool want_polled =
      std::find(options.modes.begin(), options.modes.end(), "polled") != options.modes.end();
  const bool want_event =
      std::find(options.modes.begin(), options.modes.end(), "event") != options.modes.end();
  progress(
      "dualpath: our transport with its progress threads polling, as ucx_perftest's do "
      "(polled), and sleeping on the event fd (event, the default); reference: ucx_perftest "
      "in our endpoints' error-handling mode");
  progress(fmt::format("{:<4} {:<4} {:>8} {:>6} {:>10} {:>10} {:>6} {:>10} {:>6} {:>9} {:>9} {:>9}",
                       "tl", "op", "message", "iters", "dualpath", "reference", "ratio", "event",
                       "ratio", "us/msg", "event", "ref"));
  progress(fmt::format("{:<4} {:<4} {:>8} {:>6} {:>10} {:>10} {:>6} {:>10}", "", "", "", "", "Gb/s",
                       "Gb/s", "", "Gb/s"));
  for (const auto& transport : transports) {
    std::unique_ptr<Session> polled, event;
    if (want_polled) {
      DP_ASSIGN_OR_RETURN(polled, Session::open(transport, "polled", options, buffer_bytes));
    }
    if (want_event) {
      DP_ASSIGN_OR_RETURN(event, Session::open(transport, "event", options, buffer_bytes));
    }
    bool run_cases = std::find(options.transports.begin(), options.transports.end(), transport) !=
                     options.transports.end();
    if (run_cases) {
      for (const auto& op : options.ops) {
        for (uint64_t size : options.sizes) {
          auto c = run_case(polled.get(), event.get(), options, transport, op, size);
          if (!c.is_ok()) {
            return c.status().with_context(fmt::format("{} {} {} bytes", transport, op, size));
          }
          progress(case_line(*c));
          report.cases.push_back(*c);
        }
      }
    }
    if (std::find(options.isolation_transports.begin(), options.isolation_transports.end(),
                  transport) != options.isolation_transports.end()) {
      // The event mode first: the default, and what `isolation` in the JSON reports.
      for (auto [session, mode] :
           {std::pair{event.get(), "event"}, std::pair{polled.get(), "polled"}}) {
        if (!session) continue;
        auto r = run_isolation(*session, options, transport, mode);
        if (!r.is_ok()) return r.status().with_context("isolation over " + transport + " " + mode);
        progress(isolation_line(*r));
        report.isolation.push_back(*r);
      }
    }
  }
  return report;
}

std::string format_transport_report(const TransportBenchReport& report) {
  std::string out;
  for (const auto& c : report.cases) out += case_line(c) + "\n";
  for (const auto& r : report.isolation) out += isolation_line(r) + "\n";
  return out;
}

nlohmann::json transport_report_json(const TransportBenchReport& report) {
  nlohmann::json j;
  const auto& o = report.options;
  j["setup"] = {{"bytes_per_case", o.bytes_per_case},  // 0: per transport (bytes_per_case_*)
                {"bytes_per_case_sm", bytes_per_case(o, "sm")},
                {"bytes_per_case_tcp", bytes_per_case(o, "tcp")},
                {"repeats", o.repeats},
                {"statistic", o.statistic == "best"
                                  ? "best of repeats, dualpath and ucx_perftest interleaved"
                                  : "median of repeats, dualpath and ucx_perftest interleaved"},
                {"gbps_unit", "Gb/s (1e9 bits per second)"},
                {"chunk_bytes", o.traffic.chunk_bytes},
                {"max_inflight_bytes", o.traffic.max_inflight_bytes},
                {"model_reserve_bytes", o.traffic.model_reserve_bytes},
                {"max_batch_ops", o.traffic.max_batch_ops},
                {"modes", o.modes},
                {"polled_us", o.polled_us},
                {"worker_poll_us", o.worker_poll_us},
                {"worker_poll_in_flight_us", o.worker_poll_in_flight_us},
                {"am_batch", o.am_batch},
                {"isolation_kv_message_bytes", o.isolation_kv_message_bytes}};
  j["cases"] = nlohmann::json::array();
  for (const auto& c : report.cases) {
    j["cases"].push_back({{"transport", c.transport},
                          {"op", c.op},
                          {"message_bytes", c.message_bytes},
                          {"iterations", c.iterations},
                          {"dualpath_gbps", c.dualpath_gbps},
                          {"dualpath_mode", c.dualpath_mode},
                          {"perftest_gbps", c.perftest_gbps},
                          {"perftest_err_gbps", c.perftest_err_gbps},
                          {"reference", c.reference_name()},
                          {"reference_gbps", c.reference_gbps()},
                          {"ratio", c.ratio()},
                          {"plain_ratio", c.plain_ratio()},
                          {"dualpath_event_gbps", c.dualpath_event_gbps},
                          {"event_ratio", c.event_ratio()},
                          {"dualpath_us_per_message", c.dualpath_us_per_message},
                          {"dualpath_event_us_per_message", c.dualpath_event_us_per_message},
                          {"perftest_us_per_message", c.perftest_us_per_message},
                          {"perftest_err_us_per_message", c.perftest_err_us_per_message},
                          {"reference_us_per_message", c.reference_us_per_message()}});
  }
  auto iso = [](const IsolationResult& r) {
    return nlohmann::json{{"transport", r.transport},
                          {"mode", r.mode},
                          {"probes", r.probes},
                          {"idle_p50_us", r.idle_p50_us},
                          {"idle_p99_us", r.idle_p99_us},
                          {"loaded_p50_us", r.loaded_p50_us},
                          {"loaded_p99_us", r.loaded_p99_us},
                          {"p99_ratio", r.p99_ratio()},
                          {"loaded_as_kv_probes", r.fifo_probes},
                          {"loaded_as_kv_p50_us", r.loaded_as_kv_p50_us},
                          {"loaded_as_kv_p99_us", r.loaded_as_kv_p99_us},
                          {"kv_gbps_alone", r.kv_gbps_alone},
                          {"control_p50_us", r.control_p50_us},
                          {"control_p99_us", r.control_p99_us},
                          {"control_p99_ratio", r.control_p99_ratio()},
                          {"control_copy_gbps", r.control_copy_gbps},
                          {"kv_gbps_during_load", r.kv_gbps_during_load}};
  };
  j["isolation"] = report.isolation.empty() ? nlohmann::json::object() : iso(report.isolation[0]);
  j["isolation_by_transport"] = nlohmann::json::array();
  for (const auto& r : report.isolation) j["isolation_by_transport"].push_back(iso(r));
  return j;
}

}  // namespace dualpath::transport
