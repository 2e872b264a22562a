#include "flotilla/scheduler/keys.h"

#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"

namespace flotilla::scheduler {

// The builders of libs/events follow the pipeline.md key table; these names keep the scheduler's and the CLI's
// call sites short and in one place.
std::string clusterRecordKey(std::string_view cluster) {
  return events::clusterKey(cluster);
}
std::string clusterGroupRecordKey(std::string_view workspace, std::string_view group) {
  return events::clusterGroupKey(workspace, group);
}
std::string heartbeatRecordKey(std::string_view cluster) {
  return events::heartbeatKey(cluster);
}
std::string gitRepoRecordKey(std::string_view workspace, std::string_view gitrepo) {
  return events::gitRepoKey(workspace, gitrepo);
}
std::string bundleRecordKey(std::string_view workspace, std::string_view bundle) {
  return events::bundleKey(workspace, bundle);
}
std::string deploymentRecordKey(std::string_view cluster, std::string_view workspace, std::string_view bundle) {
  return events::deploymentKey(cluster, workspace, bundle);
}
std::string pollStatusKey(std::string_view workspace, std::string_view gitrepo) {
  return events::gitRepoStatusKey(workspace, gitrepo);
}
std::string renderStatusKey(std::string_view workspace, std::string_view bundle) {
  return events::bundleRenderStatusKey(workspace, bundle);
}
std::string bdStatusKey(std::string_view cluster, std::string_view workspace, std::string_view bundle) {
  return events::bundleDeploymentStatusKey(cluster, workspace, bundle);
}
std::string bundleSummaryKey(std::string_view workspace, std::string_view bundle) {
  return events::bundleSummaryKey(workspace, bundle);
}
std::string gitRepoSummaryKey(std::string_view workspace, std::string_view gitrepo) {
  return events::gitRepoSummaryKey(workspace, gitrepo);
}
std::string clusterSummaryKey(std::string_view cluster) {
  return events::clusterSummaryKey(cluster);
}

Result<std::vector<std::string>> keyNames(std::string_view key, std::string_view prefix, size_t count) {
  std::vector<std::string> tokens = split(key, '.');
  std::vector<std::string> want = prefix.empty() ? std::vector<std::string>{} : split(prefix, '.');
  if (tokens.size() != want.size() + count) {
    return fail(ErrorKind::kInvalid, "key \"" + std::string(key) + "\" does not have the shape " +
                                         (prefix.empty() ? std::string() : std::string(prefix) + ".") + "<" +
                                         std::to_string(count) + " names>");
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (tokens[i] != want[i]) {
      return fail(ErrorKind::kInvalid, "key \"" + std::string(key) + "\" does not start with " + std::string(prefix));
    }
  }
  std::vector<std::string> names;
  for (size_t i = want.size(); i < tokens.size(); ++i) {
    auto name = events::unescapeToken(tokens[i]);
    if (!name.ok()) {
      return fail(ErrorKind::kInvalid, "key \"" + std::string(key) + "\": " + name.error().message);
    }
    names.push_back(std::move(name).value());
  }
  return names;
}

std::string deployMsgId(std::string_view cluster, std::string_view bundle, std::string_view deployment_id,
                        int64_t generation) {
  return events::deployMsgId(cluster, bundle, deployment_id.empty() ? std::string_view("deleted") : deployment_id,
                             generation);
}

}  // namespace flotilla::scheduler
