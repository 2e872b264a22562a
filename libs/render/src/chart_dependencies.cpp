// A local chart's dependencies (Chart.yaml `dependencies:`): built with `helm dependency build` on a copy when
// charts/ lacks one, and resolved to versions and index digests for the render cache.
#include <filesystem>
#include <map>
#include <set>

#include "flotilla/core/json.h"
#include "flotilla/core/yaml.h"
#include "helm_repo.h"
#include "tool_run.h"

namespace flotilla::render::detail {
namespace fs = std::filesystem;

namespace {

//! A dependency of a local chart that `helm dependency build` would fetch.
struct ChartDependency {
  std::string name;
  std::string version;     //!< the constraint Chart.yaml gives
  std::string repository;  //!< its URL as written
};

//! The dependencies a local chart's Chart.yaml declares, whether any is missing from charts/ (vendored neither as a
//! directory nor as <name>-*.tgz), and the http(s) repositories they name. Empty when Chart.yaml does not read.
struct ChartDependencies {
  std::vector<ChartDependency> all;
  std::set<std::string> repositories;
  bool missing = false;
};

ChartDependencies scanDependencies(const std::string& chart_path, const std::string& chart_yaml,
                                   const RenderLimits& limits) {
  ChartDependencies out;
  auto text = readFile(chart_path + "/Chart.yaml");
  if (!text.ok()) {
    return out;  // helm template reports it
  }
  auto chart = parseYaml(*text, chart_yaml, YamlLimits{.max_input_bytes = limits.max_file_bytes});
  const Json* dependencies = chart.ok() ? chart->find("dependencies") : nullptr;
  if (dependencies == nullptr || !dependencies->isArray()) {
    return out;
  }
  std::error_code ec;
  for (const auto& dependency : dependencies->asArray()) {
    if (!dependency.isObject()) {
      continue;
    }
    ChartDependency entry{dependency.getString("name"), dependency.getString("version"),
                          dependency.getString("repository")};
    if (startsWith(entry.repository, "http://") || startsWith(entry.repository, "https://")) {
      out.repositories.insert(entry.repository);
    }
    bool vendored = fs::is_directory(std::string(chart_path).append("/charts/").append(entry.name), ec);
    for (fs::directory_iterator it(chart_path + "/charts", ec); !vendored && !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      const std::string file = it->path().filename().string();
      vendored = startsWith(file, entry.name + "-") && endsWith(file, ".tgz");
    }
    out.missing = out.missing || !vendored;
    out.all.push_back(std::move(entry));
  }
  return out;
}

//! Whether the render runs `helm dependency build`: a dependency is missing from charts/ and updates are not off.
bool buildsDependencies(const ChartDependencies& dependencies, const RenderRequest& request) {
  return dependencies.missing && !(request.options.helm && request.options.helm->disable_dependency_update);
}

//! Adds each of `repositories` to the scratch dir's helm config as dependency-<i> (in the set's order), with the
//! GitRepo's credentials where they apply; the last one's auth (for fetchStep's scrubbing of helm's messages).
Result<RepoAuth> addDependencyRepositories(const std::string& binary, const HelmRendererOptions& options,
                                           const RenderRequest& request, const std::string& scratch,
                                           const std::set<std::string>& repositories, const std::string& chart_yaml) {
  RepoAuth last_auth;
  int index = 0;
  for (const auto& repository : repositories) {
    auto auth = authFor(repository, "dependencies[].repository", request.helm_access, options.credentials_dir, scratch,
                        chart_yaml);
    FLOTILLA_TRY(auth);
    FLOTILLA_TRY(addRepository(binary, "dependency-" + std::to_string(index++), repository, *auth, scratch,
                               request.limits, chart_yaml));
    last_auth = std::move(auth).value();
  }
  return last_auth;
}

}  // namespace

//! A local chart whose Chart.yaml declares dependencies missing from charts/: a copy of it (the checkout is
//! shared by the bundles of the commit) gets `helm dependency build` with the repositories it names.
Result<PreparedChart> buildDependencies(const std::string& binary, const HelmRendererOptions& options,
                                        const RenderRequest& request, const std::string& scratch,
                                        const std::string& chart_dir, const std::string& chart_path) {
  const std::string chart_yaml = joinRelative(chart_dir, "Chart.yaml");
  const ChartDependencies dependencies = scanDependencies(chart_path, chart_yaml, request.limits);
  if (!buildsDependencies(dependencies, request)) {
    return PreparedChart{chart_path, chart_dir};
  }
  const std::string copy = scratch + "/chart";
  std::error_code ec;
  fs::copy(chart_path, copy, fs::copy_options::recursive, ec);
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot copy the chart " + chart_dir + ": " + ec.message(), "copy");
  }
  auto last_auth = addDependencyRepositories(binary, options, request, scratch, dependencies.repositories, chart_yaml);
  FLOTILLA_TRY(last_auth);
  FLOTILLA_TRY(fetchStep(binary, {"dependency", "build", copy, "--skip-refresh"}, scratch, request.limits,
                         "helm dependency build", chart_yaml, *last_auth));
  return PreparedChart{copy, chart_dir};
}

Result<std::string> resolveDependencyIdentity(const std::string& binary, const HelmRendererOptions& options,
                                              const RenderRequest& request, const std::string& scratch,
                                              const std::string& chart_dir, const std::string& chart_path) {
  const std::string chart_yaml = joinRelative(chart_dir, "Chart.yaml");
  const ChartDependencies dependencies = scanDependencies(chart_path, chart_yaml, request.limits);
  if (!buildsDependencies(dependencies, request)) {
    return std::string();  // nothing is fetched: charts/ (in the checkout) is what renders
  }
  FLOTILLA_TRY(addDependencyRepositories(binary, options, request, scratch, dependencies.repositories, chart_yaml));
  std::map<std::string, std::string> repo_names;  // URL -> dependency-<i>, as addDependencyRepositories named them
  for (const auto& repository : dependencies.repositories) {
    repo_names.emplace(repository, "dependency-" + std::to_string(repo_names.size()));
  }
  std::string identity;
  for (const auto& dependency : dependencies.all) {
    if (startsWith(dependency.repository, "file://")) {
      continue;  // inside the checkout: the render key has its files
    }
    auto repo_name = repo_names.find(dependency.repository);
    if (repo_name == repo_names.end()) {
      // oci:// or a repository alias ("@name"): nothing here resolves those without fetching the chart.
      return fail(ErrorKind::kPermanent,
                  chart_yaml + ": dependency \"" + dependency.name + "\" from \"" + dependency.repository +
                      "\" cannot be resolved to a digest",
                  chart_yaml);
    }
    auto version =
        resolveChartVersion(binary, repo_name->second, dependency.name, dependency.version, dependency.repository,
                            scratch, request.limits, chart_yaml, "dependencies[].name");
    FLOTILLA_TRY(version);
    const std::string digest = indexDigest(scratch, repo_name->second, dependency.name, *version, request.limits);
    if (digest.empty()) {
      return fail(ErrorKind::kPermanent,
                  chart_yaml + ": the index of " + dependency.repository + " names no digest for " + dependency.name +
                      " " + *version,
                  chart_yaml);
    }
    identityFields(identity, {dependency.repository, dependency.name, *version, digest});
  }
  return identity;
}

}  // namespace flotilla::render::detail
