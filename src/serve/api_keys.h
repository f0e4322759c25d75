#pragma once
// ApiKeys: the API's keys and their scopes, from a TOML file (docs/api.md):
//
//   [[keys]]
//   name = "ci"
//   key_sha256 = "9f86d0..."          # hex SHA-256 of the key (or `key = "..."`, for tests)
//   scopes = ["models", "chat", "completions", "metrics", "admin"]
//   cache_namespace = "tenant-a"      # optional: this key's turns hit only this namespace's KV
//
// A request's key comes from `Authorization: Bearer KEY`, or, on the routes a browser opens
// (KeyForms::kBearerOrBasic: GET /dashboard and the /metrics it reads), from HTTP Basic with the
// key as the password (any user name): a browser cannot send a bearer header when it navigates,
// but it prompts for Basic credentials and reuses them for the page's own requests. No key or an
// unknown one: 401; a key without the endpoint's scope: 403 naming the scope. The key is hashed and
// compared against every entry's hash in constant time; keys are never logged or echoed. Errors in
// the file name the entry, the key and the fix. Thread-safe: reload() swaps the table (SIGHUP
// rotation).

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "dualpath/result.h"

namespace dualpath::serve {

enum class Scope { kModels, kChat, kCompletions, kMetrics, kAdmin };
std::string_view scope_name(Scope s);

// The forms of `Authorization` a route takes (see above).
enum class KeyForms { kBearer, kBearerOrBasic };

struct AuthResult {
  int http_status = 200;  // 200, 401 or 403
  std::string message;    // for 401 / 403
  std::string key_name;   // the entry that matched (for logs: never the key)
  std::string cache_namespace;  // the entry's (empty: the shared default)
};

class ApiKeys {
 public:
  // Reads and validates `path`.
  static Result<std::unique_ptr<ApiKeys>> load(const std::string& path);
  // Rereads the file; on error the old table stays in force and the error is returned.
  Status reload();

  AuthResult authorize(std::string_view authorization_header,
                       Scope needed,
                       KeyForms forms = KeyForms::kBearer) const;
  bool any_has(Scope s) const;  // whether some key carries this scope (doctor's check)
  std::vector<std::string> names_lacking(Scope s) const;  // the keys without it (doctor's check)
  size_t size() const;
  const std::string& path() const { return path_; }
  // What is unsafe about the file as last (re)loaded, one line each, for `serve` to print: it
  // is readable or writable by group or others, or entries hold a plaintext `key`.
  std::vector<std::string> warnings() const;

 private:
  struct Entry {
    std::string name;
    std::array<unsigned char, 32> sha256;
    std::vector<Scope> scopes;
    std::string cache_namespace;
    bool plaintext = false;  // given as `key`, not key_sha256
  };
  static Result<std::vector<Entry>> read(const std::string& path);
  static std::vector<std::string> warnings_for(const std::string& path,
                                               const std::vector<Entry>& entries);
  explicit ApiKeys(std::string path) : path_(std::move(path)) {}

  const std::string path_;
  mutable Mutex mu_;
  std::shared_ptr<const std::vector<Entry>> entries_ DP_GUARDED_BY(mu_);  // swapped on reload
  std::vector<std::string> warnings_ DP_GUARDED_BY(mu_);
};

// A key's cache_namespace is hashed into the turn's (http_api.h); this bounds the file's text.
inline constexpr size_t kMaxKeyNamespaceBytes = 256;

// Hex SHA-256 of `text` (lower case), as key_sha256 wants it.
std::string sha256_hex(std::string_view text);

}  // namespace dualpath::serve
