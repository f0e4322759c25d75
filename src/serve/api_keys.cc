#include "serve/api_keys.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>

// As common/config.cc: header-only, and errors as values (no exceptions).
#undef TOML_HEADER_ONLY
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

namespace dualpath::serve {
namespace {

constexpr std::array<std::pair<Scope, std::string_view>, 5> kScopes = {{
    {Scope::kModels, "models"},
    {Scope::kChat, "chat"},
    {Scope::kCompletions, "completions"},
    {Scope::kMetrics, "metrics"},
    {Scope::kAdmin, "admin"},
}};

std::array<unsigned char, 32> sha256(std::string_view text) {
  std::array<unsigned char, 32> out{};
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), out.data(), &len, EVP_sha256(), nullptr);
  return out;
}

// The password of an `Authorization: Basic` header's credentials (RFC 7617: base64 of
// "user:password"; the scheme's name is case-insensitive). nullopt when the header is not Basic
// or its credentials do not decode.
std::optional<std::string> basic_password(std::string_view header) {
  constexpr std::string_view kBasic = "basic ";
  if (header.size() <= kBasic.size()) return std::nullopt;
  for (size_t i = 0; i < kBasic.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kBasic[i]) return std::nullopt;
  }
  std::string_view b64 = header.substr(kBasic.size());
  while (!b64.empty() && b64.back() == ' ') b64.remove_suffix(1);
  // EVP_DecodeBlock takes whole 4-character groups and counts '=' padding as zero bytes.
  if (b64.empty() || b64.size() % 4 != 0 || b64.size() > 4096) return std::nullopt;
  for (char c : b64) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/' && c != '=') {
      return std::nullopt;
    }
  }
  std::string decoded(b64.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(decoded.data()),
                                reinterpret_cast<const unsigned char*>(b64.data()),
                                static_cast<int>(b64.size()));
  if (n < 0) return std::nullopt;
  size_t len = static_cast<size_t>(n);
  if (b64.back() == '=') --len;
  if (b64[b64.size() - 2] == '=') --len;
  decoded.resize(len);
  const size_t colon = decoded.find(':');
  if (colon == std::string::npos) return std::nullopt;
  return decoded.substr(colon + 1);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string_view scope_name(Scope s) {
  for (const auto& [scope, name] : kScopes) {
    if (scope == s) return name;
  }
  return "?";
}

std::string sha256_hex(std::string_view text) {
  std::string out;
  for (unsigned char b : sha256(text)) out += fmt::format("{:02x}", b);
  return out;
}

