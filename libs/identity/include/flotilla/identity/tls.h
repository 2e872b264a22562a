// flotilla/identity/tls.h
//
// TLS material for NATS made with OpenSSL: a CA, server certificates with subject alternative names (DNS names and
// IP addresses), and client certificates for mutual TLS. Keys are ECDSA P-256; certificates are X.509 v3, SHA-256.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "flotilla/core/result.h"

namespace flotilla::identity {

//! A certificate and its private key, PEM encoded (the key as unencrypted PKCS#8).
struct PemPair {
  std::string certificate;
  std::string private_key;
};

enum class CertificateUse { kServer, kClient };

struct CertificateRequest {
  std::string common_name;
  CertificateUse use = CertificateUse::kServer;
  //! Subject alternative names: each entry an IPv4/IPv6 address or a DNS name (servers need at least one; clients
  //! may have none).
  std::vector<std::string> alt_names;
  std::chrono::hours validity = std::chrono::hours(24 * 365);
};

//! A self-signed CA certificate (basicConstraints CA:TRUE, keyCertSign).
Result<PemPair> createCertificateAuthority(const std::string& common_name,
                                           std::chrono::hours validity = std::chrono::hours(24 * 3650));
//! A certificate for `request` signed by `ca`. kInvalid for a server certificate without names or a name that is
//! neither an IP address nor a DNS name.
Result<PemPair> issueCertificate(const PemPair& ca, const CertificateRequest& request);

//! Writes the certificate (mode 0644) and the key (mode 0600) files.
Status writePemPair(const PemPair& pair, const std::string& certificate_path, const std::string& key_path);

}  // namespace flotilla::identity
