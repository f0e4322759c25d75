#pragma once
// The cluster credential (issue 31): who may join a cluster as a node, and who may call a node.
//
// `dualpath keygen --out FILE` writes a new one: a private certificate authority, an EC P-256
// key and its self-signed certificate, in one PEM file that only its owner may read. The
// scheduler and every node are given the same file (`--cluster-key FILE`). At start each process
// mints its own TLS identity from it (mint_identity: a fresh key and a leaf certificate the CA
// signs), and every control connection is mutual TLS: each side presents its leaf and accepts
// only a peer whose leaf the cluster's CA signed. So a process without the file cannot register,
// cannot receive a peer's addresses or a turn's prompt, and cannot call a node; the TLS handshake
// refuses it before any handler runs, so it costs the scheduler no slot and no thread.
//
// We chose mutual TLS over a challenge on our own framing because gRPC does it for us
// (SslCredentials / SslServerCredentials, the established path), it also encrypts the prompts
// the control plane carries, and it needs no code of ours on the wire. One shared CA key is the
// simplest thing a small cluster can deploy; a site with its own PKI can hand every process a
// leaf from it later without changing the wire.
//
// `dualpath serve` with local nodes and no --cluster-key makes an ephemeral credential, written
// owner-only to its temporary directory for the nodes it spawns.
//
// Value types; functions are thread-safe.

#include <optional>
#include <string>
#include <string_view>

#include "dualpath/result.h"

namespace dualpath::control {

// The name every leaf certificate carries (subjectAltName DNS) and every client checks: the
// cluster's members are one service, whatever host or address they run on.
inline constexpr std::string_view kClusterTlsName = "dualpath-cluster";

struct ClusterCredential {
  std::string ca_cert_pem;
  std::string ca_key_pem;
};

// A new credential: a fresh CA key and its self-signed certificate (valid for 20 years).
Result<ClusterCredential> generate_credential();

// Writes `credential` to `path`, created owner-only (0600) and atomically (temp + rename);
// kAlreadyExists when the file exists and `overwrite` is false (a running cluster's key is never
// replaced by accident).
Status write_credential(const ClusterCredential& credential,
                        const std::string& path,
                        bool overwrite = false);

// Reads and checks a credential file: both PEM blocks present, the key the certificate's, the
// certificate a CA's. Errors name the file and the fix (`dualpath keygen --out FILE`). A file
// that others may read is refused too: it lets them join the cluster.
Result<ClusterCredential> read_credential(const std::string& path);

// One process's TLS identity for gRPC: the CA (to check peers), its leaf certificate and key.
struct TlsIdentity {
  std::string root_cert_pem;
  std::string cert_chain_pem;
  std::string private_key_pem;
};

// Transport security for one process: mutual TLS with an identity minted from the cluster
// credential, or none (plain TCP, allowed on loopback addresses only).
struct Security {
  std::optional<TlsIdentity> tls;
  bool insecure() const { return !tls.has_value(); }
};

// A fresh key and a leaf certificate signed by the credential's CA, named kClusterTlsName, for
// both TLS server and client use; `role` ("scheduler", "prefill node 0") goes in its subject.
Result<TlsIdentity> mint_identity(const ClusterCredential& credential, std::string_view role);

// True for an address that only this host can reach (127.0.0.0/8, ::1, localhost): where the
// control plane may run without a credential.
bool is_loopback_host(std::string_view host);

}  // namespace dualpath::control
