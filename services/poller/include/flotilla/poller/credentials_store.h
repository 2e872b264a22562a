// flotilla/poller/credentials_store.h
//
// Git credentials for GitRepos, read from a directory on the poller's disk (--credentials-dir), one subdirectory
// per workspace (the GitRepo's namespace) and in it one secret per `spec.clientSecretName`, shaped like a Kubernetes
// Secret (libs/secrets: <dir>/<workspace>/<name>/ with a file per key, or <name>.yaml|.yml|.json). A GitRepo can
// only name its own workspace's secrets.
// Keys: username, password, token, ssh-privatekey, ssh-publickey, ssh-passphrase, known_hosts, cacerts. Any
// other key is an error naming the key (never a value). Secrets are read on every use, so rotating a file takes
// effect at the next poll without a restart. No value is ever logged or put into status or an error message.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "flotilla/core/result.h"
#include "flotilla/git/credentials.h"
#include "flotilla/model/resources.h"
#include "flotilla/poller/webhook.h"

namespace flotilla::poller {

//! The keys a secret may hold.
inline constexpr std::string_view kSecretKeys[] = {"username",      "password",       "token",       "ssh-privatekey",
                                                   "ssh-publickey", "ssh-passphrase", "known_hosts", "cacerts"};

//! Reads secret `name` of `workspace` from `dir` (see the file comment). kInvalid for a name that is not a DNS-1123
//! subdomain or an unknown key; kNotFound when the workspace has no file or directory of that name (or `dir` is
//! empty); kPermanent when the file cannot be read or parsed. Messages name the secret, never a value.
Result<git::Credentials> loadSecret(const std::string& dir, std::string_view workspace, std::string_view name);

//! Reads webhook secret `name` of `workspace` (spec.webhookSecret of a GitRepo there, or --webhook-secret) from
//! `dir`, in the same formats. Keys: kWebhookSecretKeys (webhook.h); any other key is kInvalid naming it. Values
//! are trimmed.
Result<WebhookSecret> loadWebhookSecret(const std::string& dir, std::string_view workspace, std::string_view name);

//! A secret of one workspace, as --webhook-secret names it: "<workspace>/<name>".
struct ScopedSecretName {
  std::string workspace;
  std::string name;
};

//! Splits "<workspace>/<name>"; nullopt unless the workspace is a DNS-1123 label and the name a DNS-1123 subdomain.
std::optional<ScopedSecretName> splitWebhookSecretName(std::string_view text);

//! Whether `url` sends credentials in clear: an http:// URL (any case).
bool isPlainHttpUrl(std::string_view url);

//! The credentials a GitRepo uses: its clientSecretName secret of its own workspace (if any) plus spec.caBundle
//! (base64 PEM as in the CRD, or plain PEM) and spec.insecureSkipTLSVerify. A clientSecretName with an http://
//! spec.repo is kInvalid unless spec.insecureAllowHTTP. Errors name the GitRepo, the field and the secret.
Result<git::Credentials> credentialsFor(const model::GitRepo& gitrepo, const std::string& credentials_dir);

}  // namespace flotilla::poller
