// The seed deployment guide's config read as written, its settings.json, and `dualpath doctor`'s
// checks: one test per troubleshooting case of the guide (§5), each writing the config it needs
// and checking the message. The host (UCX devices, interfaces) is given, so the checks do not
// depend on this machine's NICs.
#include "serve/doctor.h"

#include <gtest/gtest.h>

#include <fstream>

#include "serve/serve_guide.h"
#include "store/temp_dir.h"

namespace dualpath::serve {
namespace {

using store::TempDir;

// The guide's config.toml skeleton (§3), as its reader would type it in (its comments included),
// with data paths that exist here.
std::string guide_config(const std::string& dir) {
  return "[storage_node]\n"
         "data_paths = \"" + dir + "/nvme0n1," + dir + "/nvme1n1," + dir + "/nvme2n1\"\n"
         "rdma_device = \"mlx5_0\"\n"
         "rdma_port = 1\n"
         "buffer_pool_size = \"320G\" # Qwen 类模型建议 320GB/节点\n"
         "[dualpath_engine]\n"
         "enable_dual_path = true\n"
         "pe_dram_buffer = \"80G\" # DeepSeek 模型建议 80GB/节点\n"
         "de_dram_buffer = \"80G\"\n"
         "rdma_transfer_chunk = \"64M\" # RDMA 传输块大小，过大易触发重传\n"
         "scheduler_mode = \"adaptive\" # 自适应调度器，按磁盘队列长度选路\n"
         "[prefill_engine]\n"
         "engine_type = \"prefill\"\n"
         "gpu_ids = [0,1,2,3]\n"
         "max_batch_tokens = 8192\n"
         "[decode_engine]\n"
         "engine_type = \"decode\"\n"
         "gpu_ids = [4,5,6,7]\n"
         "max_batch_tokens = 4096\n";
}

class Doctor : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* d : {"nvme0n1", "nvme1n1", "nvme2n1"}) (void)dir_.sub(d);
    host_.ucx_devices = {{"lo", {"tcp"}}, {"eth0", {"tcp"}}, {"mlx5_1:1", {"rc_verbs"}},
                         {"mlx5_2:1", {"rc_verbs"}}, {"memory", {"posix"}}};
    host_.interfaces = {{"lo", 0x7f000001, 0xff000000},
                        {"eth0", 0xc0a80105, 0xffffff00},   // 192.168.1.5/24
                        {"ib1", 0x0a000001, 0xffffff00},    // 10.0.0.1/24
                        {"ib2", 0x0a000002, 0xffffff00}};   // 10.0.0.2/24: the same subnet
    host_.rdma_netdevs = {{"mlx5_1", "ib1"}, {"mlx5_2", "ib2"}};
    host_.memory_bytes = uint64_t{1} << 40;
  }

  std::string write(const std::string& name, const std::string& text) {
    const std::string p = dir_.path() + "/" + name;
    std::ofstream(p) << text;
    return p;
  }

  // Runs doctor on `toml` and returns its findings.
  std::vector<Finding> doctor(const std::string& toml, const ApiKeys* keys = nullptr,
                              std::optional<GuideSettings> settings = std::nullopt) {
    auto cfg = read_serve_config(write("c.toml", toml));
    EXPECT_TRUE(cfg.is_ok()) << cfg.status().to_string();
    if (!cfg.is_ok()) return {};
    DoctorInput in;
    in.config = *cfg;
    in.keys = keys;
    in.settings = std::move(settings);
    in.host = host_;
    return run_doctor(in);
  }

  static const Finding* find(const std::vector<Finding>& fs, const std::string& check) {
    for (const Finding& f : fs) {
      if (f.check == check && f.severity != Severity::kOk) return &f;
    }
    return nullptr;
  }

  TempDir dir_;
  DoctorHost host_;
};

