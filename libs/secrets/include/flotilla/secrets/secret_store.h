// flotilla/secrets/secret_store.h
//
// Secrets referenced by name (GitRepo clientSecretName, webhookSecret, helmSecretName) read from a directory on the
// reading service's disk (--credentials-dir), one subdirectory per workspace (the GitRepo's namespace), each secret
// shaped like a Kubernetes Secret so the same data can be mounted from one:
//   <dir>/<workspace>/<name>/                  a directory with one file per key (a Secret volume mount; hidden
//                                              entries such as "..data" are skipped), or
//   <dir>/<workspace>/<name>.yaml|.yml|.json   a YAML/JSON map of key -> value, or a whole `kind: Secret` manifest
//                                              (its base64 `data` and plain `stringData` are both read).
// A GitRepo can only name secrets of its own workspace: a secret of another workspace is "not found", with the
// same message as a missing one. The flat layout of earlier versions (<dir>/<name>) is refused by checkLayout().
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

//! Reads secret `name` of `workspace` from `dir`. kInvalid for a workspace that is not a DNS-1123 label or a name
//! that is not a DNS-1123 subdomain (no path tricks); kNotFound when `dir` is empty or the workspace holds nothing
//! of that name (the same message whether or not another workspace has it); kPermanent when it cannot be read or
//! parsed. Messages name the secret, the workspace and the key, never a value.
Result<SecretData> readSecret(const std::string& dir, std::string_view workspace, std::string_view name);

//! Refuses the flat layout of earlier versions, so that a secret is never silently unreachable: a regular file
//! directly in `dir` (<dir>/<name>.yaml), or a directory holding a key file (a non-hidden file without a
//! .yaml/.yml/.json suffix, e.g. <dir>/<name>/password or a Secret volume mounted at <dir>/<name>), is kInvalid
//! naming it and saying where it belongs (<dir>/<workspace>/<name>). "" or a missing `dir` is fine.
Status checkLayout(const std::string& dir);

}  // namespace flotilla::secrets
