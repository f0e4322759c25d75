#include "control/credential.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace dualpath::control {
namespace {

class CredentialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "dp_cred.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(CredentialTest, KeygenWritesAnOwnerOnlyFileThatReadsBack) {
  auto c = generate_credential();
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  const std::string path = dir_ + "/cluster.key";
  ASSERT_TRUE(write_credential(*c, path).is_ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto back = read_credential(path);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->ca_cert_pem, c->ca_cert_pem);
  EXPECT_EQ(back->ca_key_pem, c->ca_key_pem);
  // Never replaced by accident.
  const Status again = write_credential(*c, path);
  EXPECT_TRUE(again.is_already_exists()) << again.to_string();
}

TEST_F(CredentialTest, AFileOthersMayReadIsRefusedNamingTheFix) {
  auto c = generate_credential();
  ASSERT_TRUE(c.is_ok());
  const std::string path = dir_ + "/open.key";
  ASSERT_TRUE(write_credential(*c, path).is_ok());
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto r = read_credential(path);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("chmod 600"), std::string::npos) << r.status().message();
}

TEST_F(CredentialTest, GarbageAMissingFileAndAMismatchedKeyAreErrorsNamingTheFile) {
  const std::string junk = dir_ + "/junk.key";
  {
    std::ofstream(junk) << "not a credential\n";
  }
  ::chmod(junk.c_str(), 0600);
  auto r = read_credential(junk);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find(junk), std::string::npos);
  EXPECT_NE(r.status().message().find("dualpath keygen"), std::string::npos);
  EXPECT_FALSE(read_credential(dir_ + "/absent.key").is_ok());

  auto a = generate_credential();
  auto b = generate_credential();
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  ClusterCredential mixed{a->ca_cert_pem, b->ca_key_pem};
  const std::string path = dir_ + "/mixed.key";
  ASSERT_TRUE(write_credential(mixed, path).is_ok());
  auto m = read_credential(path);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("not its certificate's"), std::string::npos);
}

TEST_F(CredentialTest, MintedIdentitiesAreFreshLeavesOfTheClusterCa) {
  auto c = generate_credential();
  ASSERT_TRUE(c.is_ok());
  auto a = mint_identity(*c, "scheduler");
  auto b = mint_identity(*c, "decode node 0");
  ASSERT_TRUE(a.is_ok() && b.is_ok()) << a.status().to_string();
  EXPECT_EQ(a->root_cert_pem, c->ca_cert_pem);
  EXPECT_NE(a->private_key_pem, b->private_key_pem);
  EXPECT_NE(a->cert_chain_pem.find("BEGIN CERTIFICATE"), std::string::npos);
}

}  // namespace
}  // namespace dualpath::control