TEST_F(Doctor, TheGuidesConfigIsReadAsWrittenAndMappedOntoOurKeys) {
  auto cfg = read_serve_config(write("guide.toml", guide_config(dir_.path())));
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  const auto& e = cfg->engine;
  ASSERT_EQ(e.data_paths.size(), 3u);
  EXPECT_EQ(e.data_paths[1], dir_.path() + "/nvme1n1");
  EXPECT_EQ(cfg->storage_device, "mlx5_0:1");
  EXPECT_EQ(e.pe_dram_buffer_bytes, uint64_t{80} << 30);
  EXPECT_EQ(e.de_dram_buffer_bytes, uint64_t{80} << 30);
  EXPECT_EQ(cfg->scheduler.mode, ServeMode::kFull);
  EXPECT_EQ(e.transport.traffic.chunk_bytes, uint64_t{64} << 20);
  EXPECT_GE(e.transport.traffic.max_inflight_bytes, 2 * e.transport.traffic.chunk_bytes);
  EXPECT_EQ(e.engines_per_node, 4);
  // What has no effect here is said, not dropped.
  std::string all;
  for (const auto& w : cfg->warnings) all += w + "\n";
  EXPECT_NE(all.find("prefill_engine.max_batch_tokens = 8192 has no effect"), std::string::npos)
      << all;
  EXPECT_NE(all.find("gpu_ids: 4 engines per node"), std::string::npos) << all;
}

TEST_F(Doctor, GuideKeysThatContradictOursOrEachOtherAreErrorsNamingBoth) {
  auto both = read_serve_config(write(
      "both.toml", "[store]\ndata_paths = [\"/a\"]\n[storage_node]\ndata_paths = \"/b\"\n"));
  ASSERT_FALSE(both.is_ok());
  EXPECT_NE(both.status().message().find("storage_node.data_paths"), std::string::npos);
  EXPECT_NE(both.status().message().find("store.data_paths says the same thing"),
            std::string::npos)
      << both.status().message();
  auto gpus = read_serve_config(write(
      "gpus.toml", "[prefill_engine]\ngpu_ids = [0,1]\n[decode_engine]\ngpu_ids = [2,3,4,5]\n"));
  ASSERT_FALSE(gpus.is_ok());
  EXPECT_NE(gpus.status().message().find("both roles run the same number of engines"),
            std::string::npos)
      << gpus.status().message();
  auto type = read_serve_config(write("type.toml", "[decode_engine]\nengine_type = \"prefill\"\n"));
  ASSERT_FALSE(type.is_ok());
  EXPECT_NE(type.status().message().find("decode_engine.engine_type"), std::string::npos);
  auto size = read_serve_config(write("size.toml", "[dualpath_engine]\npe_dram_buffer = \"80X\"\n"));
  ASSERT_FALSE(size.is_ok());
  EXPECT_NE(size.status().message().find("dualpath_engine.pe_dram_buffer"), std::string::npos);
  EXPECT_NE(size.status().message().find("unknown unit"), std::string::npos)
      << size.status().message();
}

TEST_F(Doctor, TheSchedulersSplitModeAndTailPolicyAreReadAndABadPolicyNamesItsKey) {
  auto cfg = read_serve_config(write(
      "split.toml", "[scheduler]\nmode = \"split\"\npe_policy = \"tail\"\nsplit_min_tokens = 256\n"));
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  EXPECT_EQ(cfg->scheduler.mode, ServeMode::kSplit);
  EXPECT_EQ(cfg->path_policy(), sched::PathPolicy::kSplit);
  EXPECT_EQ(cfg->scheduler.pe_policy, sched::PePolicy::kTail);
  EXPECT_EQ(cfg->scheduler.split_min_tokens, 256);
  auto bad = read_serve_config(write("bad.toml", "[scheduler]\npe_policy = \"fastest\"\n"));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("scheduler.pe_policy"), std::string::npos)
      << bad.status().message();
}

TEST_F(Doctor, TheGuidesSettingsJsonMapsItsIntervalAndRefusesPathWeightsWithTheReason) {
  ServeConfig cfg;
  auto refused = apply_settings_json(
      write("s1.json",
            R"({"api_key": "sk-x", "health_check": {"enabled": true, "interval_sec": 30,
               "endpoint": "/v1/models"}, "dualpath": {"enable": true, "path_a_weight": 0.4,
               "path_b_weight": 0.6, "rebalance_interval_ms": 200}})"),
      cfg);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("dualpath.path_a_weight = 0.4"), std::string::npos);
  EXPECT_NE(refused.status().message().find("read queues"), std::string::npos);
  auto ok = apply_settings_json(
      write("s2.json", R"({"health_check": {"enabled": false}, "dualpath": {"enable": false,
                          "rebalance_interval_ms": 200}})"),
      cfg);
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_FALSE(ok->health_check);
  EXPECT_EQ(cfg.scheduler.mode, ServeMode::kBasic);
  EXPECT_EQ(cfg.scheduler.report_interval, std::chrono::milliseconds(200));
  EXPECT_GT(cfg.scheduler.lease_ttl, cfg.scheduler.report_interval);
  EXPECT_FALSE(apply_settings_json(write("s3.json", "{not json"), cfg).is_ok());
}

