// Kubeconfig parsing: the supported fields, relative paths, -data variants, defaults and the errors that name
// the bad field.
#include "flotilla/kube/kubeconfig.h"

#include <cstdlib>
#include <vector>

#include <gtest/gtest.h>

#include "flotilla/core/util.h"
#include "flotilla/testing/temp_dir.h"

namespace flotilla::kube {
namespace {

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.empty());
    ASSERT_TRUE(writeFile(dir_ + "/ca.crt", "CA PEM").ok());
    ASSERT_TRUE(writeFile(dir_ + "/client.crt", "CERT PEM").ok());
    ASSERT_TRUE(writeFile(dir_ + "/client.key", "KEY PEM").ok());
    ASSERT_TRUE(writeFile(dir_ + "/token", "file-token\n").ok());
  }
  Result<Kubeconfig> load(const std::string& text, std::string_view context = {}) {
    EXPECT_TRUE(writeFile(dir_ + "/config", text).ok());
    return Kubeconfig::load(dir_ + "/config", context);
  }

  testing::TempDir temp_{"flotilla-kubeconfig-test"};
  const std::string dir_ = temp_.path();
};

//! The string fields of `c`: context, host, port, hostPort(), base path, default namespace, CA, client certificate
//! and key, token, token file, TLS server name.
std::vector<std::string> fieldsOf(const Kubeconfig& c) {
  return {c.context,         c.host,           c.port,  c.hostPort(), c.base_path,      c.default_namespace, c.ca_pem,
          c.client_cert_pem, c.client_key_pem, c.token, c.token_file, c.tls_server_name};
}

constexpr const char* kTwoContexts = R"(apiVersion: v1
kind: Config
current-context: certs
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: ca.crt
- name: remote
  cluster:
    server: https://kube.example.com/prefix/
    certificate-authority-data: UkVNT1RFIENB
    tls-server-name: api.internal
users:
- name: admin
  user:
    client-certificate: client.crt
    client-key: client.key
- name: robot
  user:
    tokenFile: token
contexts:
- name: certs
  context: {cluster: local, user: admin, namespace: team-a}
- name: robot
  context: {cluster: remote, user: robot}
)";

// The current context with file references resolved against the kubeconfig's directory.
TEST_F(KubeconfigTest, CurrentContextWithRelativeFiles) {
  auto config = load(kTwoContexts);
  ASSERT_TRUE(config.ok()) << config.error().describe();
  EXPECT_EQ(fieldsOf(*config), (std::vector<std::string>{"certs", "127.0.0.1", "6443", "127.0.0.1:6443", "", "team-a",
                                                         "CA PEM", "CERT PEM", "KEY PEM", "", "", ""}));
}

// An explicit context; inline CA data, a token file, default port and namespace, a path prefix.
TEST_F(KubeconfigTest, NamedContextWithDataAndTokenFile) {
  auto config = load(kTwoContexts, "robot");
  ASSERT_TRUE(config.ok()) << config.error().describe();
  EXPECT_EQ(fieldsOf(*config),
            (std::vector<std::string>{"robot", "kube.example.com", "443", "kube.example.com:443", "/prefix", "default",
                                      "REMOTE CA", "", "", "file-token", dir_ + "/token", "api.internal"}));
}

