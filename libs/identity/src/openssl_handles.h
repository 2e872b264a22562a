// libs/identity/src/openssl_handles.h (private): RAII owners of the OpenSSL handles the identity library uses.
#pragma once

#include <memory>
#include <string>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "flotilla/core/c_handle.h"

namespace flotilla::identity::detail {

using PkeyPtr = CHandle<EVP_PKEY, EVP_PKEY_free>;
using MdCtxPtr = CHandle<EVP_MD_CTX, EVP_MD_CTX_free>;
using X509Ptr = CHandle<X509, X509_free>;
using BioPtr = CHandle<BIO, BIO_free>;
using ExtensionPtr = CHandle<X509_EXTENSION, X509_EXTENSION_free>;

//! The text of OpenSSL's most recent error (and clears the queue), or `fallback` when the queue is empty.
inline std::string opensslError(const std::string& fallback) {
  unsigned long code = ERR_get_error();  // NOLINT(google-runtime-int): OpenSSL's type
  if (code == 0) {
    return fallback;
  }
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  return fallback + ": " + text;
}

}  // namespace flotilla::identity::detail