TEST_F(Doctor, ADeviceThatDoesNotExistIsAnErrorNamingTheOnesThatDo) {
  auto fs = doctor(guide_config(dir_.path()));
  EXPECT_TRUE(has_errors(fs));
  const Finding* f = find(fs, "devices");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_NE(f->message.find("\"mlx5_0:1\": device not found"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("mlx5_1:1"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("ibdev2netdev"), std::string::npos);
  auto compute = doctor("[transport]\nnet_devices = \"mlx5_9:1\"\n");
  const Finding* g = find(compute, "devices");
  ASSERT_NE(g, nullptr);
  EXPECT_NE(g->message.find("'mlx5_9:1'"), std::string::npos) << g->message;
}

TEST_F(Doctor, ASchedulerBeyondThisHostNeedsTheClusterCredential) {
  auto local = doctor("[scheduler]\nhost = \"127.0.0.1\"\n");
  EXPECT_EQ(find(local, "scheduler"), nullptr) << "loopback is fine without a credential";
  auto open = doctor("[scheduler]\nhost = \"0.0.0.0\"\n");
  const Finding* f = find(open, "scheduler");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_NE(f->message.find("dualpath keygen"), std::string::npos) << f->message;
  auto keyed = doctor("[scheduler]\nhost = \"0.0.0.0\"\ncluster_key = \"/etc/dualpath/c.key\"\n");
  f = find(keyed, "scheduler");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_NE(f->message.find("firewall"), std::string::npos) << f->message;
}

TEST_F(Doctor, ComputeAndStorageOnOneDeviceOrOneSubnetIsAWarningWithTheFix) {
  const std::string base = "[storage_node]\nrdma_device = \"mlx5_1\"\nrdma_port = 1\n";
  auto same = doctor(base + "[transport]\ntls = \"rc,self\"\nnet_devices = \"mlx5_1:1\"\n");
  const Finding* f = find(same, "isolation");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_NE(f->message.find("share the device mlx5_1"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("degrades to one path"), std::string::npos);
  auto subnet = doctor(base + "[transport]\ntls = \"rc,self\"\nnet_devices = \"mlx5_2:1\"\n");
  const Finding* g = find(subnet, "isolation");
  ASSERT_NE(g, nullptr);
  EXPECT_NE(g->message.find("one subnet 10.0.0.0/24"), std::string::npos) << g->message;
  EXPECT_FALSE(has_errors(subnet));
  // Apart: eth0 for compute (192.168.1.0/24), mlx5_2 for storage (10.0.0.0/24).
  auto apart = doctor("[storage_node]\nrdma_device = \"mlx5_2\"\n[transport]\ntls = "
                      "\"tcp,self\"\nnet_devices = \"eth0\"\n");
  EXPECT_EQ(find(apart, "isolation"), nullptr);
}

TEST_F(Doctor, DramBuffersBelowAFullBlockAreErrorsAndSmallOnesAtRealScaleWarnings) {
  auto tiny = doctor("[live]\npe_dram_buffer_mb = 0.01\n");
  const Finding* f = find(tiny, "dram");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_NE(f->message.find("smaller than one Full Block"), std::string::npos) << f->message;
  const std::string real = "[model]\npreset = \"ds660b\"\n[live]\ncompute = \"modeled\"\n"
                           "[dualpath_engine]\npe_dram_buffer = \"16G\"\nde_dram_buffer = \"80G\"\n";
  auto ds = doctor(real);
  const Finding* g = find(ds, "dram");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->severity, Severity::kWarning);
  EXPECT_NE(g->message.find("pe_dram_buffer = 16.0 GiB is under 20 GiB"), std::string::npos)
      << g->message;
  EXPECT_NE(g->message.find("80 GB"), std::string::npos);
  auto qwen = doctor("[model]\npreset = \"qwen32b\"\n[live]\ncompute = \"modeled\"\n"
                     "[dualpath_engine]\npe_dram_buffer = \"10G\"\nde_dram_buffer = \"40G\"\n");
  const Finding* q = find(qwen, "dram");
  ASSERT_NE(q, nullptr);
  EXPECT_NE(q->message.find("40 GB"), std::string::npos) << q->message;
}

// The decode nodes' DRAM tiers count with the buffers against the machine's memory (issue 35).
TEST_F(Doctor, DramTiersThatDoNotFitThisMachineAreAWarningNamingTheKey) {
  host_.memory_bytes = uint64_t{4} << 30;
  EXPECT_EQ(find(doctor("[cache]\nde_dram_gb = 1\n"), "dram"), nullptr);
  auto big = doctor("[cache]\nde_dram_gb = 3\n");  // 2 decode nodes x 3 GB + buffers > 4 GiB
  const Finding* f = find(big, "dram");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_NE(f->message.find("DRAM tiers"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("cache.de_dram_gb"), std::string::npos) << f->message;
}

TEST_F(Doctor, AKvClassAboveModelTrafficIsAnError) {
  auto fs = doctor("[transport.traffic]\nmodel_weight = 1\nkv_weight = 50\n");
  const Finding* f = find(fs, "qos");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_NE(f->message.find("kv_weight = 50 is above model_weight = 1"), std::string::npos);
  EXPECT_NE(f->message.find("TPOT"), std::string::npos);
  auto sl = doctor("[transport.model]\nib_sl = 1\n[transport.kv]\nib_sl = 1\n");
  const Finding* g = find(sl, "qos");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->severity, Severity::kWarning);
  EXPECT_NE(g->message.find("share one InfiniBand service level"), std::string::npos);
}

TEST_F(Doctor, APdSplitOutsideTheBottleneckFreeRangeIsAWarningWithTheRange) {
  auto fs = doctor("[cluster]\nprefill_nodes = 8\ndecode_nodes = 1\n");
  const Finding* f = find(fs, "pd");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_NE(f->message.find("P/D = 8 (8P1D) is outside 1/7 .. 7/2"), std::string::npos)
      << f->message;
  EXPECT_NE(f->message.find("dualpath plan --nodes 9"), std::string::npos);
  EXPECT_EQ(find(doctor("[cluster]\nprefill_nodes = 2\ndecode_nodes = 4\n"), "pd"), nullptr);
}

TEST_F(Doctor, AKeyWithoutTheModelsScopeIsAWarningWhileHealthChecksAreOn) {
  const std::string keys_path =
      write("keys.toml",
            "[[keys]]\nname = \"ops\"\nkey = \"ops-secret-long-1\"\nscopes = [\"models\", \"chat\"]\n"
            "[[keys]]\nname = \"chat-only\"\nkey = \"chat-secret-long-2\"\nscopes = [\"chat\"]\n");
  auto keys = ApiKeys::load(keys_path);
  ASSERT_TRUE(keys.is_ok()) << keys.status().to_string();
  auto fs = doctor("", keys->get());
  const Finding* f = find(fs, "keys");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_NE(f->message.find("(chat-only)"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("403"), std::string::npos);
  GuideSettings off;
  off.health_check = false;
  EXPECT_EQ(find(doctor("", keys->get(), off), "keys"), nullptr);
}

TEST_F(Doctor, FindingsPrintAsOkWarningAndErrorLines) {
  auto fs = doctor("[transport.traffic]\nmodel_weight = 1\nkv_weight = 50\n[cluster]\n"
                   "prefill_nodes = 8\ndecode_nodes = 1\n");
  const std::string text = format_findings(fs);
  EXPECT_NE(text.find("\nerror: qos: "), std::string::npos) << text;
  EXPECT_NE(text.find("\nwarning: pd: "), std::string::npos) << text;
  EXPECT_EQ(text.rfind("ok: devices: ", 0), 0u) << text;
  EXPECT_EQ(format_findings(fs, false).find("ok:"), std::string::npos);
}

}  // namespace
}  // namespace dualpath::serve
