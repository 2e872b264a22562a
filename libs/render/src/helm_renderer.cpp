// Helm: `helm template` of a bundle's chart (sources in helm_sources.cpp), its output split into objects by
// template file, and Fleet's kustomize post-render when the bundle has a kustomization.
#include <optional>

#include <sys/stat.h>

#include "flotilla/render/discovery.h"
#include "flotilla/source/archive.h"
#include "text_scan.h"
#include "tool_run.h"

namespace flotilla::render {

using detail::buildDependencies;
using detail::checkLinksInside;
using detail::fetchChartReference;
using detail::fetchRepoChart;
using detail::isDirectory;
using detail::lastLines;
using detail::postRender;
using detail::PreparedChart;
using detail::run;
using detail::Scratch;

namespace {

//! Maps "mychart/templates/x.yaml" (helm's # Source) to "<chart_dir>/templates/x.yaml".
std::string mapSource(const std::string& source, const std::string& chart_dir) {
  auto slash = source.find('/');
  return slash == std::string::npos ? joinRelative(chart_dir, source)
                                    : joinRelative(chart_dir, source.substr(slash + 1));
}

//! helm's error text names "<chart>/templates/x.yaml:12:3"; point the error at that file of the repository.
Error helmError(const std::string& stderr_text, const std::string& chart_dir) {
  std::string message = "helm template failed: " + lastLines(stderr_text);
  std::string where = joinRelative(chart_dir, "Chart.yaml");
  if (auto location = detail::findSourceLocation(stderr_text)) {
    where = mapSource(location->path, chart_dir) + ":" + location->line;
  }
  return makeError(ErrorKind::kInvalid, where + ": " + message, where);
}

}  // namespace

Result<std::vector<RenderedObject>> parseHelmOutput(std::string_view output, const std::string& chart_dir,
                                                    uint64_t max_bytes) {
  std::vector<RenderedObject> objects;
  std::string source = joinRelative(chart_dir, "Chart.yaml");
  std::string segment;
  auto flush = [&]() -> Status {
    if (trim(segment).empty()) {
      segment.clear();
      return {};
    }
    auto parsed = parseManifestText(segment, source, max_bytes);
    segment.clear();
    if (!parsed.ok()) {
      return fail(parsed.error());
    }
    for (auto& object : *parsed) {
      objects.push_back(std::move(object));
    }
    return {};
  };
  size_t start = 0;
  while (start <= output.size()) {
    size_t end = output.find('\n', start);
    std::string_view line = output.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (line == "---" || startsWith(line, "--- ")) {
      FLOTILLA_TRY(flush());
    } else if (startsWith(line, "# Source: ") && trim(segment).empty()) {
      source = mapSource(trim(line.substr(10)), chart_dir);
      segment.clear();
    } else {
      segment.append(line).push_back('\n');
    }
    if (end == std::string_view::npos) {
      break;
    }
    start = end + 1;
  }
  FLOTILLA_TRY(flush());
  return objects;
}

bool isRemoteChart(const model::HelmOptions& helm) {
  return !helm.repo.empty() || helm.chart.find("://") != std::string::npos || startsWith(helm.chart, "oci:");
}

std::vector<std::string> HelmRenderer::executables() const {
  std::vector<std::string> out = {binary_};
  if (!options_.kustomize_binary.empty()) {
    out.push_back(options_.kustomize_binary);
  }
  return out;
}

HelmRepoAccess helmRepoAccessOf(const model::GitRepo& gitrepo) {
  return HelmRepoAccess{gitrepo.spec.helm_secret_name, gitrepo.spec.helm_repo_url_regex,
                        gitrepo.spec.insecure_skip_tls_verify, gitrepo.metadata.ns, gitrepo.spec.insecure_allow_http};
}

namespace {

//! The checkout directory of a local chart: helm.chart (or ".") under the bundle.
std::string localChartDir(const RenderRequest& request) {
  const auto& helm = request.options.helm;
  return joinRelative(request.bundle_path, helm && !helm->chart.empty() ? helm->chart : ".");
}

//! The chart to template: fetched (repository, URL, oci://) or the bundle's local chart, dependencies built.
Result<PreparedChart> prepareChart(const std::string& binary, const HelmRendererOptions& options,
                                   const RenderRequest& request, const std::string& scratch,
                                   const std::string& fleet_yaml, RenderNotes& notes) {
  const auto& helm = request.options.helm;
  if (helm && isRemoteChart(*helm)) {
    return !helm->repo.empty() ? fetchRepoChart(binary, options, request, scratch, fleet_yaml, notes)
                               : fetchChartReference(binary, options, request, scratch, fleet_yaml, notes);
  }
  const std::string chart_dir = localChartDir(request);
  auto chart_path = source::resolveInside(request.root, chart_dir);
  if (!chart_path.ok() || !isDirectory(*chart_path)) {
    return fail(ErrorKind::kInvalid, fleet_yaml + ": helm.chart: no chart directory \"" + chart_dir + "\"", fleet_yaml);
  }
  FLOTILLA_TRY(checkLinksInside(request.root, chart_dir));
  return buildDependencies(binary, options, request, scratch, chart_dir, *chart_path);
}

//! `--values` for helm.values (written to the scratch dir) and each helm.valuesFiles entry (inside the bundle).
Status addValues(const RenderRequest& request, const std::string& scratch, const std::string& fleet_yaml,
                 std::vector<std::string>& args) {
  const auto& helm = request.options.helm;
  if (!helm) {
    return {};
  }
  if (helm->values && !helm->values->isNull()) {
    const std::string values_file = scratch + "/fleet-values.json";
    FLOTILLA_TRY(writeFile(values_file, helm->values->dump()));
    args.insert(args.end(), {"--values", values_file});
  }
  for (const auto& file : helm->values_files) {
    const std::string relative = joinRelative(request.bundle_path, file);
    auto resolved = source::resolveInside(request.root, relative);
    struct stat info {};
    if (!resolved.ok() || ::stat(resolved->c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
      std::string message = fleet_yaml;
      message += ": helm.valuesFiles: \"" + file + "\" is not a file of the bundle";
      return fail(ErrorKind::kInvalid, std::move(message), fleet_yaml);
    }
    if (static_cast<uint64_t>(info.st_size) > request.limits.max_file_bytes) {
      return fail(ErrorKind::kInvalid,
                  relative + ": file is " + std::to_string(info.st_size) + " bytes, more than the limit of " +
                      std::to_string(request.limits.max_file_bytes) + " bytes",
                  relative);
    }
    args.insert(args.end(), {"--values", *resolved});
  }
  return {};
}

//! The `helm template` command line: release, namespace, values, and the cluster's versions when rendering per
//! cluster (.Capabilities.KubeVersion / .APIVersions).
Result<std::vector<std::string>> templateArgs(const RenderRequest& request, const PreparedChart& chart,
                                              const std::string& scratch, const std::string& fleet_yaml) {
  const auto& helm = request.options.helm;
  std::string release = helm && !helm->release_name.empty() ? helm->release_name : request.bundle_id;
  std::string ns = !request.options.target_namespace.empty()    ? request.options.target_namespace
                   : !request.options.default_namespace.empty() ? request.options.default_namespace
                                                                : std::string("default");
  std::vector<std::string> args = {"template", release,          chart.path,    "--namespace",
                                   ns,         "--include-crds", "--skip-tests"};
  FLOTILLA_TRY(addValues(request, scratch, fleet_yaml, args));
  if (!request.kube_version.empty()) {
    args.insert(args.end(), {"--kube-version", request.kube_version});
  }
  for (const auto& api_version : request.api_versions) {
    args.insert(args.end(), {"--api-versions", api_version});
  }
  return args;
}

//! helm's output, or the bundle's error (timeout, template error naming its file, output over the limit).
Status checkTemplateResult(const CommandResult& result, const RenderRequest& request, const std::string& chart_dir) {
  if (result.timed_out) {
    return fail(ErrorKind::kInvalid,
                chart_dir + ": helm template did not finish within " +
                    std::to_string(request.limits.timeout.count() / 1000) + "s",
                chart_dir);
  }
  if (result.exit_code != 0) {
    return fail(helmError(result.err.empty() ? result.out : result.err, chart_dir));
  }
  if (result.out.size() > request.limits.max_output_bytes) {
    return fail(
        ErrorKind::kInvalid,
        chart_dir + ": the chart renders more than " + std::to_string(request.limits.max_output_bytes) + " bytes",
        chart_dir);
  }
  return {};
}

//! The bundle's kustomize directory when it has a kustomization.yaml (Fleet then post-renders helm's output).
std::optional<std::string> postRenderDir(const RenderRequest& request) {
  const std::string kustomize_dir = joinRelative(
      request.bundle_path,
      request.options.kustomize && !request.options.kustomize->dir.empty() ? request.options.kustomize->dir : ".");
  auto kustomization = source::resolveInside(request.root, joinRelative(kustomize_dir, "kustomization.yaml"));
  struct stat info {};
  if (!kustomization.ok() || ::stat(kustomization->c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return std::nullopt;
  }
  return kustomize_dir;
}

}  // namespace

Result<std::string> HelmRenderer::resolveRemoteInputs(const RenderRequest& request) const {
  // The same choice as prepareChart's, resolving instead of fetching.
  const std::string fleet_yaml = joinRelative(request.bundle_path, "fleet.yaml");
  auto scratch = Scratch::create(request.root, "helm-resolve");
  FLOTILLA_TRY(scratch);
  const auto& helm = request.options.helm;
  if (helm && isRemoteChart(*helm)) {
    return !helm->repo.empty()
               ? detail::resolveRepoChartIdentity(binary_, options_, request, scratch->dir(), fleet_yaml)
               : detail::resolveChartReferenceIdentity(binary_, options_, request, scratch->dir(), fleet_yaml);
  }
  const std::string chart_dir = localChartDir(request);
  auto chart_path = source::resolveInside(request.root, chart_dir);
  if (!chart_path.ok() || !isDirectory(*chart_path)) {
    return std::string();  // the render reports it
  }
  return detail::resolveDependencyIdentity(binary_, options_, request, scratch->dir(), chart_dir, *chart_path);
}

Result<std::vector<RenderedObject>> HelmRenderer::render(const RenderRequest& request) const {
  const std::string fleet_yaml = joinRelative(request.bundle_path, "fleet.yaml");
  auto scratch = Scratch::create(request.root, "helm");
  FLOTILLA_TRY(scratch);
  RenderNotes notes;
  auto chart = prepareChart(binary_, options_, request, scratch->dir(), fleet_yaml, notes);
  FLOTILLA_TRY(chart);
  if (request.notes != nullptr) {
    *request.notes = notes;
  }
  const std::string& chart_dir = chart->label;
  auto args = templateArgs(request, *chart, scratch->dir(), fleet_yaml);
  FLOTILLA_TRY(args);
  auto result = run(binary_, std::move(args).value(), scratch->dir(), request.limits, "helm template");
  FLOTILLA_TRY(result);
  FLOTILLA_TRY(checkTemplateResult(*result, request, chart_dir));
  auto objects = parseHelmOutput(result->out, chart_dir, request.limits.max_output_bytes);
  if (!objects.ok() || options_.kustomize_binary.empty()) {
    return objects;
  }
  auto kustomize_dir = postRenderDir(request);
  if (!kustomize_dir) {
    return objects;
  }
  return postRender(options_.kustomize_binary, request, *kustomize_dir, objects->empty() ? std::string() : result->out,
                    scratch->dir());
}

}  // namespace flotilla::render
