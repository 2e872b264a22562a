// Helm repository access shared by the chart sources (helm_sources.cpp, chart_dependencies.cpp): credentials,
// `helm repo add`, version resolution from a repository's index, and running a fetch step. Internal to libs/render.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/render/external_renderers.h"
#include "tool_run.h"

namespace flotilla::render::detail {

//! Credentials and TLS settings for one repository URL.
struct RepoAuth {
  std::string username;
  std::string password;
  std::string ca_file;
  bool insecure = false;

  //! helm flags for them; the password goes to stdin where helm accepts it (repo add, registry login).
  [[nodiscard]] std::vector<std::string> tlsFlags() const {
    std::vector<std::string> flags;
    if (!ca_file.empty()) {
      flags.insert(flags.end(), {"--ca-file", ca_file});
    }
    if (insecure) {
      flags.emplace_back("--insecure-skip-tls-verify");
    }
    return flags;
  }
};

//! The credentials for repository `url` (named by `field` of `fleet_yaml` in errors): the GitRepo's helmSecretName
//! of its own workspace when helmRepoURLRegex matches. Never for a plain http:// URL unless the GitRepo allows it.
Result<RepoAuth> authFor(const std::string& url, std::string_view field, const HelmRepoAccess& access,
                         const std::string& credentials_dir, const std::string& scratch, const std::string& fleet_yaml);

//! Runs a fetch step (network allowed); a failure is the bundle's (kInvalid) with helm's message.
Result<CommandResult> fetchStep(const std::string& binary, std::vector<std::string> args, const std::string& scratch,
                                const RenderLimits& limits, const std::string& what, const std::string& where,
                                const RepoAuth& auth, std::string input = {});

//! `helm repo add <name> <url>` with the repository's credentials (password on stdin) and TLS settings.
Status addRepository(const std::string& binary, const std::string& name, const std::string& url, const RepoAuth& auth,
                     const std::string& scratch, const RenderLimits& limits, const std::string& where);

//! The newest version of <repo_name>/<chart> matching `version` (a constraint; "" = the newest), from `helm search
//! repo`. The error names `field` (helm.chart, dependencies[].name) and the repository `repo_url`.
Result<std::string> resolveChartVersion(const std::string& binary, const std::string& repo_name,
                                        const std::string& chart, const std::string& version,
                                        const std::string& repo_url, const std::string& scratch,
                                        const RenderLimits& limits, const std::string& where, std::string_view field);

//! The digest the cached index of repository `repo_name` names for `chart` at `version` ("" when it names none).
std::string indexDigest(const std::string& scratch, const std::string& repo_name, const std::string& chart,
                        const std::string& version, const RenderLimits& limits);

//! Appends each value with its length in front: no two different lists of fields read the same (the render
//! cache's identities of remote inputs).
void identityFields(std::string& out, std::initializer_list<std::string_view> values);

}  // namespace flotilla::render::detail
