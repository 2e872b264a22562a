#include "tls_verify.h"

#include <string>

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

namespace flotilla::git::detail {
namespace {

constexpr const char* kWhere = "TrustStore";

struct X509Deleter {
  void operator()(X509* cert) const { X509_free(cert); }
  void operator()(X509_STORE_CTX* ctx) const { X509_STORE_CTX_free(ctx); }
  void operator()(BIO* bio) const { BIO_free(bio); }
};

bool isIpAddress(const std::string& host) {
  unsigned char buffer[16];
  return inet_pton(AF_INET, host.c_str(), buffer) == 1 || inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

}  // namespace

Result<TrustStore> TrustStore::fromPem(std::string_view pem) {
  TrustStore out;
  out.store_.reset(X509_STORE_new());
  std::unique_ptr<BIO, X509Deleter> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!out.store_ || !bio) {
    return fail(ErrorKind::kInternal, "out of memory loading the CA bundle", kWhere);
  }
  int count = 0;
  while (true) {
    std::unique_ptr<X509, X509Deleter> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (!cert) {
      break;
    }
    if (X509_STORE_add_cert(out.store_.get(), cert.get()) != 1) {
      ERR_clear_error();  // a duplicate certificate is harmless
    }
    ++count;
  }
  unsigned long reason = ERR_peek_last_error();
  ERR_clear_error();
  // Reading stops with "no start line" at the end of the text; anything else is a broken certificate.
  if (reason != 0 && ERR_GET_REASON(reason) != PEM_R_NO_START_LINE) {
    return fail(ErrorKind::kInvalid, "ca_bundle holds a malformed certificate", kWhere);
  }
  if (count == 0) {
    return fail(ErrorKind::kInvalid, "ca_bundle holds no PEM certificate", kWhere);
  }
  return out;
}

Status TrustStore::verify(const unsigned char* der, size_t length, std::string_view host) const {
  const unsigned char* cursor = der;
  std::unique_ptr<X509, X509Deleter> cert(d2i_X509(nullptr, &cursor, static_cast<long>(length)));
  if (!cert) {
    ERR_clear_error();
    return fail(ErrorKind::kPermanent, "the server's certificate cannot be parsed", kWhere);
  }
  std::unique_ptr<X509_STORE_CTX, X509Deleter> ctx(X509_STORE_CTX_new());
  if (!ctx || X509_STORE_CTX_init(ctx.get(), store_.get(), cert.get(), nullptr) != 1) {
    ERR_clear_error();
    return fail(ErrorKind::kInternal, "cannot set up certificate verification", kWhere);
  }
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  std::string name(host);
  int named = isIpAddress(name) ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                                : X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
  if (named != 1) {
    ERR_clear_error();
    return fail(ErrorKind::kInternal, "cannot set the expected host name for verification", kWhere);
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    int code = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return fail(
        ErrorKind::kPermanent,
        std::string("certificate not trusted by the configured ca_bundle: ") + X509_verify_cert_error_string(code),
        kWhere);
  }
  return okStatus();
}

}  // namespace flotilla::git::detail
