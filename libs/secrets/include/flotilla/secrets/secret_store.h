// flotilla/secrets/secret_store.h
//
// Secrets referenced by name (GitRepo clientSecretName, webhookSecret, helmSecretName) read from a directory on the
// reading service's disk (--credentials-dir), shaped like a Kubernetes Secret so the same data can be mounted from one:
//   <dir>/<name>/             a directory with one file per key (a Secret volume mount; hidden entries such as
//                             "..data" are skipped), or
//   <dir>/<name>[.yaml|.yml|.json]  a YAML/JSON map of key -> value, or a whole `kind: Secret` manifest (its base64
//                             `data` and plain `stringData` are both read).
// Secrets are read on every use, so rotating a file takes effect without a restart. Which keys are allowed is the
// caller's business (the poller's git credentials, its webhook secrets, the bundler's Helm repository credentials).
// No value is ever put into an error message: not even the YAML parser's message, which may quote the text.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "flotilla/core/result.h"

namespace flotilla::secrets {

//! Key -> value (raw bytes; file-per-key values keep their trailing newline).
using SecretData = std::map<std::string, std::string>;

//! Reads secret `name` from `dir`. kInvalid for a name that is not a DNS-1123 subdomain (no path tricks);
//! kNotFound when `dir` is empty or holds nothing of that name; kPermanent when it cannot be read or parsed.
//! Messages name the secret and the key, never a value.
Result<SecretData> readSecret(const std::string& dir, std::string_view name);

}  // namespace flotilla::secrets
