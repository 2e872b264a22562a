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
//   flotilla explain <gitrepo|bundle/<name>|commit> [-n ws] [-o json|human]
//   flotilla wait <gitrepo|bundle|cluster> <name> [--for=ready|delete] [--timeout=5m]
//   flotilla render <dir> [flags]
//   flotilla completion bash|zsh
//
// Global flags (--nats-url, credentials, -n, -o) go anywhere; a command rejects the ones it cannot use. The URL
// also comes from FLOTILLA_NATS_URL. The CLI never creates streams or buckets: against a NATS server no Flotilla
// service has initialised it says so and fails. Exit codes: 0 ok, 1 error (message on stderr), 2 usage; `wait`
// also 3 (timed out) and 4 (will not get there without a change).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace flotilla::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
//! `wait`: the condition did not hold within --timeout.
inline constexpr int kExitTimeout = 3;
//! `wait`: the subject is blocked on something only a change fixes (explain's blocked.needsChange).
inline constexpr int kExitWillNotHappen = 4;

//! Runs one command. `args` excludes the program name; `in` is read for `apply -f -`.
int runCli(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err);

//! The top-level help text.
std::string usage();

}  // namespace flotilla::cli
