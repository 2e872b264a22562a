// tests/harness/kube/src/pki.h
//
// The test clusters' PKI, made with the OpenSSL C API (milliseconds, where the openssl CLI takes a second per
// cluster): a CA, a serving certificate, client certificates and a service-account key pair, all EC P-256.
#pragma once

#include <string>
#include <vector>

#include "flotilla/core/result.h"

namespace flotilla::harness::pki {

//! A PEM certificate and its PEM private key.
struct KeyPair {
  std::string cert_pem;
  std::string key_pem;
};

//! What goes into a certificate besides its key.
struct CertSpec {
  std::string common_name;
  std::vector<std::string> organizations;  //!< Kubernetes reads O= as the client's groups
  std::vector<std::string> dns_names;      //!< subjectAltName DNS entries (serving certificates)
  std::vector<std::string> ip_addresses;   //!< subjectAltName IP entries (serving certificates)
  bool server = false;                     //!< extendedKeyUsage serverAuth, else clientAuth
  int days = 365;
};

//! A self-signed CA certificate and key.
Result<KeyPair> makeCa(const std::string& common_name);
//! A certificate for `spec` with a fresh key, signed by `ca`.
Result<KeyPair> issue(const KeyPair& ca, const CertSpec& spec);
//! A bare key pair (no certificate), as kube-apiserver's service-account token signing key wants it.
struct SigningKey {
  std::string public_pem;
  std::string private_pem;
};
Result<SigningKey> makeSigningKey();

}  // namespace flotilla::harness::pki
