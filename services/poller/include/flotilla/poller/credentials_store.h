// flotilla/poller/credentials_store.h
//
// Git credentials for GitRepos, read from a directory on the poller's disk (--credentials-dir), one secret per
// `spec.clientSecretName`, shaped like a Kubernetes Secret so the same data can be mounted from one:
//   <dir>/<name>/            a directory with one file per key (what a Secret volume mount looks like;
//                            hidden entries such as "..data" are skipped), or
//   <dir>/<name>[.yaml|.json] a YAML/JSON map of key -> value, or a whole `kind: Secret` manifest (its
//                            base64 `data` and plain `stringData` are both read).
// Keys: username, password, token, ssh-privatekey, ssh-publickey, ssh-passphrase, known_hosts, cacerts. Any
// other key is an error naming the key (never a value). Secrets are read on every use, so rotating a file takes
// effect at the next poll without a restart. No value is ever logged or put into status or an error message.
#pragma once

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

//! Reads secret `name` from `dir` (see the file comment). kInvalid for a name that is not a DNS-1123 subdomain or
//! an unknown key; kNotFound when no file or directory has that name (or `dir` is empty); kPermanent when the file
//! cannot be read or parsed. Messages name the secret, never a value.
Result<git::Credentials> loadSecret(const std::string& dir, std::string_view name);

//! Reads webhook secret `name` (spec.webhookSecret or --webhook-secret) from `dir`, in the same formats. Keys:
//! kWebhookSecretKeys (webhook.h); any other key is kInvalid naming it. Values are trimmed.
Result<WebhookSecret> loadWebhookSecret(const std::string& dir, std::string_view name);

//! The credentials a GitRepo uses: its clientSecretName secret (if any) plus spec.caBundle (base64 PEM as in the
//! CRD, or plain PEM) and spec.insecureSkipTLSVerify. Errors name the GitRepo and the secret.
Result<git::Credentials> credentialsFor(const model::GitRepo& gitrepo, const std::string& credentials_dir);

}  // namespace flotilla::poller