TEST_F(KubeconfigTest, InlineTokenAndInsecureAndIpv6) {
  auto config = load(R"(current-context: c
clusters: [{name: k, cluster: {server: "https://[::1]:8443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
)");
  ASSERT_TRUE(config.ok()) << config.error().describe();
  EXPECT_EQ(config->host, "::1");
  EXPECT_EQ(config->port, "8443");
  EXPECT_EQ(config->hostPort(), "[::1]:8443");
  EXPECT_TRUE(config->insecure_skip_tls_verify);
  EXPECT_EQ(config->token, "abc");
}

struct BadCase {
  const char* name;
  std::string yaml;
  std::string context;
  std::string expected;  // a part of the message that names the field
};

class KubeconfigErrorTest : public KubeconfigTest, public ::testing::WithParamInterface<BadCase> {};

TEST_P(KubeconfigErrorTest, NamesTheField) {
  const auto& c = GetParam();
  auto config = load(c.yaml, c.context);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(config.error().message.find(c.expected), std::string::npos) << config.error().message;
}

constexpr const char* kHead = "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n";

INSTANTIATE_TEST_SUITE_P(
    Kubeconfig, KubeconfigErrorTest,
    ::testing::Values(
        BadCase{"NoCurrentContext", "clusters: []\n", "", "current-context"},
        BadCase{"UnknownContext", kTwoContexts, "nope", "contexts[nope]"},
        BadCase{"UnknownCluster", std::string(kHead) + "users: [{name: u, user: {token: t}}]\n", "", "clusters[k]"},
        BadCase{"NoServer",
                std::string(kHead) + "clusters: [{name: k, cluster: {}}]\nusers: [{name: u, user: {token: t}}]\n", "",
                "clusters[k].cluster.server: missing"},
        BadCase{"HttpServer",
                std::string(kHead) +
                    "clusters: [{name: k, cluster: {server: 'http://x:1'}}]\nusers: [{name: u, user: {token: t}}]\n",
                "", "only https://"},
        BadCase{"BadPort",
                std::string(kHead) +
                    "clusters: [{name: k, cluster: {server: 'https://x:http'}}]\nusers: [{name: u, user: {}}]\n",
                "", "bad port"},
        BadCase{"MissingCaFile",
                std::string(kHead) +
                    "clusters: [{name: k, cluster: {server: 'https://x', certificate-authority: nope.crt}}]\n"
                    "users: [{name: u, user: {}}]\n",
                "", "clusters[k].cluster.certificate-authority: cannot read"},
        BadCase{"BadBase64",
                std::string(kHead) +
                    "clusters: [{name: k, cluster: {server: 'https://x', certificate-authority-data: '%%%'}}]\n"
                    "users: [{name: u, user: {}}]\n",
                "", "certificate-authority-data: not valid base64"},
        BadCase{"CertWithoutKey",
                std::string(kHead) + "clusters: [{name: k, cluster: {server: 'https://x'}}]\n"
                                     "users: [{name: u, user: {client-certificate: client.crt}}]\n",
                "", "users[u].user.client-key: missing"},
        BadCase{"ExecPlugin",
                std::string(kHead) + "clusters: [{name: k, cluster: {server: 'https://x'}}]\n"
                                     "users: [{name: u, user: {exec: {command: aws}}}]\n",
                "", "users[u].user.exec: not supported"},
        BadCase{"UnknownUser", std::string(kHead) + "clusters: [{name: k, cluster: {server: 'https://x'}}]\n", "",
                "users[u]: no such user"},
        BadCase{"NotYaml", "clusters: [unclosed", "", "not valid YAML"}),
    [](const ::testing::TestParamInfo<BadCase>& param_info) { return std::string(param_info.param.name); });

// Found by fuzz/kubeconfig_fuzzer: a port of more digits than an int holds made std::stoi throw out of the parser.
TEST(KubeconfigServerUrlTest, PortBeyondIntIsABadPortNotAnException) {
  for (const char* url : {"https://x:99999999999", "https://[::1]:123456789012345678901234567890", "https://x:65536"}) {
    Kubeconfig out;
    auto status = parseServerUrl(url, out);
    ASSERT_FALSE(status.ok()) << url;
    EXPECT_EQ(status.error().message, std::string("server: bad port in \"") + url + "\"");
  }
  Kubeconfig out;
  ASSERT_TRUE(parseServerUrl("https://x:65535", out).ok());
  EXPECT_EQ(out.port, "65535");
}

TEST_F(KubeconfigTest, MissingFileIsInvalid) {
  auto config = Kubeconfig::load(dir_ + "/does-not-exist");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().kind, ErrorKind::kInvalid);
}

TEST_F(KubeconfigTest, InClusterReadsServiceAccount) {
  ASSERT_TRUE(writeFile(dir_ + "/namespace", "flotilla-system").ok());
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto config = Kubeconfig::inCluster(dir_);
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_TRUE(config.ok()) << config.error().describe();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->token, "file-token");
  EXPECT_EQ(config->token_file, dir_ + "/token");
  EXPECT_EQ(config->ca_pem, "CA PEM");
  EXPECT_EQ(config->default_namespace, "flotilla-system");
}

TEST_F(KubeconfigTest, InClusterOutsideAPodIsInvalid) {
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  auto config = Kubeconfig::inCluster(dir_);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(config.error().message.find("KUBERNETES_SERVICE_HOST"), std::string::npos);
}

TEST_F(KubeconfigTest, LoadDefaultUsesKubeconfigEnv) {
  ASSERT_TRUE(writeFile(dir_ + "/config", kTwoContexts).ok());
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::setenv("KUBECONFIG", (dir_ + "/config:/elsewhere").c_str(), 1);
  auto config = Kubeconfig::loadDefault();
  ::unsetenv("KUBECONFIG");
  ASSERT_TRUE(config.ok()) << config.error().describe();
  EXPECT_EQ(config->context, "certs");
}

}  // namespace
}  // namespace flotilla::kube
