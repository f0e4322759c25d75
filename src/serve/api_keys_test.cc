// API keys: the file's validation, 401 and 403, hashing, reload.

#include "serve/api_keys.h"

#include <gtest/gtest.h>

#include <fstream>

#include <fmt/format.h>

#include "store/temp_dir.h"

namespace dualpath::serve {
namespace {

using store::TempDir;

class ApiKeysTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    const std::string path = dir_.path() + "/keys.toml";
    std::ofstream(path) << text;
    return path;
  }
  TempDir dir_;
};

TEST(Sha256, MatchesTheKnownDigest) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(ApiKeysTest, ScopesDecideBetween401And403) {
  auto keys = ApiKeys::load(write(fmt::format(R"(
[[keys]]
name = "reader"
key_sha256 = "{}"
scopes = ["chat"]
[[keys]]
name = "ops"
key = "ops-secret-1"
scopes = ["models", "metrics"]
)",
                                              sha256_hex("reader-secret"))));
  ASSERT_TRUE(keys.is_ok()) << keys.status().to_string();
  EXPECT_EQ((*keys)->authorize("Bearer reader-secret", Scope::kChat).http_status, 200);
  EXPECT_EQ((*keys)->authorize("Bearer reader-secret", Scope::kChat).key_name, "reader");
  const AuthResult no_scope = (*keys)->authorize("Bearer reader-secret", Scope::kModels);
  EXPECT_EQ(no_scope.http_status, 403);
  EXPECT_NE(no_scope.message.find("lacks the scope 'models'"), std::string::npos);
  EXPECT_EQ(no_scope.message.find("reader-secret"), std::string::npos);  // never echoed
  EXPECT_EQ((*keys)->authorize("Bearer ops-secret-1", Scope::kMetrics).http_status, 200);
  EXPECT_EQ((*keys)->authorize("Bearer wrong", Scope::kChat).http_status, 401);
  EXPECT_EQ((*keys)->authorize("", Scope::kChat).http_status, 401);
  EXPECT_EQ((*keys)->authorize("Basic abc", Scope::kChat).http_status, 401);
  EXPECT_TRUE((*keys)->any_has(Scope::kModels));
  EXPECT_FALSE((*keys)->any_has(Scope::kAdmin));
}

// GET /dashboard (a browser) sends the key as HTTP Basic's password; other routes do not take it.
TEST_F(ApiKeysTest, BasicCredentialsCarryTheKeyAsThePasswordWhereTheRouteTakesThem) {
  auto keys = ApiKeys::load(write(R"(
[[keys]]
name = "ops"
key = "ops:secret-1"
scopes = ["metrics"]
[[keys]]
name = "chat"
key = "chat-secret"
scopes = ["chat"]
)"));
  ASSERT_TRUE(keys.is_ok()) << keys.status().to_string();
  const auto basic = KeyForms::kBearerOrBasic;
  // base64("anyone:ops:secret-1"): the password is everything after the first colon.
  EXPECT_EQ(
      (*keys)->authorize("Basic YW55b25lOm9wczpzZWNyZXQtMQ==", Scope::kMetrics, basic).key_name,
      "ops");
  EXPECT_EQ(
      (*keys)->authorize("basic YW55b25lOm9wczpzZWNyZXQtMQ==", Scope::kMetrics, basic).http_status,
      200);  // the scheme's name is case-insensitive
  // base64(":ops:secret-1"): an empty user name.
  EXPECT_EQ((*keys)->authorize("Basic Om9wczpzZWNyZXQtMQ==", Scope::kMetrics, basic).http_status,
            200);
  EXPECT_EQ((*keys)->authorize("Bearer ops:secret-1", Scope::kMetrics, basic).http_status, 200);
  // Not where the route takes bearer keys only.
  EXPECT_EQ((*keys)->authorize("Basic YW55b25lOm9wczpzZWNyZXQtMQ==", Scope::kMetrics).http_status,
            401);
  // base64("x:chat-secret"): a known key without the scope.
  EXPECT_EQ((*keys)->authorize("Basic eDpjaGF0LXNlY3JldA==", Scope::kMetrics, basic).http_status,
            403);
  // base64("x:wrong"), base64("x:"), base64("nocolon"), not base64, a cut group, nothing.
  for (const char* h : {"Basic eDp3cm9uZw==", "Basic eDo=", "Basic bm9jb2xvbg==", "Basic ****",
                        "Basic YW55b25lOm9wc", "Basic ", "Basic", ""}) {
    const AuthResult a = (*keys)->authorize(h, Scope::kMetrics, basic);
    EXPECT_EQ(a.http_status, 401) << h;
    EXPECT_EQ(a.message.find("secret"), std::string::npos) << a.message;
  }
}

TEST_F(ApiKeysTest, BadFilesNameTheEntryAndTheFix) {
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {
      {"[[keys]]\nname = \"a\"\nscopes = [\"chat\"]\n", "give exactly one of key_sha256"},
      {"[[keys]]\nname = \"a\"\nkey_sha256 = \"12\"\nscopes = []\n", "not 64 hex digits"},
      {"[[keys]]\nname = \"a\"\nkey = \"long-enough\"\nscopes = [\"chats\"]\n",
       "\"chats\" is not a scope"},
      {"[[keys]]\nname = \"a\"\nkey = \"long-enough\"\n", "scopes: missing"},
      {"[[keys]]\nkey = \"long-enough\"\nscopes = []\n", "name: missing"},
      {"[[keys]]\nname = \"a\"\nkey = \"long-enough\"\nscope = []\n", "keys[0].scope: unknown key"},
      {"[[keys]]\nname = \"a\"\nkey = \"short\"\nscopes = []\n", "shorter than 8"},
      {"[[keys]]\nname = \"a\"\nkey = \"same-key-1\"\nscopes = []\n[[keys]]\nname = \"b\"\n"
       "key = \"same-key-1\"\nscopes = []\n",
       "the same key as 'a'"},
      {"keys = 3\n", "no [[keys]] entries"},
      {"[[keys]\n", "line 1"},
  };
  for (const Case& c : cases) {
    auto keys = ApiKeys::load(write(c.text));
    ASSERT_FALSE(keys.is_ok()) << c.text;
    EXPECT_NE(keys.status().message().find(c.want), std::string::npos)
        << keys.status().message();
  }
}

TEST_F(ApiKeysTest, ReloadRotatesAndABadFileKeepsTheOldKeys) {
  const std::string path = write("[[keys]]\nname = \"a\"\nkey = \"first-key\"\nscopes = [\"chat\"]\n");
  auto keys = ApiKeys::load(path);
  ASSERT_TRUE(keys.is_ok());
  write("[[keys]]\nname = \"a\"\nkey = \"second-key\"\nscopes = [\"chat\"]\n");
  ASSERT_TRUE((*keys)->reload().is_ok());
  EXPECT_EQ((*keys)->authorize("Bearer first-key", Scope::kChat).http_status, 401);
  EXPECT_EQ((*keys)->authorize("Bearer second-key", Scope::kChat).http_status, 200);
  write("[[keys]]\nname = \"a\"\n");
  EXPECT_FALSE((*keys)->reload().is_ok());
  EXPECT_EQ((*keys)->authorize("Bearer second-key", Scope::kChat).http_status, 200);
}

}  // namespace
}  // namespace dualpath::serve
