// flotilla/cli/cli.h
//
// The `flotilla` command line: read and write the hub over NATS, preview rendering without one.
//
//   flotilla apply -f <file|->
//   flotilla get <gitrepos|bundles|clusters|clustergroups|bundledeployments> [name] [-n ws] [-o table|json|yaml]
//   flotilla describe <kind> <name> [-n ws]
//   flotilla delete <gitrepo|clustergroup> <name> [-n ws]
//   flotilla delete cluster <name> [--keep-resources]
//   flotilla force-sync <gitrepo> [-n ws]
//   flotilla events [--since <duration|RFC 3339>] [--type <type|glob>] [-f] [-o json|text]
//   flotilla render <dir> [flags]
//   flotilla completion bash|zsh
//
// Global flags (--nats-url, credentials, -n, -o) go anywhere; a command rejects the ones it cannot use. The URL
// also comes from FLOTILLA_NATS_URL. The CLI never creates streams or buckets: against a NATS server no Flotilla
// service has initialised it says so and fails. Exit codes: 0 ok, 1 error (message on stderr), 2 usage.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace flotilla::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

//! Runs one command. `args` excludes the program name; `in` is read for `apply -f -`.
int runCli(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err);

//! The top-level help text.
std::string usage();

}  // namespace flotilla::cli
