// What `flotilla explain` and `flotilla wait` are asked about (explain.h): a GitRepo, a bundle or a commit named on
// the command line, found in the snapshot; and a cluster's readiness for `wait cluster`.
#include <algorithm>
#include <set>
#include <tuple>

#include "flotilla/cli/explain.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"

namespace flotilla::cli {

namespace {

//! (workspace, gitrepo) pairs, or (workspace, bundle) pairs, in order.
using Named = std::set<std::pair<std::string, std::string>>;

bool inWorkspace(std::string_view wanted, const std::string& workspace) {
  return wanted.empty() || wanted == workspace;
}

Named gitReposNamed(const Snapshot& s, const std::string& name, std::string_view ws) {
  Named found;
  auto add = [&](const std::string& workspace, const std::string& gitrepo) {
    if (gitrepo == name && inWorkspace(ws, workspace)) {
      found.emplace(workspace, gitrepo);
    }
  };
  for (const auto& gitrepo : s.gitrepos) {
    add(gitrepo.metadata.ns, gitrepo.metadata.name);
  }
  for (const auto& [key, summary] : s.gitrepo_summaries) {
    add(summary.workspace, summary.gitrepo);
  }
  return found;
}

//! (workspace, bundle) -> its GitRepo.
std::map<std::pair<std::string, std::string>, std::string> bundlesNamed(const Snapshot& s, const std::string& name,
                                                                        std::string_view ws) {
  std::map<std::pair<std::string, std::string>, std::string> found;
  auto add = [&](const std::string& workspace, const std::string& bundle, const std::string& gitrepo) {
    if (bundle == name && inWorkspace(ws, workspace)) {
      found.emplace(std::make_pair(workspace, bundle), gitrepo);
    }
  };
  for (const auto& [key, bundle] : s.bundles) {
    add(bundle.workspace, bundle.bundle, bundle.gitrepo);
  }
  for (const auto& [key, summary] : s.bundle_summaries) {
    add(summary.workspace, summary.bundle, summary.gitrepo);
  }
  return found;
}

bool isCommitPrefix(std::string_view text) {
  return text.size() >= 7 && text.size() <= 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

//! Every (commit, workspace, gitrepo) a poll status, bundle record or deployment names, whose commit starts with
//! `prefix`.
std::set<std::tuple<std::string, std::string, std::string>> commitsStartingWith(const Snapshot& s,
                                                                                const std::string& prefix,
                                                                                std::string_view ws) {
  std::set<std::tuple<std::string, std::string, std::string>> found;
  auto add = [&](const std::string& commit, const std::string& workspace, const std::string& gitrepo) {
    if (!commit.empty() && startsWith(commit, prefix) && inWorkspace(ws, workspace)) {
      found.emplace(commit, workspace, gitrepo);
    }
  };
  for (const auto& [key, poll] : s.poll_statuses) {
    add(poll.commit, poll.workspace, poll.gitrepo);
    add(poll.polling_commit, poll.workspace, poll.gitrepo);
  }
  for (const auto& [key, bundle] : s.bundles) {
    add(bundle.commit, bundle.workspace, bundle.gitrepo);
  }
  for (const auto& deployment : s.deployments) {
    add(deployment.commit, deployment.workspace, deployment.gitrepo);
  }
  return found;
}

Result<ExplainSubject> resolveCommit(const Snapshot& s, const std::string& prefix, std::string_view ws) {
  if (!isCommitPrefix(prefix)) {
    return fail(ErrorKind::kInvalid, "commit \"" + prefix + "\": expected at least 7 lower-case hex characters");
  }
  auto found = commitsStartingWith(s, prefix, ws);
  if (found.empty()) {
    return fail(ErrorKind::kNotFound, "no record names a commit starting with " + prefix);
  }
  std::set<std::string> commits;
  std::string gitrepos;
  for (const auto& [commit, workspace, gitrepo] : found) {
    commits.insert(commit);
    gitrepos += gitrepos.empty() ? "" : ", ";
    gitrepos.append(workspace).append("/").append(gitrepo);
  }
  if (commits.size() > 1) {
    return fail(ErrorKind::kInvalid, "commit prefix " + prefix + " is ambiguous: give more characters");
  }
  if (found.size() > 1) {
    return fail(ErrorKind::kInvalid,
                "commit " + prefix + " belongs to several GitRepos (" + gitrepos + "); name one: gitrepo/<ws>/<name>");
  }
  const auto& [commit, workspace, gitrepo] = *found.begin();
  return ExplainSubject{.kind = ExplainSubject::Kind::kGitRepo,
                        .workspace = workspace,
                        .name = gitrepo,
                        .gitrepo = gitrepo,
                        .commit = commit};
}

std::string workspacesOf(const Named& named) {
  std::string list;
  for (const auto& [workspace, name] : named) {
    list += (list.empty() ? "" : ", ") + workspace;
  }
  return list;
}

Result<ExplainSubject> resolveBundle(const Snapshot& s, const std::string& name, std::string_view ws) {
  auto found = bundlesNamed(s, name, ws);
  if (found.empty()) {
    return fail(ErrorKind::kNotFound, "bundle \"" + name + "\" not found" +
                                          (ws.empty() ? std::string() : " in workspace " + std::string(ws)));
  }
  if (found.size() > 1) {
    Named named;
    for (const auto& [key, gitrepo] : found) {
      named.insert(key);
    }
    return fail(ErrorKind::kInvalid, "bundle \"" + name + "\" exists in several workspaces (" + workspacesOf(named) +
                                         "); choose one with -n");
  }
  const auto& [key, gitrepo] = *found.begin();
  return ExplainSubject{
      .kind = ExplainSubject::Kind::kBundle, .workspace = key.first, .name = name, .gitrepo = gitrepo};
}

}  // namespace

Result<ExplainSubject> resolveSubject(const Snapshot& snapshot, std::string_view argument, std::string_view workspace) {
  std::string kind;
  std::string rest(argument);
  for (const char* prefix : {"gitrepo/", "gitrepos/", "bundle/", "bundles/", "commit/"}) {
    if (startsWith(rest, prefix)) {
      kind = std::string(prefix).substr(0, std::string(prefix).find('/'));
      kind = kind.back() == 's' ? kind.substr(0, kind.size() - 1) : kind;
      rest = rest.substr(std::string(prefix).size());
      break;
    }
  }
  if (kind == "commit") {
    return resolveCommit(snapshot, rest, workspace);
  }
  std::string ws(workspace);
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    if (!ws.empty() && rest.substr(0, slash) != ws) {
      return fail(ErrorKind::kInvalid, "-n " + ws + " and the workspace of \"" + std::string(argument) + "\" differ");
    }
    ws = rest.substr(0, slash);
    rest = rest.substr(slash + 1);
  }
  if (rest.empty()) {
    return fail(ErrorKind::kInvalid, "\"" + std::string(argument) + "\" names nothing");
  }
  if (kind == "bundle") {
    return resolveBundle(snapshot, rest, ws);
  }
  Named gitrepos = gitReposNamed(snapshot, rest, ws);
  if (gitrepos.size() > 1) {
    return fail(ErrorKind::kInvalid, "GitRepo \"" + rest + "\" exists in several workspaces (" +
                                         workspacesOf(gitrepos) + "); choose one with -n");
  }
  if (gitrepos.size() == 1) {
    const auto& [found_ws, name] = *gitrepos.begin();
    return ExplainSubject{.kind = ExplainSubject::Kind::kGitRepo, .workspace = found_ws, .name = name, .gitrepo = name};
  }
  if (kind == "gitrepo") {
    return fail(ErrorKind::kNotFound,
                "GitRepo \"" + rest + "\" not found" + (ws.empty() ? std::string() : " in workspace " + ws));
  }
  if (isCommitPrefix(rest)) {
    if (auto commit = resolveCommit(snapshot, rest, ws); commit.ok() || commit.error().kind != ErrorKind::kNotFound) {
      return commit;
    }
  }
  auto bundle = resolveBundle(snapshot, rest, ws);
  if (!bundle.ok() && bundle.error().kind == ErrorKind::kNotFound) {
    return fail(ErrorKind::kNotFound, "no GitRepo, commit or bundle named \"" + rest + "\"" +
                                          (ws.empty() ? std::string() : " in workspace " + ws));
  }
  return bundle;
}

ClusterReadiness clusterReadiness(const Snapshot& snapshot, const std::string& cluster) {
  const bool registered = std::any_of(snapshot.clusters.begin(), snapshot.clusters.end(),
                                      [&](const model::Cluster& c) { return c.metadata.name == cluster; });
  auto summary = snapshot.cluster_summaries.find(events::clusterSummaryKey(cluster));
  const bool summarised = summary != snapshot.cluster_summaries.end();
  ClusterReadiness out;
  out.exists = registered || summarised || snapshot.cluster_specs.contains(cluster);
  if (!out.exists) {
    out.reason = "cluster " + cluster + " not found";
  } else if (!registered) {
    out.reason = "cluster " + cluster + " is WaitCheckIn: no agent has registered it";
  } else if (!summarised) {
    out.reason = "the scheduler has not summarised cluster " + cluster + " yet";
  } else if (summary->second.offline) {
    out.reason = "cluster " + cluster + " is Offline: " + summary->second.message;
  } else if (!summary->second.state.empty() && summary->second.state != "Ready") {
    out.reason = "cluster " + cluster + " is " + summary->second.state + ": " + summary->second.message;
  } else {
    out.ready = true;
  }
  return out;
}

}  // namespace flotilla::cli
