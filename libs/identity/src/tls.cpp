#include "flotilla/identity/tls.h"

#include <algorithm>

#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/pem.h>

#include "flotilla/core/util.h"
#include "flotilla/identity/secret_file.h"
#include "openssl_handles.h"

namespace flotilla::identity {

namespace {

using detail::BioPtr;
using detail::ExtensionPtr;
using detail::opensslError;
using detail::PkeyPtr;
using detail::X509Ptr;

Failure opensslFailure(const std::string& what) {
  return fail(ErrorKind::kInternal, opensslError(what));
}

bool isIpAddress(const std::string& name) {
  unsigned char buffer[16];
  return inet_pton(AF_INET, name.c_str(), buffer) == 1 || inet_pton(AF_INET6, name.c_str(), buffer) == 1;
}

//! Letters, digits, '-', '.', and a leading "*." wildcard label: what a DNS name in a certificate may hold.
bool isDnsName(const std::string& name) {
  std::string_view rest = name;
  if (startsWith(rest, "*.")) {
    rest.remove_prefix(2);
  }
  if (rest.empty() || rest.size() > 253 || rest.front() == '.' || rest.back() == '.') {
    return false;
  }
  return std::all_of(rest.begin(), rest.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
}

Result<std::string> subjectAltNames(const std::vector<std::string>& names) {
  std::string value;
  for (const auto& name : names) {
    std::string entry;
    if (isIpAddress(name)) {
      entry = "IP:" + name;
    } else if (isDnsName(name)) {
      entry = "DNS:" + name;
    } else {
      return fail(ErrorKind::kInvalid, "certificate name \"" + name + "\" is neither an IP address nor a DNS name");
    }
    value += (value.empty() ? "" : ",") + entry;
  }
  return value;
}

Result<PkeyPtr> generateKey() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) {
    return opensslFailure("generating a P-256 key failed");
  }
  return key;
}

Status addExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  ExtensionPtr extension(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!extension || X509_add_ext(cert, extension.get(), -1) != 1) {
    return opensslFailure("certificate extension " + std::string(OBJ_nid2sn(nid)) + "=" + value);
  }
  return {};
}

//! A v3 certificate for `key` with a random serial, CN=common_name, valid from 5 minutes ago for `validity`.
Result<X509Ptr> newCertificate(EVP_PKEY* key, const std::string& common_name, std::chrono::hours validity) {
  X509Ptr cert(X509_new());
  BIGNUM* serial = BN_new();
  bool ok = cert && serial != nullptr && X509_set_version(cert.get(), 2) == 1 &&
            BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
            BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get())) != nullptr &&
            X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300) != nullptr &&
            X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(validity.count()) * 3600) !=  // NOLINT
                nullptr &&
            X509_set_pubkey(cert.get(), key) == 1;
  BN_free(serial);
  X509_NAME* name = ok ? X509_get_subject_name(cert.get()) : nullptr;
  if (name == nullptr ||
      X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("Flotilla"), -1, -1,
                                 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(common_name.c_str()),
                                 -1, -1, 0) != 1) {
    return opensslFailure("building the certificate for " + common_name);
  }
  return cert;
}

Result<PemPair> toPem(X509* cert, EVP_PKEY* key) {
  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  BioPtr key_bio(BIO_new(BIO_s_mem()));
  if (!cert_bio || !key_bio || PEM_write_bio_X509(cert_bio.get(), cert) != 1 ||
      PEM_write_bio_PrivateKey(key_bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return opensslFailure("PEM encoding failed");
  }
  auto text = [](BIO* bio) {
    char* data = nullptr;
    long size = BIO_get_mem_data(bio, &data);  // NOLINT(google-runtime-int): OpenSSL's type
    return std::string(data, static_cast<size_t>(size));
  };
  return PemPair{.certificate = text(cert_bio.get()), .private_key = text(key_bio.get())};
}

struct LoadedCa {
  X509Ptr cert;
  PkeyPtr key;
};

Result<LoadedCa> loadCa(const PemPair& ca) {
  BioPtr cert_bio(BIO_new_mem_buf(ca.certificate.data(), static_cast<int>(ca.certificate.size())));
  BioPtr key_bio(BIO_new_mem_buf(ca.private_key.data(), static_cast<int>(ca.private_key.size())));
  LoadedCa loaded;
  loaded.cert.reset(cert_bio ? PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  loaded.key.reset(key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!loaded.cert || !loaded.key || X509_check_private_key(loaded.cert.get(), loaded.key.get()) != 1) {
    return fail(ErrorKind::kInvalid, opensslError("the CA certificate and key are not a matching PEM pair"));
  }
  return loaded;
}

}  // namespace

Result<PemPair> createCertificateAuthority(const std::string& common_name, std::chrono::hours validity) {
  auto key = generateKey();
  FLOTILLA_TRY(key);
  auto cert = newCertificate(key->get(), common_name, validity);
  FLOTILLA_TRY(cert);
  X509* self = cert->get();
  if (X509_set_issuer_name(self, X509_get_subject_name(self)) != 1) {
    return opensslFailure("setting the CA issuer");
  }
  FLOTILLA_TRY(addExtension(self, self, NID_basic_constraints, "critical,CA:TRUE"));
  FLOTILLA_TRY(addExtension(self, self, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature"));
  FLOTILLA_TRY(addExtension(self, self, NID_subject_key_identifier, "hash"));
  if (X509_sign(self, key->get(), EVP_sha256()) == 0) {
    return opensslFailure("signing the CA certificate");
  }
  return toPem(self, key->get());
}

Result<PemPair> issueCertificate(const PemPair& ca, const CertificateRequest& request) {
  bool server = request.use == CertificateUse::kServer;
  if (server && request.alt_names.empty()) {
    return fail(ErrorKind::kInvalid, "a server certificate needs at least one DNS name or IP address");
  }
  auto names = subjectAltNames(request.alt_names);
  FLOTILLA_TRY(names);
  auto loaded = loadCa(ca);
  FLOTILLA_TRY(loaded);
  auto key = generateKey();
  FLOTILLA_TRY(key);
  auto cert = newCertificate(key->get(), request.common_name, request.validity);
  FLOTILLA_TRY(cert);
  X509* issued = cert->get();
  X509* issuer = loaded->cert.get();
  if (X509_set_issuer_name(issued, X509_get_subject_name(issuer)) != 1) {
    return opensslFailure("setting the issuer");
  }
  FLOTILLA_TRY(addExtension(issued, issuer, NID_basic_constraints, "critical,CA:FALSE"));
  FLOTILLA_TRY(addExtension(issued, issuer, NID_key_usage, "critical,digitalSignature,keyEncipherment"));
  FLOTILLA_TRY(addExtension(issued, issuer, NID_ext_key_usage, server ? "serverAuth" : "clientAuth"));
  FLOTILLA_TRY(addExtension(issued, issuer, NID_authority_key_identifier, "keyid:always"));
  if (!names->empty()) {
    FLOTILLA_TRY(addExtension(issued, issuer, NID_subject_alt_name, *names));
  }
  if (X509_sign(issued, loaded->key.get(), EVP_sha256()) == 0) {
    return opensslFailure("signing the certificate for " + request.common_name);
  }
  return toPem(issued, key->get());
}

Status writePemPair(const PemPair& pair, const std::string& certificate_path, const std::string& key_path) {
  FLOTILLA_TRY(writeFile(certificate_path, pair.certificate, 0644));
  return writeSecretFile(key_path, pair.private_key);
}

}  // namespace flotilla::identity
