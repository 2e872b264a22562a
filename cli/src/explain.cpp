// `flotilla explain`'s reasoning (explain.h): each stage judged from its own records, the first one not Ready is
// where the subject blocks. Pure: a Snapshot in, an Explanation out.
#include "flotilla/cli/explain.h"

#include <algorithm>
#include <map>
#include <set>

#include "explain_records.h"
#include "flotilla/core/ascii.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"

namespace flotilla::cli {

namespace {

using detail::Judged;
using detail::SubjectRecords;

std::string shortSha(const std::string& commit) {
  return commit.substr(0, 7);
}

std::string plural(size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

Judged ready(std::string stage, std::string detail) {
  return {.report = {.stage = std::move(stage), .state = "Ready", .detail = std::move(detail)}};
}

//! A stage that is not Ready: its report, and the blockage and next action it would give.
Judged notReady(std::string stage, const std::string& state, std::string detail, std::string reason, std::string next) {
  Judged judged{.report = {.stage = stage, .state = state, .detail = std::move(detail)}, .next = std::move(next)};
  judged.blockage = Blockage{.stage = std::move(stage), .reason = std::move(reason), .needs_change = state == "Failed"};
  return judged;
}

bool looksLikeCredentials(const events::PollStatus& poll) {
  const std::string lower = toLowerAscii(poll.last_error);
  for (const char* word : {"clientsecretname", "authentication", "access denied", "credential", "secret \""}) {
    if (lower.find(word) != std::string::npos) {
      return true;
    }
  }
  return false;
}

Judged pollFailed(const SubjectRecords& r, const ExplainSubject& subject) {
  const events::PollStatus& poll = *r.poll;
  const std::string reason = "poll failed: " + poll.last_error;
  if (looksLikeCredentials(poll)) {
    const std::string secret = r.gitrepo != nullptr && !r.gitrepo->spec.client_secret_name.empty()
                                   ? r.gitrepo->spec.client_secret_name
                                   : "gitcredential";
    return notReady("poll", "Failed", poll.last_error, reason,
                    "check the credentials in secret \"" + secret + "\" for workspace " + subject.workspace +
                        " (spec.clientSecretName): " + poll.last_error);
  }
  if (poll.last_error_kind == "transient") {
    return notReady("poll", "Waiting", poll.last_error, reason,
                    "the git host did not answer; the poller retries" +
                        (poll.next_poll_time.empty() ? std::string() : " at " + poll.next_poll_time) + ": " +
                        poll.last_error);
  }
  return notReady("poll", "Failed", poll.last_error, reason,
                  "fix spec.repo, branch or revision of GitRepo " + subject.workspace + "/" + subject.gitrepo + ": " +
                      poll.last_error);
}

Judged pollStage(const SubjectRecords& r, const ExplainSubject& subject, const std::string& commit) {
  const std::string gitrepo = subject.workspace + "/" + subject.gitrepo;
  if (r.gitrepo == nullptr) {
    const bool deleting = r.gitrepo_summary != nullptr;
    return notReady("poll", deleting ? "Pending" : "Failed",
                    deleting ? "GitRepo " + gitrepo + " is being deleted" : "GitRepo " + gitrepo + " does not exist",
                    deleting ? "GitRepo " + gitrepo + " is being deleted: " + r.gitrepo_summary->message
                             : "GitRepo " + gitrepo + " does not exist",
                    deleting ? "wait for the delete to finish on every cluster" : "apply GitRepo " + gitrepo);
  }
  if (r.poll == nullptr) {
    return notReady("poll", "Pending", "not polled yet", "the poller has not reported on GitRepo " + gitrepo + " yet",
                    "wait for the first poll (is flotilla-poller running?)");
  }
  if (!r.poll->last_error.empty()) {
    return pollFailed(r, subject);
  }
  if (r.poll->commit.empty()) {
    return notReady("poll", "Pending", "no commit published yet", "no commit of GitRepo " + gitrepo + " published yet",
                    "wait for the poller to publish the first commit");
  }
  if (commit != r.poll->commit) {
    if (commit == r.poll->polling_commit) {
      return notReady("poll", "Pending", "commit " + shortSha(commit) + " seen, not published yet",
                      "commit " + shortSha(commit) + " is not published yet", "wait for the poller to publish it");
    }
    return notReady("poll", "Failed", "superseded by " + shortSha(r.poll->commit),
                    "commit " + shortSha(commit) + " was superseded by " + shortSha(r.poll->commit),
                    "explain the current commit: flotilla explain gitrepo/" + gitrepo);
  }
  std::string detail = "commit " + shortSha(commit) + " published";
  if (!r.poll->last_poll_time.empty()) {
    detail += ", last poll " + r.poll->last_poll_time;
  }
  return ready("poll", detail);
}

//! "file:line: message" -> "message" when the message repeats where it is.
std::string withoutLocation(const events::RenderError& error) {
  const std::string prefix = error.file + ":" + std::to_string(error.line) + ": ";
  return startsWith(error.message, prefix) ? error.message.substr(prefix.size()) : error.message;
}

Judged renderStage(const SubjectRecords& r, const std::string& commit) {
  for (const events::BundleRecord* bundle : r.bundles) {
    if (bundle->error) {
      const events::RenderError& error = *bundle->error;
      const std::string where = error.file.empty() ? "the bundle" : error.file;
      const std::string located = error.file.empty() ? "" : error.file + ":" + std::to_string(error.line) + ": ";
      return notReady("render", "Failed", "bundle " + bundle->bundle + ": " + located + withoutLocation(error),
                      "bundle " + bundle->bundle + " failed to render at " + shortSha(bundle->commit) + ": " + located +
                          withoutLocation(error),
                      "fix " + where + ": " + withoutLocation(error));
    }
  }
  if (r.bundles.empty()) {
    return notReady("render", "Pending", "no bundle rendered yet",
                    commit.empty() ? "nothing to render yet" : "no bundle rendered for " + shortSha(commit) + " yet",
                    "wait for the bundler");
  }
  size_t at_commit = 0;
  for (const events::BundleRecord* bundle : r.bundles) {
    at_commit += commit.empty() || bundle->commit == commit ? 1 : 0;
  }
  if (at_commit < r.bundles.size()) {
    const std::string detail =
        std::to_string(at_commit) + " of " + plural(r.bundles.size(), "bundle") + " rendered at " + shortSha(commit);
    return notReady("render", "Pending", detail, detail, "wait for the bundler");
  }
  return ready("render", plural(r.bundles.size(), "bundle") + " rendered" +
                             (commit.empty() ? std::string() : " at " + shortSha(commit)));
}

//! The target stage when something is targeted: Ready once every targeted cluster has its deployment, else
//! Pending on the clusters the scheduler has not placed the bundles on yet.
Judged placedStage(const SubjectRecords& r, const std::vector<detail::Unplaced>& unplaced) {
  std::set<std::string> clusters;
  for (const auto* deployment : r.deployments) {
    clusters.insert(deployment->cluster);
  }
  const std::string placed = plural(r.deployments.size(), "deployment") + " on " + plural(clusters.size(), "cluster");
  if (unplaced.empty()) {
    return ready("target", placed);
  }
  auto waiting = detail::clustersOf(unplaced);
  const std::string more = unplaced.size() > 1 ? " (and " + std::to_string(unplaced.size() - 1) + " more)" : "";
  Judged judged = notReady("target", "Pending",
                           placed + "; " + plural(waiting.size(), "targeted cluster") + " without a deployment yet",
                           "bundle " + unplaced.front().bundle + " targets cluster " + unplaced.front().cluster +
                               " but is not placed there yet" + more,
                           "wait for the scheduler to place it (is flotilla-scheduler running?)");
  judged.blockage->clusters = std::move(waiting);
  return judged;
}

Judged targetStage(const Snapshot& snapshot, const SubjectRecords& r, const ExplainSubject& subject) {
  const auto unplaced = detail::targetedWithoutDeployment(snapshot, r);
  if (!r.deployments.empty() || !unplaced.empty()) {
    return placedStage(r, unplaced);
  }
  const bool anything_rendered =
      std::any_of(r.bundles.begin(), r.bundles.end(), [](const auto* b) { return b->last_good.has_value(); });
  const bool placed = !r.summaries.empty() || r.gitrepo_summary != nullptr;
  if (!anything_rendered || !placed) {
    return notReady("target", "Pending", "not placed yet", "the scheduler has not placed the bundles yet",
                    anything_rendered ? "wait for the scheduler" : "wait for a rendered bundle");
  }
  const std::string detail = "0 of " + plural(snapshot.clusters.size(), "registered cluster") + " targeted";
  return notReady("target", "Failed", detail, "no cluster matches the targets (" + detail + ")",
                  "no cluster matches targets: label a cluster or change spec.targets of GitRepo " + subject.workspace +
                      "/" + subject.gitrepo + " (or fleet.yaml's targetCustomizations)");
}

}  // namespace

namespace detail {

std::string shortCommit(const std::string& commit) {
  return shortSha(commit);
}

Judged blockedAt(std::string stage, const std::string& state, std::string detail, std::string reason,
                 std::string next) {
  return notReady(std::move(stage), state, std::move(detail), std::move(reason), std::move(next));
}
Judged readyAt(std::string stage, std::string detail) {
  return ready(std::move(stage), std::move(detail));
}
std::string countOf(size_t n, const std::string& word) {
  return plural(n, word);
}

SubjectRecords gather(const Snapshot& snapshot, const ExplainSubject& subject) {
  SubjectRecords r;
  const std::string& ws = subject.workspace;
  for (const auto& gitrepo : snapshot.gitrepos) {
    if (gitrepo.metadata.ns == ws && gitrepo.metadata.name == subject.gitrepo) {
      r.gitrepo = &gitrepo;
    }
  }
  if (auto it = snapshot.poll_statuses.find(events::gitRepoStatusKey(ws, subject.gitrepo));
      it != snapshot.poll_statuses.end()) {
    r.poll = &it->second;
  }
  if (auto it = snapshot.gitrepo_summaries.find(events::gitRepoSummaryKey(ws, subject.gitrepo));
      it != snapshot.gitrepo_summaries.end() && subject.kind == ExplainSubject::Kind::kGitRepo) {
    r.gitrepo_summary = &it->second;
  }
  const bool one_bundle = subject.kind == ExplainSubject::Kind::kBundle;
  auto ours = [&](const std::string& workspace, const std::string& gitrepo, const std::string& bundle) {
    return workspace == ws && (one_bundle ? bundle == subject.name : gitrepo == subject.gitrepo);
  };
  for (const auto& [key, bundle] : snapshot.bundles) {
    if (ours(bundle.workspace, bundle.gitrepo, bundle.bundle)) {
      r.bundles.push_back(&bundle);
    }
  }
  for (const auto& [key, summary] : snapshot.bundle_summaries) {
    if (ours(summary.workspace, summary.gitrepo, summary.bundle)) {
      r.summaries.push_back(&summary);
    }
  }
  for (const auto& deployment : snapshot.deployments) {
    if (!deployment.deleting && ours(deployment.workspace, deployment.gitrepo, deployment.bundle)) {
      r.deployments.push_back(&deployment);
    }
  }
  return r;
}

}  // namespace detail

Explanation explain(const Snapshot& snapshot, const ExplainSubject& subject) {
  const SubjectRecords records = detail::gather(snapshot, subject);
  Explanation out;
  out.subject = (subject.kind == ExplainSubject::Kind::kGitRepo ? "gitrepo " : "bundle ") + subject.workspace + "/" +
                subject.name;
  out.commit = subject.commit.empty() && records.poll != nullptr ? records.poll->commit : subject.commit;
  std::vector<Judged> stages = {pollStage(records, subject, out.commit), renderStage(records, out.commit),
                                targetStage(snapshot, records, subject),
                                detail::deployStage(snapshot, records, subject), detail::applyStage(snapshot, records)};
  for (auto& judged : stages) {
    out.stages.push_back(judged.report);
    if (judged.blockage && !out.blocked) {
      out.blocked = std::move(judged.blockage);
      out.next = std::move(judged.next);
    }
  }
  if (!out.blocked) {
    out.next = "nothing to do: " + stages.back().report.detail;
  }
  return out;
}

}  // namespace flotilla::cli
