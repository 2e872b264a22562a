// TLS verification and transport failures of the HTTPS client, against harness kube-apiservers.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flotilla/harness/local_port.h"
#include "flotilla/kube/client.h"
#include "kube_test_util.h"

namespace flotilla::kube {
namespace {

using testing::KubeTest;

class KubeTlsTest : public KubeTest {
 protected:
  size_t clustersWanted() const override { return 2; }

  Kubeconfig adminConfig(size_t cluster) {
    auto config = Kubeconfig::load(clusters_[cluster]->kubeconfigPath());
    EXPECT_TRUE(config.ok());
    return config.ok() ? *config : Kubeconfig{};
  }

  static Result<ServerVersion> versionWith(const Kubeconfig& config) {
    auto client = KubeClient::create(config, {.request_timeout = std::chrono::seconds(5)});
    FLOTILLA_TRY(client);
    return (*client)->serverVersion();
  }
};

// Verification failures are kPermanent: retrying against the same server with the same CA cannot succeed.
TEST_F(KubeTlsTest, WrongCaFailsVerification) {
  Kubeconfig config = adminConfig(0);
  config.ca_pem = adminConfig(1).ca_pem;  // the other cluster's CA
  auto version = versionWith(config);
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.error().kind, ErrorKind::kPermanent);
  EXPECT_NE(version.error().message.find("TLS certificate verification"), std::string::npos) << version.error().message;
  std::fprintf(stderr, "wrong CA: %s\n", version.error().message.c_str());

  config.insecure_skip_tls_verify = true;  // the same CA mismatch is ignored when asked to
  auto insecure = versionWith(config);
  EXPECT_TRUE(insecure.ok()) << insecure.error().describe();
}

// 127.0.0.1 is checked against the certificate's IP SANs, localhost against its DNS SANs.
TEST_F(KubeTlsTest, HostNameAndIpVerification) {
  Kubeconfig by_ip = adminConfig(0);
  EXPECT_TRUE(versionWith(by_ip).ok());

  Kubeconfig by_name = adminConfig(0);
  ASSERT_TRUE(parseServerUrl("https://localhost:" + by_name.port, by_name).ok());
  auto named = versionWith(by_name);
  EXPECT_TRUE(named.ok()) << named.error().describe();

  Kubeconfig wrong_name = adminConfig(0);
  wrong_name.tls_server_name = "not-the-apiserver.example.com";
  auto mismatch = versionWith(wrong_name);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.error().kind, ErrorKind::kPermanent);
  EXPECT_NE(mismatch.error().message.find("mismatch"), std::string::npos) << mismatch.error().message;

  Kubeconfig alias = adminConfig(0);
  alias.tls_server_name = "kubernetes.default.svc";  // in the serving certificate's SANs
  EXPECT_TRUE(versionWith(alias).ok());
}

TEST_F(KubeTlsTest, AnonymousAndBadClientCertificates) {
  Kubeconfig anonymous = adminConfig(0);
  anonymous.client_cert_pem.clear();
  anonymous.client_key_pem.clear();
  auto client = KubeClient::create(anonymous);
  ASSERT_TRUE(client.ok());
  auto list = (*client)->list("v1", "ConfigMap", ns_);
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.error().kind, ErrorKind::kPermanent);
  EXPECT_TRUE(httpStatusOf(list.error()) == 401 || httpStatusOf(list.error()) == 403) << list.error().describe();

  // A certificate from another cluster's CA is not trusted by this server: it is treated as anonymous.
  Kubeconfig foreign = adminConfig(0);
  Kubeconfig other = adminConfig(1);
  foreign.client_cert_pem = other.client_cert_pem;
  foreign.client_key_pem = other.client_key_pem;
  auto foreign_client = KubeClient::create(foreign);
  ASSERT_TRUE(foreign_client.ok());
  auto foreign_list = (*foreign_client)->list("v1", "ConfigMap", ns_);
  ASSERT_FALSE(foreign_list.ok());
  EXPECT_EQ(foreign_list.error().kind, ErrorKind::kPermanent);

  Kubeconfig mismatched = adminConfig(0);
  mismatched.client_key_pem = other.client_key_pem;
  auto rejected = KubeClient::create(mismatched);
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(rejected.error().message.find("client-key"), std::string::npos) << rejected.error().message;

  Kubeconfig garbage = adminConfig(0);
  garbage.ca_pem = "not a certificate";
  auto no_ca = KubeClient::create(garbage);
  ASSERT_FALSE(no_ca.ok());
  EXPECT_EQ(no_ca.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(no_ca.error().message.find("certificate-authority"), std::string::npos);
}

// Nothing listens: kTransient, quickly.
TEST_F(KubeTlsTest, ConnectionRefusedIsTransient) {
  Kubeconfig config = adminConfig(0);
  auto port = harness::freeTcpPort();  // free a moment ago, and nobody listens on it
  ASSERT_TRUE(port.ok()) << port.error().describe();
  config.port = std::to_string(*port);
  auto begin = std::chrono::steady_clock::now();
  auto version = versionWith(config);
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.error().kind, ErrorKind::kTransient);
  EXPECT_NE(version.error().message.find("refused"), std::string::npos) << version.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(2));
}

// A socket that accepts TCP but never speaks TLS: the deadline ends the attempt with kTransient.
TEST_F(KubeTlsTest, SilentServerTimesOut) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 8), 0);  // the kernel completes the TCP handshake; nobody ever answers
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  Kubeconfig config = adminConfig(0);
  config.port = std::to_string(ntohs(addr.sin_port));
  auto client = KubeClient::create(
      config, {.request_timeout = std::chrono::milliseconds(700), .connect_timeout = std::chrono::milliseconds(500)});
  ASSERT_TRUE(client.ok());
  auto begin = std::chrono::steady_clock::now();
  auto version = (*client)->serverVersion();
  auto took = std::chrono::steady_clock::now() - begin;
  ::close(fd);
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.error().kind, ErrorKind::kTransient);
  EXPECT_NE(version.error().message.find("timed out"), std::string::npos) << version.error().message;
  EXPECT_GE(took, std::chrono::milliseconds(400));
  EXPECT_LT(took, std::chrono::seconds(3));
  EXPECT_EQ((*client)->metrics().value("kube_requests_total", {{"verb", "GET"}, {"code", "transport_error"}}), 1.0);
}

}  // namespace
}  // namespace flotilla::kube
