#include "flotilla/identity/tls.h"

#include <memory>

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

namespace flotilla::identity {
namespace {

std::unique_ptr<X509, decltype(&X509_free)> parse(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  return {PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), X509_free};
}

//! OpenSSL's verdict on `leaf` against the CA, for `purpose` (X509_PURPOSE_SSL_SERVER / _CLIENT).
int verify(const std::string& ca_pem, const std::string& leaf_pem, int purpose) {
  auto ca = parse(ca_pem);
  auto leaf = parse(leaf_pem);
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), X509_STORE_free);
  X509_STORE_add_cert(store.get(), ca.get());
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(), X509_STORE_CTX_free);
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), nullptr);
  X509_STORE_CTX_set_purpose(ctx.get(), purpose);
  return X509_verify_cert(ctx.get()) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx.get());
}

TEST(TlsMaterialTest, ServerCertificateChainsToTheCaAndNamesItsHosts) {
  auto ca = createCertificateAuthority("test CA");
  ASSERT_TRUE(ca.ok()) << ca.error().describe();
  EXPECT_NE(ca->private_key.find("BEGIN PRIVATE KEY"), std::string::npos);
  auto server = issueCertificate(*ca, {.common_name = "nats", .alt_names = {"nats.example", "127.0.0.1", "::1"}});
  ASSERT_TRUE(server.ok()) << server.error().describe();
  EXPECT_EQ(verify(ca->certificate, server->certificate, X509_PURPOSE_SSL_SERVER), X509_V_OK);
  EXPECT_NE(verify(ca->certificate, server->certificate, X509_PURPOSE_SSL_CLIENT), X509_V_OK);
  auto cert = parse(server->certificate);
  EXPECT_EQ(X509_check_host(cert.get(), "nats.example", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "127.0.0.1", 0), 1);
  EXPECT_NE(X509_check_host(cert.get(), "other.example", 0, 0, nullptr), 1);
  auto client = issueCertificate(*ca, {.common_name = "agent-c1", .use = CertificateUse::kClient});
  ASSERT_TRUE(client.ok()) << client.error().describe();
  EXPECT_EQ(verify(ca->certificate, client->certificate, X509_PURPOSE_SSL_CLIENT), X509_V_OK);
  auto other_ca = createCertificateAuthority("other CA").value();
  EXPECT_NE(verify(other_ca.certificate, client->certificate, X509_PURPOSE_SSL_CLIENT), X509_V_OK);
}

TEST(TlsMaterialTest, BadNamesAndServerCertificatesWithoutNamesAreRefused) {
  auto ca = createCertificateAuthority("test CA").value();
  auto unnamed = issueCertificate(ca, {.common_name = "nats"});
  ASSERT_FALSE(unnamed.ok());
  EXPECT_NE(unnamed.error().message.find("at least one DNS name or IP address"), std::string::npos);
  auto injected = issueCertificate(ca, {.common_name = "nats", .alt_names = {"a.example,IP:10.0.0.1"}});
  ASSERT_FALSE(injected.ok());
  EXPECT_NE(injected.error().message.find("neither an IP address nor a DNS name"), std::string::npos);
  auto mismatched = issueCertificate({.certificate = ca.certificate, .private_key = "junk"},
                                     {.common_name = "n", .alt_names = {"localhost"}});
  ASSERT_FALSE(mismatched.ok());
}

}  // namespace
}  // namespace flotilla::identity