Result<std::vector<ApiKeys::Entry>> ApiKeys::read(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::invalid_argument(
        fmt::format("--api-keys {}: not a readable file (a TOML file of [[keys]])", path));
  }
  toml::parse_result parsed = toml::parse_file(path);
  if (!parsed) {
    return Status::invalid_argument(fmt::format("--api-keys {}: line {}: {}", path,
                                                parsed.error().source().begin.line,
                                                parsed.error().description()));
  }
  toml::table root = std::move(parsed).table();
  for (const auto& [k, v] : root) {
    if (k.str() != "keys") {
      return Status::invalid_argument(fmt::format(
          "--api-keys {}: unknown key '{}': the file holds [[keys]] entries only", path, k.str()));
    }
  }
  const toml::array* keys = root["keys"].as_array();
  if (keys == nullptr || keys->empty()) {
    return Status::invalid_argument(fmt::format(
        "--api-keys {}: no [[keys]] entries: add one with name, key_sha256 and scopes", path));
  }
  std::vector<Entry> out;
  for (size_t i = 0; i < keys->size(); ++i) {
    const toml::table* t = (*keys)[i].as_table();
    const std::string where = fmt::format("--api-keys {}: keys[{}]", path, i);
    if (t == nullptr) return Status::invalid_argument(where + " is not a table: write [[keys]]");
    for (const auto& [k, v] : *t) {
      const std::string_view name = k.str();
      if (name != "name" && name != "key_sha256" && name != "key" && name != "scopes" &&
          name != "cache_namespace") {
        return Status::invalid_argument(fmt::format(
            "{}.{}: unknown key: use name, key_sha256 (or key), scopes and cache_namespace", where,
            name));
      }
    }
    Entry e;
    auto name = (*t)["name"].value<std::string>();
    if (!name || name->empty()) {
      return Status::invalid_argument(where + ".name: missing: give each key a name (for logs)");
    }
    e.name = *name;
    auto hash = (*t)["key_sha256"].value<std::string>();
    auto plain = (*t)["key"].value<std::string>();
    if (hash.has_value() == plain.has_value()) {
      return Status::invalid_argument(fmt::format(
          "{} ({}): give exactly one of key_sha256 (hex SHA-256 of the key: `printf %s KEY | "
          "sha256sum`) or key",
          where, e.name));
    }
    if (plain) {
      if (plain->size() < 8) {
        return Status::invalid_argument(
            fmt::format("{} ({}).key: shorter than 8 characters", where, e.name));
      }
      e.sha256 = sha256(*plain);
      e.plaintext = true;
    } else {
      if (hash->size() != 64 ||
          !std::all_of(hash->begin(), hash->end(), [](char c) { return hex_value(c) >= 0; })) {
        return Status::invalid_argument(fmt::format(
            "{} ({}).key_sha256 = \"{}\": not 64 hex digits (`printf %s KEY | sha256sum`)", where,
            e.name, *hash));
      }
      for (size_t b = 0; b < 32; ++b) {
        e.sha256[b] = static_cast<unsigned char>(hex_value((*hash)[2 * b]) * 16 +
                                                 hex_value((*hash)[2 * b + 1]));
      }
    }
    if (const toml::node* ns = (*t).get("cache_namespace"); ns != nullptr) {
      auto v = ns->value<std::string>();
      if (!v || v->empty() || v->size() > kMaxKeyNamespaceBytes) {
        return Status::invalid_argument(fmt::format(
            "{} ({}).cache_namespace: give a non-empty string of at most {} bytes (the tenant "
            "whose cached prefixes this key may hit)",
            where, e.name, kMaxKeyNamespaceBytes));
      }
      e.cache_namespace = *v;
    }
    const toml::array* scopes = (*t)["scopes"].as_array();
    if (scopes == nullptr) {
      return Status::invalid_argument(fmt::format(
          "{} ({}).scopes: missing: a list out of models, chat, completions, metrics, admin",
          where, e.name));
    }
    for (const auto& s : *scopes) {
      auto v = s.value<std::string>();
      auto it = std::find_if(kScopes.begin(), kScopes.end(),
                             [&](const auto& p) { return v && p.second == *v; });
      if (it == kScopes.end()) {
        return Status::invalid_argument(fmt::format(
            "{} ({}).scopes: \"{}\" is not a scope: use models, chat, completions, metrics, admin",
            where, e.name, v.value_or("?")));
      }
      e.scopes.push_back(it->first);
    }
    for (const Entry& other : out) {
      if (CRYPTO_memcmp(other.sha256.data(), e.sha256.data(), 32) == 0) {
        return Status::invalid_argument(fmt::format(
            "{} ({}): the same key as '{}': every entry needs its own key", where, e.name,
            other.name));
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> ApiKeys::warnings_for(const std::string& path,
                                               const std::vector<Entry>& entries) {
  std::vector<std::string> out;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    out.push_back(
        fmt::format("--api-keys {} is {} by group or others (mode {:04o}): `chmod 600 {}`", path,
                    (st.st_mode & 044) != 0 ? "readable" : "writable", st.st_mode & 07777, path));
  }
  std::vector<std::string> plain;
  for (const Entry& e : entries) {
    if (e.plaintext) plain.push_back(e.name);
  }
  if (!plain.empty()) {
    out.push_back(fmt::format(
        "--api-keys {}: {} {} a plaintext `key` ({}): store key_sha256 = \"$(printf %s KEY | "
        "sha256sum | cut -d' ' -f1)\" instead, so that the file does not give the keys away",
        path, plain.size(), plain.size() == 1 ? "entry holds" : "entries hold",
        fmt::join(plain, ", ")));
  }
  return out;
}

Result<std::unique_ptr<ApiKeys>> ApiKeys::load(const std::string& path) {
  DP_ASSIGN_OR_RETURN(auto entries, read(path));
  std::unique_ptr<ApiKeys> keys(new ApiKeys(path));
  {
    MutexLock lock(keys->mu_);
    keys->warnings_ = warnings_for(path, entries);
    keys->entries_ = std::make_shared<const std::vector<Entry>>(std::move(entries));
  }
  return keys;
}

Status ApiKeys::reload() {
  DP_ASSIGN_OR_RETURN(auto entries, read(path_));
  std::vector<std::string> warnings = warnings_for(path_, entries);
  MutexLock lock(mu_);
  entries_ = std::make_shared<const std::vector<Entry>>(std::move(entries));
  warnings_ = std::move(warnings);
  return Status::ok();
}

std::vector<std::string> ApiKeys::warnings() const {
  MutexLock lock(mu_);
  return warnings_;
}

AuthResult ApiKeys::authorize(std::string_view header, Scope needed, KeyForms forms) const {
  std::shared_ptr<const std::vector<Entry>> entries;
  {
    MutexLock lock(mu_);
    entries = entries_;
  }
  constexpr std::string_view kBearer = "Bearer ";
  std::string key;
  if (header.size() > kBearer.size() && header.substr(0, kBearer.size()) == kBearer) {
    key = header.substr(kBearer.size());
  } else if (forms == KeyForms::kBearerOrBasic) {
    key = basic_password(header).value_or("");
  }
  if (key.empty()) {
    return {401,
            forms == KeyForms::kBearerOrBasic
                ? "missing API key: send the header `Authorization: Bearer KEY`, or, in a "
                  "browser, give the key as the password (any user name; keys are set with "
                  "--api-keys)"
                : "missing API key: send the header `Authorization: Bearer KEY` (keys are set "
                  "with --api-keys)",
            "", ""};
  }
  const auto digest = sha256(key);
  const Entry* match = nullptr;
  for (const Entry& e : *entries) {  // every entry, so the time does not say which one matched
    if (CRYPTO_memcmp(e.sha256.data(), digest.data(), 32) == 0) match = &e;
  }
  if (match == nullptr) return {401, "invalid API key", "", ""};
  if (std::find(match->scopes.begin(), match->scopes.end(), needed) == match->scopes.end()) {
    return {403,
            fmt::format("the API key '{}' lacks the scope '{}' this endpoint needs: add it to the "
                        "key's scopes in the --api-keys file",
                        match->name, scope_name(needed)),
            match->name, ""};
  }
  return {200, "", match->name, match->cache_namespace};
}

bool ApiKeys::any_has(Scope s) const {
  MutexLock lock(mu_);
  return std::any_of(entries_->begin(), entries_->end(), [s](const Entry& e) {
    return std::find(e.scopes.begin(), e.scopes.end(), s) != e.scopes.end();
  });
}

std::vector<std::string> ApiKeys::names_lacking(Scope s) const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const Entry& e : *entries_) {
    if (std::find(e.scopes.begin(), e.scopes.end(), s) == e.scopes.end()) out.push_back(e.name);
  }
  return out;
}

size_t ApiKeys::size() const {
  MutexLock lock(mu_);
  return entries_->size();
}

}  // namespace dualpath::serve
