// cli/src/auth_secrets.h (private to the CLI): `flotilla auth secrets`, Kubernetes Secrets for the charts.
#pragma once

#include "command_line.h"

namespace flotilla::cli {

//! Prints the Secret manifests (stdout) of the hub release (or, with --agent, of one agent) from the auth
//! directory; the Secret names and the next step go to stderr. Exit 2 on a bad name, 1 on missing material.
int runAuthSecrets(const AuthArgs& args, const Streams& io);

}  // namespace flotilla::cli
