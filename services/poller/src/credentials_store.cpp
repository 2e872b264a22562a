#include "flotilla/poller/credentials_store.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "flotilla/core/ascii.h"
#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/model/labels.h"
#include "flotilla/secrets/secret_store.h"

namespace flotilla::poller {
namespace {

constexpr const char* kWhere = "credentials";

std::string inQuotes(std::string_view name) {
  return "\"" + std::string(name) + "\"";
}

bool knownKey(std::string_view key) {
  return std::find(std::begin(kSecretKeys), std::end(kSecretKeys), key) != std::end(kSecretKeys);
}

//! The Credentials member a (known) secret key fills.
std::string git::Credentials::*secretField(std::string_view key) {
  static const std::map<std::string_view, std::string git::Credentials::*> kFields = {
      {"username", &git::Credentials::username},
      {"password", &git::Credentials::password},
      {"token", &git::Credentials::token},
      {"ssh-privatekey", &git::Credentials::ssh_private_key},
      {"ssh-publickey", &git::Credentials::ssh_public_key},
      {"ssh-passphrase", &git::Credentials::ssh_passphrase},
      {"known_hosts", &git::Credentials::known_hosts},
      {"cacerts", &git::Credentials::ca_bundle},
  };
  return kFields.at(key);
}

}  // namespace

Result<git::Credentials> loadSecret(const std::string& dir, std::string_view workspace, std::string_view name) {
  auto data = secrets::readSecret(dir, workspace, name);
  if (!data.ok()) {
    return fail(data.error());
  }
  git::Credentials credentials;
  for (const auto& [key, value] : *data) {
    if (!knownKey(key)) {
      return fail(ErrorKind::kInvalid,
                  "secret " + inQuotes(name) + " has unknown key " + inQuotes(key) +
                      " (expected one of username, "
                      "password, token, ssh-privatekey, ssh-publickey, ssh-passphrase, known_hosts, cacerts)",
                  kWhere);
    }
    // File-per-key secrets often end with a newline that is not part of a password or token.
    const bool keep_newlines =
        key == "ssh-privatekey" || key == "ssh-publickey" || key == "known_hosts" || key == "cacerts";
    credentials.*secretField(key) = keep_newlines ? value : trim(value);
  }
  return credentials;
}

Result<WebhookSecret> loadWebhookSecret(const std::string& dir, std::string_view workspace, std::string_view name) {
  auto data = secrets::readSecret(dir, workspace, name);
  if (!data.ok()) {
    return fail(data.error());
  }
  WebhookSecret secret;
  for (auto& [key, value] : *data) {
    if (std::find(std::begin(kWebhookSecretKeys), std::end(kWebhookSecretKeys), key) == std::end(kWebhookSecretKeys)) {
      return fail(ErrorKind::kInvalid,
                  "webhook secret " + inQuotes(name) + " has unknown key " + inQuotes(key) +
                      " (expected github, gitlab, gitea, gogs, bitbucket, bitbucket-server, generic, token, "
                      "azure-username or azure-password)",
                  kWhere);
    }
    secret[key] = trim(value);
  }
  if (secret.empty()) {
    return fail(ErrorKind::kInvalid, "webhook secret " + inQuotes(name) + " has no keys", kWhere);
  }
  return secret;
}

std::optional<ScopedSecretName> splitWebhookSecretName(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) {
    return std::nullopt;
  }
  ScopedSecretName scoped{std::string(text.substr(0, slash)), std::string(text.substr(slash + 1))};
  if (!model::isDns1123Label(scoped.workspace) || !model::isDns1123Subdomain(scoped.name)) {
    return std::nullopt;
  }
  return scoped;
}

bool isPlainHttpUrl(std::string_view url) {
  return url.size() >= 7 && toLowerAscii(url.substr(0, 7)) == "http://";
}

Result<git::Credentials> credentialsFor(const model::GitRepo& gitrepo, const std::string& credentials_dir) {
  git::Credentials credentials;
  const auto& spec = gitrepo.spec;
  if (!spec.client_secret_name.empty()) {
    if (isPlainHttpUrl(spec.repo) && !spec.insecure_allow_http) {
      return fail(ErrorKind::kInvalid,
                  "GitRepo " + gitrepo.metadata.ns + "/" + gitrepo.metadata.name +
                      ": spec.repo is a plain http:// URL and would send the credentials of clientSecretName " +
                      inQuotes(spec.client_secret_name) + " in clear; use https:// or set spec.insecureAllowHTTP: true",
                  kWhere);
    }
    auto secret = loadSecret(credentials_dir, gitrepo.metadata.ns, spec.client_secret_name);
    if (!secret.ok()) {
      Error error = secret.error();
      error.message =
          "GitRepo " + gitrepo.metadata.ns + "/" + gitrepo.metadata.name + ": clientSecretName: " + error.message;
      return fail(std::move(error));
    }
    credentials = std::move(secret).value();
  }
  if (!spec.ca_bundle.empty()) {
    std::string pem;
    if (spec.ca_bundle.find("-----BEGIN") != std::string::npos) {
      pem = spec.ca_bundle;
    } else {
      auto decoded = base64Decode(trim(spec.ca_bundle));
      if (!decoded.ok() || decoded->find("-----BEGIN") == std::string::npos) {
        return fail(ErrorKind::kInvalid,
                    "GitRepo " + gitrepo.metadata.ns + "/" + gitrepo.metadata.name +
                        ": spec.caBundle is neither base64-encoded PEM nor PEM",
                    kWhere);
      }
      pem = std::move(decoded).value();
    }
    if (!credentials.ca_bundle.empty() && credentials.ca_bundle.back() != '\n') {
      credentials.ca_bundle.push_back('\n');
    }
    credentials.ca_bundle += pem;
  }
  credentials.insecure_skip_tls_verify = spec.insecure_skip_tls_verify;
  return credentials;
}

}  // namespace flotilla::poller
