#include "pki.h"

#include <functional>
#include <memory>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "flotilla/core/c_handle.h"
#include "flotilla/core/util.h"

namespace flotilla::harness::pki {
namespace {

// RAII for the OpenSSL objects used here.
using Pkey = CHandle<EVP_PKEY, EVP_PKEY_free>;
using Cert = CHandle<X509, X509_free>;
using Bio = CHandle<BIO, BIO_free>;
using Ext = CHandle<X509_EXTENSION, X509_EXTENSION_free>;

// The one place OpenSSL's error queue becomes our Error.
Failure opensslFailure(const char* where) {
  std::string message = "OpenSSL failed";
  unsigned long code = 0;
  char buffer[256];
  while ((code = ERR_get_error()) != 0) {
    ERR_error_string_n(code, buffer, sizeof buffer);
    message += std::string(": ") + buffer;
  }
  return fail(ErrorKind::kInternal, message, where);
}

Result<Pkey> newKey() {
  Pkey key(EVP_EC_gen("P-256"));
  if (!key) {
    return opensslFailure("EVP_EC_gen");
  }
  return key;
}

Result<std::string> bioString(const std::function<int(BIO*)>& write, const char* where) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) {
    return opensslFailure(where);
  }
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

Result<std::string> certPem(X509* cert) {
  return bioString([cert](BIO* bio) { return PEM_write_bio_X509(bio, cert); }, "PEM_write_bio_X509");
}

Result<std::string> privateKeyPem(EVP_PKEY* key) {
  return bioString(
      [key](BIO* bio) { return PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr); },
      "PEM_write_bio_PrivateKey");
}

// Parses one PEM object with `reader` (an OpenSSL PEM_read_bio_* function named by `where`).
template <class Owned, class Reader>
Result<Owned> readPem(const std::string& pem, Reader reader, const char* where) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Owned object(bio ? reader(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!object) {
    return opensslFailure(where);
  }
  return object;
}

Result<Pkey> readKey(const std::string& pem) {
  return readPem<Pkey>(pem, PEM_read_bio_PrivateKey, "PEM_read_bio_PrivateKey");
}

Result<Cert> readCert(const std::string& pem) {
  return readPem<Cert>(pem, PEM_read_bio_X509, "PEM_read_bio_X509");
}

Status addExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Ext ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return opensslFailure("X509V3_EXT_conf_nid");
  }
  return okStatus();
}

// A certificate for `key` with `subject`, signed by issuer_key (issuer == nullptr: self-signed).
Result<Cert> buildCert(EVP_PKEY* key, const CertSpec& spec, bool ca, X509* issuer, EVP_PKEY* issuer_key) {
  Cert cert(X509_new());
  if (!cert) {
    return opensslFailure("X509_new");
  }
  X509_set_version(cert.get(), 2);
  // A random 127-bit serial: unique per certificate, so clusters never collide.
  unsigned char serial_bytes[16];
  RAND_bytes(serial_bytes, sizeof serial_bytes);
  serial_bytes[0] &= 0x7f;
  BIGNUM* serial = BN_bin2bn(serial_bytes, sizeof serial_bytes, nullptr);
  BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get()));
  BN_free(serial);
  // Backdated an hour so small clock differences between processes never make it "not yet valid".
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(spec.days) * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  for (const auto& org : spec.organizations) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(org.c_str()), -1, -1,
                               0);
  }
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));

  if (ca) {
    FLOTILLA_TRY(addExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE"));
    FLOTILLA_TRY(addExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature"));
  } else {
    FLOTILLA_TRY(addExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE"));
    FLOTILLA_TRY(addExtension(cert.get(), signer, NID_key_usage, "critical,digitalSignature,keyEncipherment"));
    FLOTILLA_TRY(addExtension(cert.get(), signer, NID_ext_key_usage, spec.server ? "serverAuth" : "clientAuth"));
  }
  FLOTILLA_TRY(addExtension(cert.get(), signer, NID_subject_key_identifier, "hash"));
  if (issuer != nullptr) {
    FLOTILLA_TRY(addExtension(cert.get(), signer, NID_authority_key_identifier, "keyid:always"));
  }
  std::string san;
  for (const auto& dns : spec.dns_names) {
    san += (san.empty() ? "" : ",") + std::string("DNS:") + dns;
  }
  for (const auto& ip : spec.ip_addresses) {
    san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
  }
  if (!san.empty()) {
    FLOTILLA_TRY(addExtension(cert.get(), signer, NID_subject_alt_name, san));
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) {
    return opensslFailure("X509_sign");
  }
  return cert;
}

// A certificate and its private key as PEM text.
Result<KeyPair> pemPair(X509* cert, EVP_PKEY* key) {
  auto cert_text = certPem(cert);
  FLOTILLA_TRY(cert_text);
  auto key_text = privateKeyPem(key);
  FLOTILLA_TRY(key_text);
  return KeyPair{std::move(*cert_text), std::move(*key_text)};
}

}  // namespace

Result<KeyPair> makeCa(const std::string& common_name) {
  auto key = newKey();
  FLOTILLA_TRY(key);
  auto cert = buildCert(key->get(), CertSpec{.common_name = common_name, .days = 3650}, true, nullptr, nullptr);
  FLOTILLA_TRY(cert);
  return pemPair(cert->get(), key->get());
}

Result<KeyPair> issue(const KeyPair& ca, const CertSpec& spec) {
  auto ca_cert = readCert(ca.cert_pem);
  FLOTILLA_TRY(ca_cert);
  auto ca_key = readKey(ca.key_pem);
  FLOTILLA_TRY(ca_key);
  auto key = newKey();
  FLOTILLA_TRY(key);
  auto cert = buildCert(key->get(), spec, false, ca_cert->get(), ca_key->get());
  FLOTILLA_TRY(cert);
  return pemPair(cert->get(), key->get());
}

Result<SigningKey> makeSigningKey() {
  auto key = newKey();
  FLOTILLA_TRY(key);
  EVP_PKEY* raw = key->get();
  auto public_text = bioString([raw](BIO* bio) { return PEM_write_bio_PUBKEY(bio, raw); }, "PEM_write_bio_PUBKEY");
  FLOTILLA_TRY(public_text);
  auto private_text = privateKeyPem(raw);
  FLOTILLA_TRY(private_text);
  return SigningKey{std::move(*public_text), std::move(*private_text)};
}

}  // namespace flotilla::harness::pki
