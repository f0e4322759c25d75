#include "common/config.h"

#include <gtest/gtest.h>

namespace dualpath {
namespace {

TEST(Config, ReadsTypedValuesAndFallsBackToDefaults) {
  auto cfg = Config::from_string("[cluster]\nsnic_gbps = 400\nmode = \"full\"\n", "t.toml");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  EXPECT_DOUBLE_EQ(cfg->positive_number("cluster.snic_gbps", 1), 400.0);
  EXPECT_EQ(cfg->choice("cluster.mode", "basic", {"basic", "full"}), "full");
  EXPECT_EQ(cfg->integer("cluster.nodes", 3, 1, 10), 3);
  EXPECT_TRUE(cfg->finish().is_ok());
}

TEST(Config, NegativeBandwidthNamesKeyValueAndFix) {
  auto cfg = Config::from_string("[cluster]\nsnic_gbps = -5\n", "c.toml");
  ASSERT_TRUE(cfg.is_ok());
  cfg->positive_number("cluster.snic_gbps", 400, "the storage NIC speed in Gb/s");
  Status s = cfg->finish();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("cluster.snic_gbps"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("-5"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("positive"), std::string::npos) << s.message();
}

TEST(Config, UnknownKeyIsReportedWithSuggestion) {
  auto cfg = Config::from_string("[cluster]\nsnic_gpbs = 400\n", "c.toml");
  ASSERT_TRUE(cfg.is_ok());
  cfg->positive_number("cluster.snic_gbps", 400);
  Status s = cfg->finish();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("snic_gpbs"), std::string::npos);
  EXPECT_NE(s.message().find("did you mean 'cluster.snic_gbps'"), std::string::npos)
      << s.message();
}

TEST(Config, BadChoiceListsAllowedValues) {
  auto cfg = Config::from_string("mode = \"ful\"\n", "c.toml");
  ASSERT_TRUE(cfg.is_ok());
  cfg->choice("mode", "basic", {"basic", "full"});
  Status s = cfg->finish();
  EXPECT_NE(s.message().find("did you mean 'full'"), std::string::npos) << s.message();
}

TEST(Config, SyntaxErrorGivesLine) {
  auto cfg = Config::from_string("[cluster\n", "bad.toml");
  ASSERT_FALSE(cfg.is_ok());
  EXPECT_NE(cfg.status().message().find("bad.toml:1"), std::string::npos)
      << cfg.status().message();
}

TEST(Config, MissingFileIsNotFound) {
  auto cfg = Config::from_file("/nonexistent/dir/x.toml");
  ASSERT_FALSE(cfg.is_ok());
  EXPECT_TRUE(cfg.status().is_not_found()) << cfg.status().to_string();
}

TEST(Config, ADirectoryIsNotAnEmptyConfig) {
  auto cfg = Config::from_file("/tmp");
  ASSERT_FALSE(cfg.is_ok());
  EXPECT_NE(cfg.status().message().find("is a directory"), std::string::npos)
      << cfg.status().message();
}

TEST(Config, AnIgnoredSectionCoversItsKeysButNotASectionSharingItsPrefix) {
  auto cfg = Config::from_string("[store]\nblock_tokens = 64\n[storex]\na = 1\n", "c.toml");
  ASSERT_TRUE(cfg.is_ok());
  cfg->ignore_section("store");
  Status s = cfg->finish();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("unknown key 'storex.a'"), std::string::npos) << s.message();
}

TEST(Config, CommaSeparatedStringIsAList) {
  auto cfg = Config::from_string("data_paths = \"/a,/b\"\n", "c.toml");
  ASSERT_TRUE(cfg.is_ok());
  auto v = cfg->string_list("data_paths", {});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[1], "/b");
}

}  // namespace
}  // namespace dualpath

namespace dualpath {
namespace {

TEST(ConfigSizes, SuffixesAreBinaryAndErrorsSayWhatIsWrong) {
  EXPECT_EQ(*parse_size_bytes("64M"), int64_t{64} << 20);
  EXPECT_EQ(*parse_size_bytes("80G"), int64_t{80} << 30);
  EXPECT_EQ(*parse_size_bytes("320GiB"), int64_t{320} << 30);
  EXPECT_EQ(*parse_size_bytes("1.5T"), int64_t{3} << 39);
  EXPECT_EQ(*parse_size_bytes("512kb"), int64_t{512} << 10);
  EXPECT_EQ(*parse_size_bytes("4096"), 4096);
  for (const char* bad : {"", "G", "80X", "1.2.3G", "-5G", "80 G B"}) {
    auto r = parse_size_bytes(bad);
    EXPECT_FALSE(r.is_ok()) << bad;
    if (!r.is_ok()) {
      EXPECT_NE(r.status().message().find("\"80G\""), std::string::npos) << bad;
    }
  }
}

TEST(ConfigSizes, SizeKeysAcceptIntegersAndSuffixedStringsAndNameTheKeyOnError) {
  auto c = Config::from_string(
      "[a]\nx = \"80G\"\ny = 1024\nz = \"lots\"\nids = [0, 1, 2, 3]\nbad_ids = [0, \"1\"]\n",
      "t.toml");
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->size_bytes("a.x", 0), int64_t{80} << 30);
  EXPECT_EQ(c->size_bytes("a.y", 0), 1024);
  EXPECT_EQ(c->size_bytes("a.missing", 7), 7);
  EXPECT_EQ(c->integer_list("a.ids", {}).size(), 4u);
  EXPECT_EQ(c->size_bytes("a.z", 5), 5);
  EXPECT_TRUE(c->integer_list("a.bad_ids", {9}) == std::vector<int64_t>{9});
  Status s = c->finish();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("key 'a.z'"), std::string::npos) << s.message();
}

// Found by fuzz/config_fuzz.cc: toml++ 3.3 reached __builtin_unreachable() (undefined
// behaviour; UBSan stops here) on a non-ASCII character after a value. It is a parse error now.
TEST(ConfigFuzzRegression, NonAsciiCharactersAfterAValueAreAParseError) {
  for (const char* text : {"gpu_ids = [4, 5, 6, -\xCF\x8F]\n", "x = 1\xC2\xA1\n",
                           "a = [1\xE2\xBB\x90]\n", "[s]\nk = true\xD2\x80\n"}) {
    auto c = Config::from_string(text, "fuzz.toml");
    EXPECT_FALSE(c.is_ok()) << text;
    if (!c.is_ok()) {
      EXPECT_NE(c.status().message().find("fuzz.toml"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace dualpath
