// Verifies an HTTPS server certificate against a caller-supplied CA bundle with OpenSSL. libgit2 1.5 (mbedTLS)
// only knows a process-wide CA location, so per-repository CAs are checked in the certificate_check callback,
// which receives the server's leaf certificate as DER. Private to libs/git.
#pragma once

#include <memory>
#include <string_view>

#include <openssl/x509.h>

#include "flotilla/core/result.h"

namespace flotilla::git::detail {

class TrustStore {
 public:
  //! Loads every certificate in `pem`; kInvalid if there is none or one is malformed.
  static Result<TrustStore> fromPem(std::string_view pem);

  //! OK if the DER certificate chains to a CA of this store, is valid now, is meant for TLS servers and names
  //! `host` (DNS name or IP address). The error message says why not.
  [[nodiscard]] Status verify(const unsigned char* der, size_t length, std::string_view host) const;

 private:
  struct StoreDeleter {
    void operator()(X509_STORE* store) const { X509_STORE_free(store); }
  };
  std::unique_ptr<X509_STORE, StoreDeleter> store_;
};

}  // namespace flotilla::git::detail
