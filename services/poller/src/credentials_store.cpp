#include "flotilla/poller/credentials_store.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/model/labels.h"

namespace flotilla::poller {
namespace {

namespace fs = std::filesystem;
using SecretData = std::map<std::string, std::string>;

constexpr const char* kWhere = "credentials";

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

std::string inQuotes(std::string_view name) {
  return "\"" + std::string(name) + "\"";
}

Result<SecretData> readSecretDir(const fs::path& dir, std::string_view name) {
  SecretData data;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string key = it->path().filename().string();
    if (startsWith(key, ".")) {
      continue;  // Kubernetes volume internals ("..data", "..2026_..."), editor files
    }
    if (!fs::is_regular_file(it->path(), ec)) {
      continue;
    }
    auto content = readFile(it->path().string());
    if (!content.ok()) {
      return fail(ErrorKind::kPermanent, "cannot read key " + inQuotes(key) + " of secret " + inQuotes(name), kWhere);
    }
    data[key] = std::move(content).value();
  }
  if (ec) {
    return fail(ErrorKind::kPermanent, "cannot list secret " + inQuotes(name) + ": " + ec.message(), kWhere);
  }
  return data;
}

Result<SecretData> readSecretFile(const fs::path& file, std::string_view name) {
  auto content = readFile(file.string());
  if (!content.ok()) {
    return fail(ErrorKind::kPermanent, "cannot read secret " + inQuotes(name), kWhere);
  }
  // Never pass the parser's message on: it may quote the secret's text.
  auto parsed = parseYaml(*content, file.filename().string());
  if (!parsed.ok() || !parsed->isObject()) {
    return fail(ErrorKind::kPermanent, "secret " + inQuotes(name) + " is not a YAML/JSON map of keys", kWhere);
  }
  const Json& root = *parsed;
  SecretData data;
  const bool manifest = root.getString("kind") == "Secret";
  auto take = [&](const Json& map, bool base64) -> Status {
    for (const auto& [key, value] : map.asObject()) {
      if (!value.isString()) {
        return fail(ErrorKind::kPermanent, "key " + inQuotes(key) + " of secret " + inQuotes(name) + " is not a string",
                    kWhere);
      }
      if (base64) {
        auto decoded = base64Decode(value.asString());
        if (!decoded.ok()) {
          return fail(ErrorKind::kPermanent, "data." + key + " of secret " + inQuotes(name) + " is not valid base64",
                      kWhere);
        }
        data[key] = std::move(decoded).value();
      } else {
        data[key] = value.asString();
      }
    }
    return {};
  };
  if (!manifest) {
    FLOTILLA_TRY(take(root, false));
    return data;
  }
  for (const auto& [field, value] : root.asObject()) {
    if (field == "data" || field == "stringData") {
      if (!value.isObject()) {
        return fail(ErrorKind::kPermanent, field + " of secret " + inQuotes(name) + " is not a map", kWhere);
      }
      FLOTILLA_TRY(take(value, field == "data"));
    }
  }
  return data;
}

}  // namespace

Result<git::Credentials> loadSecret(const std::string& dir, std::string_view name) {
  if (!model::isDns1123Subdomain(name) || name.find("..") != std::string_view::npos) {
    return fail(ErrorKind::kInvalid, "secret name " + inQuotes(name) + " is not a valid Kubernetes name", kWhere);
  }
  if (dir.empty()) {
    return fail(ErrorKind::kNotFound,
                "secret " + inQuotes(name) + " not found: the poller runs without --credentials-dir", kWhere);
  }
  std::error_code ec;
  const fs::path base(dir);
  Result<SecretData> data =
      fail(ErrorKind::kNotFound, "secret " + inQuotes(name) + " not found in the credentials dir", kWhere);
  if (fs::is_directory(base / std::string(name), ec)) {
    data = readSecretDir(base / std::string(name), name);
  } else {
    for (const char* suffix : {"", ".yaml", ".yml", ".json"}) {
      const fs::path file = base / (std::string(name) + suffix);
      if (fs::is_regular_file(file, ec)) {
        data = readSecretFile(file, name);
        break;
      }
    }
  }
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

Result<git::Credentials> credentialsFor(const model::GitRepo& gitrepo, const std::string& credentials_dir) {
  git::Credentials credentials;
  const auto& spec = gitrepo.spec;
  if (!spec.client_secret_name.empty()) {
    auto secret = loadSecret(credentials_dir, spec.client_secret_name);
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
