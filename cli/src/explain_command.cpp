// `flotilla explain` and `flotilla wait` (explain.h holds the reasoning). Both only read KV: the read-only identity
// can run them.
#include <algorithm>
#include <optional>
#include <ostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "command_line.h"
#include "flotilla/cli/cli.h"
#include "flotilla/cli/explain.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/duration.h"

namespace flotilla::cli {

void defineExplain(CLI::App& command, Invocation& invocation) {
  command
      .add_option("subject", invocation.name,
                  "[gitrepo/][ws/]<gitrepo>, bundle/[ws/]<bundle>, or a commit ([commit/]<sha>, 7+ hex characters)")
      ->required();
}

int runExplain(Invocation& invocation, const Streams& io) {
  auto snapshot = readHub(invocation.global.connect, io.err);
  if (!snapshot.ok()) {
    return failWith(io.err, snapshot.error().describe());
  }
  auto subject = resolveSubject(*snapshot, invocation.name, invocation.global.workspace);
  if (!subject.ok()) {
    return failWith(io.err, subject.error().message);
  }
  Explanation explanation = explain(*snapshot, *subject);
  io.out << (invocation.global.output == "human" ? explanationText(explanation) : explanationJson(explanation) + "\n");
  return kExitOk;
}

namespace {

//! How long `wait` sees a subject blocked on something only a change fixes before it gives up (exit 4).
constexpr std::chrono::seconds kSettle{3};

//! What `wait` waits for, judged on one snapshot.
struct Verdict {
  bool holds = false;
  bool never = false;  //!< --for=ready: blocked on something only a change fixes
  std::string reason;  //!< why it does not hold yet
};

std::string qualified(const Invocation& invocation, Kind kind) {
  return std::string(kindName(kind)) + "/" + invocation.name;
}

Verdict judgeCluster(const Snapshot& snapshot, const std::string& cluster, bool for_delete) {
  ClusterReadiness readiness = clusterReadiness(snapshot, cluster);
  if (for_delete) {
    return {.holds = !readiness.exists, .reason = "cluster " + cluster + " still exists"};
  }
  return {.holds = readiness.ready, .reason = readiness.reason};
}

Verdict judge(const Snapshot& snapshot, const Invocation& invocation, Kind kind) {
  const bool for_delete = invocation.wait_for == "delete";
  if (kind == Kind::kCluster) {
    return judgeCluster(snapshot, invocation.name, for_delete);
  }
  const std::string argument = (kind == Kind::kBundle ? "bundle/" : "gitrepo/") + invocation.name;
  auto subject = resolveSubject(snapshot, argument, invocation.global.workspace);
  if (for_delete) {
    return {.holds = !subject.ok() && subject.error().kind == ErrorKind::kNotFound,
            .reason = subject.ok() ? qualified(invocation, kind) + " still exists" : subject.error().message};
  }
  if (!subject.ok()) {
    return {.reason = subject.error().message};
  }
  Explanation explanation = explain(snapshot, *subject);
  if (!explanation.blocked) {
    return {.holds = true};
  }
  return {.never = explanation.blocked->needs_change,
          .reason = explanation.blocked->stage + ": " + explanation.blocked->reason + "; next: " + explanation.next};
}

//! The verdict on the hub as it is now, read on a connection of its own (hub_reader.h says why).
Result<Verdict> judgeNow(const Invocation& invocation, Kind kind) {
  std::ostringstream warnings;  // unreadable records are skipped; explain and get name them
  auto snapshot = readHub(invocation.global.connect, warnings);
  FLOTILLA_TRY(snapshot);
  return judge(*snapshot, invocation, kind);
}

}  // namespace

void defineWait(CLI::App& command, Invocation& invocation) {
  command.add_option("kind", invocation.kind, "gitrepos, bundles or clusters")->required();
  command.add_option("name", invocation.name, "the object's name ([ws/]name for gitrepos and bundles)")->required();
  invocation.wait_for = "ready";
  command.add_option("--for", invocation.wait_for, "ready (default) or delete")->type_name("CONDITION");
  invocation.wait_timeout = "5m";
  command
      .add_option("--timeout", invocation.wait_timeout,
                  "how long to wait (a duration: 30s, 5m, 1h; default 5m). Given before the command, --timeout is "
                  "the NATS timeout in seconds")
      ->type_name("DURATION");
}

int runWait(Invocation& invocation, const Streams& io) {
  auto kind = parseKind(invocation.kind);
  if (!kind.ok()) {
    return usageError(io.err, kind.error().message, "wait");
  }
  if (*kind != Kind::kGitRepo && *kind != Kind::kBundle && *kind != Kind::kCluster) {
    return usageError(io.err, "wait: kind " + invocation.kind + ": only gitrepos, bundles and clusters", "wait");
  }
  if (invocation.wait_for != "ready" && invocation.wait_for != "delete") {
    return usageError(io.err, "--for: expected ready or delete, got \"" + invocation.wait_for + "\"", "wait");
  }
  auto timeout = model::parseDuration(invocation.wait_timeout);
  if (!timeout.ok()) {
    return usageError(io.err, "--timeout: " + timeout.error().message, "wait");
  }
  const GlobalFlags& global = invocation.global;
  auto hub = openHub(global.connect, {std::string(events::kStatusBucket)});
  if (!hub.ok()) {
    return failWith(io.err, hub.error().describe());
  }
  const auto deadline = std::chrono::steady_clock::now() + *timeout;
  // Every stage writes its status into the status bucket: a change there is when the verdict can change.
  auto watcher = hub->bucket(events::kStatusBucket).watch(">", {.updates_only = true, .meta_only = true});
  if (!watcher.ok()) {
    return failWith(io.err, "cannot watch the hub: " + watcher.error().describe());
  }
  hub->finished_watchers.push_back(std::move(watcher).value());  // the hub closes its connection before it goes
  bus::KvWatcher& changes = hub->finished_watchers.back();
  // A verdict that only a change helps must hold for kSettle with no change that clears it: right after a start the
  // records can say so for a moment (a bundle placed before the scheduler has taken in the clusters' registrations).
  std::optional<std::chrono::steady_clock::time_point> settled_at;
  while (true) {
    auto verdict = judgeNow(invocation, *kind);
    if (!verdict.ok()) {
      return failWith(io.err, verdict.error().describe());
    }
    if (verdict->holds) {
      io.out << qualified(invocation, *kind) << " condition met (" << invocation.wait_for << ")\n";
      return kExitOk;
    }
    const auto now = std::chrono::steady_clock::now();
    settled_at =
        verdict->never ? settled_at.value_or(now + kSettle) : std::optional<std::chrono::steady_clock::time_point>();
    if (settled_at && now >= *settled_at) {
      io.err << "error: " << qualified(invocation, *kind) << " will not be ready without a change: " << verdict->reason
             << "\n";
      return kExitWillNotHappen;
    }
    auto changed = waitForChange(changes, settled_at ? std::min(deadline, *settled_at) : deadline);
    if (!changed.ok()) {
      return failWith(io.err, "the watch failed: " + changed.error().describe());
    }
    if (!*changed && std::chrono::steady_clock::now() >= deadline) {
      io.err << "error: timed out after " << invocation.wait_timeout << " waiting for " << qualified(invocation, *kind)
             << " (" << invocation.wait_for << "): " << verdict->reason << "\n";
      return kExitTimeout;
    }
  }
}

}  // namespace flotilla::cli
