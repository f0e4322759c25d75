#include "control/credential.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace dualpath::control {

namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;
using Bio = std::unique_ptr<BIO, Free>;

// OpenSSL's error queue, as text, emptied.
std::string ssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no detail" : out;
}

Status ssl_fail(std::string_view what) {
  return Status::internal(fmt::format("{} failed (OpenSSL: {})", what, ssl_errors()));
}

Result<Key> new_ec_key() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return ssl_fail("generating an EC P-256 key");
  return key;
}

Status add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Free> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return ssl_fail(fmt::format("adding certificate extension {}", value));
  }
  return Status::ok();
}

// A certificate for `key`'s public half, named `common_name`, signed by `issuer_key` (and named
// by `issuer`'s subject; null: self-signed).
Result<Cert> make_cert(EVP_PKEY* key,
                       std::string_view common_name,
                       X509* issuer,
                       EVP_PKEY* issuer_key,
                       bool ca,
                       long valid_s) {
  Cert cert(X509_new());
  if (!cert) return ssl_fail("X509_new");
  unsigned char serial_bytes[16];
  if (RAND_bytes(serial_bytes, sizeof(serial_bytes)) != 1) return ssl_fail("RAND_bytes");
  serial_bytes[0] &= 0x7f;  // a positive serial
  BIGNUM* bn = BN_bin2bn(serial_bytes, sizeof(serial_bytes), nullptr);
  ASN1_INTEGER* serial = BN_to_ASN1_INTEGER(bn, nullptr);
  BN_free(bn);
  const bool serial_ok = serial != nullptr && X509_set_serialNumber(cert.get(), serial) == 1;
  ASN1_INTEGER_free(serial);
  if (!serial_ok || X509_set_version(cert.get(), 2) != 1) return ssl_fail("setting the serial");
  // Valid from an hour ago: clocks of a cluster's hosts differ a little.
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), valid_s) == nullptr) {
    return ssl_fail("setting the validity");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  const std::string cn(common_name);
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("dualpath"), -1, -1,
                                 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1) {
    return ssl_fail("naming the certificate");
  }
  X509* signer = issuer != nullptr ? issuer : cert.get();
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) != 1 ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return ssl_fail("setting the issuer and key");
  }
  if (ca) {
    DP_RETURN_IF_ERROR(add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE"));
    DP_RETURN_IF_ERROR(add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign"));
  } else {
    DP_RETURN_IF_ERROR(add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE"));
    DP_RETURN_IF_ERROR(add_extension(cert.get(), signer, NID_key_usage, "critical,digitalSignature"));
    DP_RETURN_IF_ERROR(add_extension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth"));
    const std::string san = fmt::format("DNS:{}", kClusterTlsName);
    DP_RETURN_IF_ERROR(add_extension(cert.get(), signer, NID_subject_alt_name, san.c_str()));
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) return ssl_fail("signing the certificate");
  return cert;
}

Result<std::string> pem_of_cert(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return ssl_fail("writing a certificate");
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

Result<std::string> pem_of_key(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return ssl_fail("writing a private key");
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

Result<Cert> cert_of_pem(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Cert cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) return Status::invalid_argument(fmt::format("no certificate ({})", ssl_errors()));
  return cert;
}

Result<Key> key_of_pem(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Key key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) return Status::invalid_argument(fmt::format("no private key ({})", ssl_errors()));
  return key;
}

// The PEM block that starts with `-----BEGIN <label>-----`, with its END line.
std::string pem_block(const std::string& text, std::string_view label) {
  const std::string begin = fmt::format("-----BEGIN {}-----", label);
  const std::string end = fmt::format("-----END {}-----", label);
  const size_t b = text.find(begin);
  if (b == std::string::npos) return {};
  const size_t e = text.find(end, b);
  if (e == std::string::npos) return {};
  return text.substr(b, e + end.size() - b) + "\n";
}

constexpr long kCaValidS = 20L * 365 * 24 * 3600;
constexpr long kLeafValidS = 10L * 365 * 24 * 3600;

}  // namespace

Result<ClusterCredential> generate_credential() {
  DP_ASSIGN_OR_RETURN(Key key, new_ec_key());
  DP_ASSIGN_OR_RETURN(Cert cert, make_cert(key.get(), "dualpath cluster CA", nullptr, key.get(),
                                           /*ca=*/true, kCaValidS));
  ClusterCredential c;
  DP_ASSIGN_OR_RETURN(c.ca_cert_pem, pem_of_cert(cert.get()));
  DP_ASSIGN_OR_RETURN(c.ca_key_pem, pem_of_key(key.get()));
  return c;
}

Status write_credential(const ClusterCredential& c, const std::string& path, bool overwrite) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!overwrite && fs::exists(path, ec)) {
    return Status::already_exists(fmt::format(
        "'{}' exists; a cluster's credential is not replaced by accident: remove it first, or "
        "give another --out",
        path));
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::io_error(fmt::format("cannot create '{}': {}; check that its directory exists "
                                        "and is writable",
                                        tmp, std::strerror(errno)));
  }
  const std::string text = fmt::format(
      "# dualpath cluster credential (dualpath keygen): a private CA for the control plane's\n"
      "# mutual TLS. Give this file to `dualpath serve --cluster-key` and to every\n"
      "# `dualpath node --cluster-key`; whoever holds it may join the cluster. Keep it 0600.\n"
      "{}{}",
      c.ca_cert_pem, c.ca_key_pem);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::io_error(fmt::format("writing '{}' failed: {}", tmp, std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::io_error(fmt::format("cannot write '{}': {}", path, std::strerror(err)));
  }
  return Status::ok();
}

Result<ClusterCredential> read_credential(const std::string& path) {
  auto bad = [&](std::string_view why) {
    return Status::invalid_argument(fmt::format(
        "--cluster-key '{}': {}; make a credential with `dualpath keygen --out FILE` and give "
        "the same file to `serve` and every `node`",
        path, why));
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return bad(fmt::format("cannot read it ({})", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) return bad("not a regular file");
  if ((st.st_mode & 077) != 0) {
    return Status::failed_precondition(fmt::format(
        "--cluster-key '{}' may be read by others (mode {:o}), who could then join the cluster; "
        "run `chmod 600 {}`",
        path, st.st_mode & 0777, path));
  }
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  ClusterCredential c;
  c.ca_cert_pem = pem_block(text, "CERTIFICATE");
  c.ca_key_pem = pem_block(text, "PRIVATE KEY");
  if (c.ca_cert_pem.empty() || c.ca_key_pem.empty()) {
    return bad("it does not hold a certificate and a private key in PEM");
  }
  auto cert = cert_of_pem(c.ca_cert_pem);
  if (!cert.is_ok()) return bad(cert.status().message());
  auto key = key_of_pem(c.ca_key_pem);
  if (!key.is_ok()) return bad(key.status().message());
  if (X509_check_private_key(cert->get(), key->get()) != 1) {
    ERR_clear_error();
    return bad("its private key is not its certificate's");
  }
  if (X509_check_ca(cert->get()) == 0) return bad("its certificate is not a CA's");
  return c;
}

Result<TlsIdentity> mint_identity(const ClusterCredential& c, std::string_view role) {
  DP_ASSIGN_OR_RETURN(Cert ca, cert_of_pem(c.ca_cert_pem));
  DP_ASSIGN_OR_RETURN(Key ca_key, key_of_pem(c.ca_key_pem));
  DP_ASSIGN_OR_RETURN(Key key, new_ec_key());
  DP_ASSIGN_OR_RETURN(Cert leaf, make_cert(key.get(), fmt::format("dualpath {}", role), ca.get(),
                                           ca_key.get(), /*ca=*/false, kLeafValidS));
  TlsIdentity id;
  id.root_cert_pem = c.ca_cert_pem;
  DP_ASSIGN_OR_RETURN(id.cert_chain_pem, pem_of_cert(leaf.get()));
  DP_ASSIGN_OR_RETURN(id.private_key_pem, pem_of_key(key.get()));
  return id;
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr a{};
  const std::string h(host);
  if (::inet_pton(AF_INET, h.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

}  // namespace dualpath::control
