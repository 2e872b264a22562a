// flotilla/cli/cli.h
//
// The `flotilla` command line: read and write the hub over NATS.
//
//   flotilla [--nats-url URL] apply -f <file|->
//   flotilla [--nats-url URL] get <gitrepos|bundles|clusters|clustergroups|bundledeployments> [name]
//                                 [-n workspace] [-o table|json|yaml]
//   flotilla [--nats-url URL] describe <kind> <name> [-n workspace]
//   flotilla [--nats-url URL] delete <gitrepo|clustergroup> <name> [-n workspace]
//
// The URL also comes from FLOTILLA_NATS_URL. The CLI never creates streams or buckets: against a NATS server no
// Flotilla service has initialised it says so and fails. Exit codes: 0 ok, 1 error (message on stderr), 2 usage.
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

//! The help text.
std::string usage();

}  // namespace flotilla::cli
