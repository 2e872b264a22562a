#include "flotilla/bundler/external_renderers.h"

#include <filesystem>
#include <regex>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flotilla/bundler/discovery.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/source/archive.h"

namespace flotilla::bundler {
namespace fs = std::filesystem;

namespace {

//! A scratch directory next to the checkout (inside the commit's work directory), removed on destruction.
class Scratch {
 public:
  static Result<Scratch> create(const std::string& root, std::string_view prefix) {
    std::string pattern = fs::path(root).parent_path().string() + "/" + std::string(prefix) + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      return fail(ErrorKind::kInternal, "cannot create a scratch directory next to " + root, "mkdtemp");
    }
    return Scratch(pattern);
  }
  Scratch(Scratch&& other) noexcept : dir_(std::exchange(other.dir_, {})) {}
  Scratch& operator=(Scratch&&) = delete;
  Scratch(const Scratch&) = delete;
  ~Scratch() {
    if (!dir_.empty()) {
      removeAll(dir_);
    }
  }
  [[nodiscard]] const std::string& dir() const { return dir_; }

 private:
  explicit Scratch(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

//! The environment of a renderer: its own HOME and caches, and no way out to the network.
std::map<std::string, std::string> sandboxEnv(const std::string& scratch) {
  const std::string closed = "http://127.0.0.1:9";
  return {{"HOME", scratch},
          {"XDG_CACHE_HOME", scratch + "/cache"},
          {"XDG_CONFIG_HOME", scratch + "/config"},
          {"XDG_DATA_HOME", scratch + "/data"},
          {"HELM_CACHE_HOME", scratch + "/helm/cache"},
          {"HELM_CONFIG_HOME", scratch + "/helm/config"},
          {"HELM_DATA_HOME", scratch + "/helm/data"},
          {"HTTP_PROXY", closed},
          {"HTTPS_PROXY", closed},
          {"http_proxy", closed},
          {"https_proxy", closed},
          {"NO_PROXY", ""},
          {"no_proxy", ""},
          {"GIT_TERMINAL_PROMPT", "0"},
          {"KUBECONFIG", scratch + "/no-kubeconfig"}};
}

std::string lastLines(std::string_view text, size_t max_chars = 2000) {
  std::string out = trim(text);
  if (out.size() > max_chars) {
    out = "..." + out.substr(out.size() - max_chars);
  }
  return out;
}

Result<CommandResult> run(const std::string& binary, std::vector<std::string> args, const std::string& scratch,
                          const RenderLimits& limits, const std::string& what) {
  args.insert(args.begin(), binary);
  auto result = runCommand({.argv = std::move(args),
                            .env = sandboxEnv(scratch),
                            .cwd = scratch,
                            .timeout = limits.timeout,
                            .max_output_bytes = limits.max_output_bytes + (1u << 20)});
  if (!result.ok()) {
    return fail(ErrorKind::kInternal, "cannot run " + binary + ": " + result.error().message, what);
  }
  return result;
}

bool isDirectory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(fs::status(path, ec));
}

//! Maps "mychart/templates/x.yaml" (helm's # Source) to "<chart_dir>/templates/x.yaml".
std::string mapSource(const std::string& source, const std::string& chart_dir) {
  auto slash = source.find('/');
  return slash == std::string::npos ? joinRelative(chart_dir, source)
                                    : joinRelative(chart_dir, source.substr(slash + 1));
}

//! helm's error text names "<chart>/templates/x.yaml:12:3"; point the error at that file of the repository.
Error helmError(const std::string& stderr_text, const std::string& chart_dir) {
  static const std::regex kLocation(R"(([A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)+\.(?:yaml|yml|tpl|txt|json)):(\d+))");
  std::smatch match;
  std::string message = "helm template failed: " + lastLines(stderr_text);
  std::string where = joinRelative(chart_dir, "Chart.yaml");
  if (std::regex_search(stderr_text, match, kLocation)) {
    where = mapSource(match[1].str(), chart_dir) + ":" + match[2].str();
  }
  return makeError(ErrorKind::kInvalid, where + ": " + message, where);
}

}  // namespace

std::string findExecutable(std::string_view name) {
  auto executable = [](const std::string& path) {
    struct stat info {};
    return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
  };
  if (name.empty()) {
    return {};
  }
  if (name.find('/') != std::string_view::npos) {
    return executable(std::string(name)) ? std::string(name) : std::string();
  }
  const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): nothing sets the environment
  for (const auto& dir : split(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + std::string(name);
    if (executable(candidate)) {
      return candidate;
    }
  }
  return {};
}

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

Result<std::vector<RenderedObject>> HelmRenderer::render(const RenderRequest& request) const {
  const auto& helm = request.options.helm;
  const std::string fleet_yaml = joinRelative(request.bundle_path, "fleet.yaml");
  if (helm &&
      (!helm->repo.empty() || helm->chart.find("://") != std::string::npos || startsWith(helm->chart, "oci:"))) {
    return fail(ErrorKind::kInvalid,
                fleet_yaml +
                    ": remote Helm charts (helm.repo, chart URLs, oci://) are not supported yet; vendor the "
                    "chart into the repository",
                fleet_yaml);
  }
  const std::string chart_dir = joinRelative(request.bundle_path, helm && !helm->chart.empty() ? helm->chart : ".");
  auto chart_path = source::resolveInside(request.root, chart_dir);
  if (!chart_path.ok() || !isDirectory(*chart_path)) {
    return fail(ErrorKind::kInvalid, fleet_yaml + ": helm.chart: no chart directory \"" + chart_dir + "\"", fleet_yaml);
  }
  auto scratch = Scratch::create(request.root, "helm");
  if (!scratch.ok()) {
    return fail(scratch.error());
  }
  std::string release = helm && !helm->release_name.empty() ? helm->release_name : request.bundle_id;
  std::string ns = !request.options.target_namespace.empty()    ? request.options.target_namespace
                   : !request.options.default_namespace.empty() ? request.options.default_namespace
                                                                : std::string("default");
  std::vector<std::string> args = {"template", release,          *chart_path,   "--namespace",
                                   ns,         "--include-crds", "--skip-tests"};
  if (helm && helm->values && !helm->values->isNull()) {
    const std::string values_file = scratch->dir() + "/fleet-values.json";
    FLOTILLA_TRY(writeFile(values_file, helm->values->dump()));
    args.insert(args.end(), {"--values", values_file});
  }
  if (helm) {
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
  }
  auto result = run(binary_, std::move(args), scratch->dir(), request.limits, "helm template");
  if (!result.ok()) {
    return fail(result.error());
  }
  if (result->timed_out) {
    return fail(ErrorKind::kInvalid,
                chart_dir + ": helm template did not finish within " +
                    std::to_string(request.limits.timeout.count() / 1000) + "s",
                chart_dir);
  }
  if (result->exit_code != 0) {
    return fail(helmError(result->err.empty() ? result->out : result->err, chart_dir));
  }
  if (result->out.size() > request.limits.max_output_bytes) {
    return fail(
        ErrorKind::kInvalid,
        chart_dir + ": the chart renders more than " + std::to_string(request.limits.max_output_bytes) + " bytes",
        chart_dir);
  }
  return parseHelmOutput(result->out, chart_dir, request.limits.max_output_bytes);
}

Result<std::vector<RenderedObject>> KustomizeRenderer::render(const RenderRequest& request) const {
  const auto& kustomize = request.options.kustomize;
  const std::string dir =
      joinRelative(request.bundle_path, kustomize && !kustomize->dir.empty() ? kustomize->dir : ".");
  const std::string kustomization = joinRelative(dir, "kustomization.yaml");
  auto path = source::resolveInside(request.root, dir);
  if (!path.ok() || !isDirectory(*path)) {
    const std::string fleet_yaml = joinRelative(request.bundle_path, "fleet.yaml");
    return fail(ErrorKind::kInvalid, fleet_yaml + ": kustomize.dir: no directory \"" + dir + "\"", fleet_yaml);
  }
  auto scratch = Scratch::create(request.root, "kustomize");
  if (!scratch.ok()) {
    return fail(scratch.error());
  }
  auto result = run(binary_, {"build", *path}, scratch->dir(), request.limits, "kustomize build");
  if (!result.ok()) {
    return fail(result.error());
  }
  if (result->timed_out) {
    return fail(ErrorKind::kInvalid,
                kustomization + ": kustomize build did not finish within " +
                    std::to_string(request.limits.timeout.count() / 1000) + "s",
                kustomization);
  }
  if (result->exit_code != 0) {
    // kustomize names absolute paths; show them relative to the checkout.
    std::string text = lastLines(result->err.empty() ? result->out : result->err);
    for (size_t at = text.find(request.root + "/"); at != std::string::npos; at = text.find(request.root + "/")) {
      text.erase(at, request.root.size() + 1);
    }
    return fail(ErrorKind::kInvalid, kustomization + ": kustomize build failed: " + text, kustomization);
  }
  if (result->out.size() > request.limits.max_output_bytes) {
    return fail(ErrorKind::kInvalid,
                kustomization + ": the kustomization renders more than " +
                    std::to_string(request.limits.max_output_bytes) + " bytes",
                kustomization);
  }
  return parseManifestText(result->out, kustomization, request.limits.max_output_bytes);
}

}  // namespace flotilla::bundler
