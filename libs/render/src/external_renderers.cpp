#include "flotilla/render/external_renderers.h"

#include <array>
#include <filesystem>
#include <functional>
#include <mutex>
#include <regex>
#include <set>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flotilla/core/json.h"
#include "flotilla/core/log.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/render/discovery.h"
#include "flotilla/secrets/secret_store.h"
#include "flotilla/source/archive.h"

namespace flotilla::render {
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

//! The environment of a fetch step: its own HOME, caches and Helm repository config, the network allowed.
std::map<std::string, std::string> networkEnv(const std::string& scratch) {
  return {{"HOME", scratch},
          {"XDG_CACHE_HOME", scratch + "/cache"},
          {"XDG_CONFIG_HOME", scratch + "/config"},
          {"XDG_DATA_HOME", scratch + "/data"},
          {"HELM_CACHE_HOME", scratch + "/helm/cache"},
          {"HELM_CONFIG_HOME", scratch + "/helm/config"},
          {"HELM_DATA_HOME", scratch + "/helm/data"},
          {"GIT_TERMINAL_PROMPT", "0"},
          {"KUBECONFIG", scratch + "/no-kubeconfig"}};
}

//! The environment of a renderer: as a fetch step's, and no way out to the network.
std::map<std::string, std::string> sandboxEnv(const std::string& scratch) {
  const std::string closed = "http://127.0.0.1:9";
  auto env = networkEnv(scratch);
  for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}) {
    env[name] = closed;
  }
  env["NO_PROXY"] = "";
  env["no_proxy"] = "";
  return env;
}

std::string lastLines(std::string_view text, size_t max_chars = 2000) {
  std::string out = trim(text);
  if (out.size() > max_chars) {
    out = "..." + out.substr(out.size() - max_chars);
  }
  return out;
}

enum class Network { kOffline, kAllowed };

Result<CommandResult> run(const std::string& binary, std::vector<std::string> args, const std::string& scratch,
                          const RenderLimits& limits, const std::string& what, Network network = Network::kOffline,
                          std::string input = {}) {
  args.insert(args.begin(), binary);
  auto result = runCommand({.argv = std::move(args),
                            .env = network == Network::kAllowed ? networkEnv(scratch) : sandboxEnv(scratch),
                            .cwd = scratch,
                            .input = std::move(input),
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

//! Symlinks under `relative` (a directory of the checkout) that resolve outside it: refused before a tool that
//! follows links (helm, kustomize) reads the directory.
Status checkLinksInside(const std::string& root, const std::string& relative) {
  std::error_code ec;
  const std::string base = root + "/" + relative;
  for (fs::recursive_directory_iterator it(base, fs::directory_options::none, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!it->is_symlink(ec)) {
      continue;
    }
    const std::string link = joinRelative(relative, it->path().lexically_relative(base).string());
    if (!source::resolveInside(root, link).ok()) {
      return fail(ErrorKind::kInvalid, link + ": symlink resolves outside the repository checkout", link);
    }
  }
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot list " + relative + ": " + ec.message(), "recursive_directory_iterator");
  }
  return {};
}

//! kustomize reads bases and components wherever they point (its load restrictor only covers files), so every
//! kustomization reachable from `dir` is checked first: local `resources`, `bases` and `components` must stay
//! inside the checkout (no absolute paths, no climbing out, no symlinks out), recursively. Remote entries (URLs)
//! are left to kustomize, which cannot reach the network.
Status checkKustomizationInside(const std::string& root, const std::string& dir, std::set<std::string>& visited) {
  if (!visited.insert(dir).second || visited.size() > 1000) {
    return {};
  }
  FLOTILLA_TRY(checkLinksInside(root, dir));
  std::string file;
  for (const char* name : {"kustomization.yaml", "kustomization.yml", "Kustomization"}) {
    std::error_code ec;
    if (fs::is_regular_file(root + "/" + joinRelative(dir, name), ec)) {
      file = joinRelative(dir, name);
      break;
    }
  }
  if (file.empty()) {
    return {};
  }
  auto text = readFile(root + "/" + file);
  if (!text.ok()) {
    return {};  // kustomize reports it
  }
  auto parsed = parseYaml(*text, file);
  if (!parsed.ok() || !parsed->isObject()) {
    return {};  // kustomize reports it, with its own message
  }
  for (const char* field : {"resources", "bases", "components"}) {
    const Json* entries = parsed->find(field);
    if (entries == nullptr || !entries->isArray()) {
      continue;
    }
    for (const auto& entry : entries->asArray()) {
      if (!entry.isString() || entry.asString().find("://") != std::string::npos) {
        continue;
      }
      const std::string& named = entry.asString();
      const std::string target = joinRelative(dir, named);
      if (startsWith(named, "/") || target == ".." || startsWith(target, "../") ||
          !source::resolveInside(root, target).ok()) {
        std::string message = file;
        message.append(": ").append(field).append(" entry \"").append(named);
        message += "\" is outside the repository checkout";
        return fail(ErrorKind::kInvalid, std::move(message), file);
      }
      std::error_code ec;
      if (fs::is_directory(std::string(root).append("/").append(target), ec)) {
        FLOTILLA_TRY(checkKustomizationInside(root, target, visited));
      }
    }
  }
  return {};
}

std::string scrub(std::string text, const std::string& secret) {
  if (secret.empty()) {
    return text;
  }
  for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
    text.replace(at, secret.size(), "[REDACTED]");
  }
  return text;
}

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

Result<RepoAuth> authFor(const std::string& url, const HelmRepoAccess& access, const std::string& credentials_dir,
                         const std::string& scratch, const std::string& fleet_yaml) {
  RepoAuth auth;
  auth.insecure = access.insecure_skip_tls_verify;
  if (access.secret_name.empty()) {
    return auth;
  }
  if (!access.repo_url_regex.empty()) {
    try {
      if (!std::regex_search(url, std::regex(access.repo_url_regex))) {
        return auth;
      }
    } catch (const std::regex_error&) {
      return fail(ErrorKind::kInvalid,
                  fleet_yaml + ": the GitRepo's helmRepoURLRegex is not a valid regular expression", fleet_yaml);
    }
  }
  const std::string what = "helmSecretName \"" + access.secret_name + "\"";
  if (credentials_dir.empty()) {
    return fail(ErrorKind::kInvalid,
                fleet_yaml + ": " + what + " is set but the bundler runs without --credentials-dir", fleet_yaml);
  }
  auto secret = secrets::readSecret(credentials_dir, access.secret_name);
  if (!secret.ok()) {
    return fail(ErrorKind::kInvalid, fleet_yaml + ": " + what + ": " + secret.error().message, fleet_yaml);
  }
  std::string token;
  std::string ca_bundle;
  for (const auto& [key, value] : *secret) {
    if (key == "username") {
      auth.username = trim(value);
    } else if (key == "password") {
      auth.password = trim(value);
    } else if (key == "token") {
      token = trim(value);
    } else if (key == "cacerts") {
      ca_bundle = value;
    } else {
      return fail(
          ErrorKind::kInvalid,
          fleet_yaml + ": " + what + " has unknown key \"" + key + "\" (expected username, password, token or cacerts)",
          fleet_yaml);
    }
  }
  if (auth.password.empty()) {
    auth.password = token;
  }
  if (!ca_bundle.empty()) {
    auth.ca_file = scratch + "/repo-ca.pem";
    FLOTILLA_TRY(writeFile(auth.ca_file, ca_bundle, 0600));
  }
  return auth;
}

//! Runs a fetch step (network allowed); a failure is the bundle's (kInvalid) with helm's message.
Result<CommandResult> fetchStep(const std::string& binary, std::vector<std::string> args, const std::string& scratch,
                                const RenderLimits& limits, const std::string& what, const std::string& where,
                                const RepoAuth& auth, std::string input = {}) {
  auto result = run(binary, std::move(args), scratch, limits, what, Network::kAllowed, std::move(input));
  if (!result.ok()) {
    return fail(result.error());
  }
  if (result->timed_out) {
    return fail(ErrorKind::kInvalid,
                where + ": " + what + " did not finish within " + std::to_string(limits.timeout.count() / 1000) + "s",
                where);
  }
  if (result->exit_code != 0) {
    std::string message = scrub(lastLines(result->err.empty() ? result->out : result->err), auth.password);
    for (size_t at = message.find(scratch); at != std::string::npos; at = message.find(scratch)) {
      message.erase(at, scratch.size() + 1);
    }
    return fail(ErrorKind::kInvalid, where + ": " + what + " failed: " + message, where);
  }
  return result;
}

//! The only *.tgz in `dir`.
Result<std::string> pulledArchive(const std::string& dir, const std::string& where) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (endsWith(it->path().filename().string(), ".tgz")) {
      return it->path().string();
    }
  }
  return fail(ErrorKind::kInvalid, where + ": helm pull produced no chart archive", where);
}

Status checkArchiveSize(const std::string& path, const RenderLimits& limits, const std::string& where) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot stat " + path + ": " + ec.message(), "file_size");
  }
  if (size > limits.max_file_bytes) {
    return fail(ErrorKind::kInvalid,
                where + ": the chart archive is " + std::to_string(size) + " bytes, more than the limit of " +
                    std::to_string(limits.max_file_bytes) + " bytes",
                where);
  }
  return {};
}

//! `helm pull <reference...> --destination <scratch>/pull` with the repository's TLS settings, then the one archive
//! it wrote, checked against the size limit. Both chart paths (repository charts, URL/oci:// references) pull so.
Result<std::string> pullChartArchive(const std::string& binary, std::vector<std::string> reference,
                                     const std::string& scratch, const RenderLimits& limits, const std::string& chart,
                                     const std::string& fleet_yaml, const RepoAuth& auth) {
  const std::string destination = scratch + "/pull";
  fs::create_directories(destination);
  std::vector<std::string> pull = {"pull"};
  pull.insert(pull.end(), std::make_move_iterator(reference.begin()), std::make_move_iterator(reference.end()));
  pull.insert(pull.end(), {"--destination", destination});
  for (auto& flag : auth.tlsFlags()) {
    pull.push_back(std::move(flag));
  }
  FLOTILLA_TRY(fetchStep(binary, std::move(pull), scratch, limits, "helm pull " + chart, fleet_yaml, auth));
  auto archive = pulledArchive(destination, fleet_yaml);
  if (!archive.ok()) {
    return fail(archive.error());
  }
  FLOTILLA_TRY(checkArchiveSize(*archive, limits, fleet_yaml));
  return archive;
}

//! A chart ready for `helm template`: an archive or a directory, and how to name its files in errors.
struct PreparedChart {
  std::string path;   //!< absolute
  std::string label;  //!< what "# Source: <chart>/..." maps to (a checkout directory or "<name>-<version>")
};

//! name and version from a chart archive's Chart.yaml (`helm show chart`, offline).
Status describeArchive(const std::string& binary, const std::string& archive, const std::string& scratch,
                       const RenderLimits& limits, const std::string& where, RenderNotes& notes) {
  auto shown = run(binary, {"show", "chart", archive}, scratch, limits, "helm show chart");
  if (!shown.ok()) {
    return fail(shown.error());
  }
  if (shown->exit_code != 0 || shown->timed_out) {
    return fail(ErrorKind::kInvalid, where + ": the fetched chart is not a valid chart: " + lastLines(shown->err),
                where);
  }
  auto chart = parseYaml(shown->out, "Chart.yaml");
  if (!chart.ok() || !chart->isObject()) {
    return fail(ErrorKind::kInvalid, where + ": the fetched chart has no readable Chart.yaml", where);
  }
  notes.chart_version = chart->getString("version");
  if (notes.chart.empty()) {
    notes.chart = chart->getString("name");
  }
  return {};
}

std::string sha256OfFile(const std::string& path) {
  auto data = readFile(path);
  return data.ok() ? sha256Hex(*data) : std::string();
}

//! Copies a chart into the cache under `key` (atomically: concurrent renders may race to store the same chart).
void storeInCache(const std::string& cache_dir, const std::string& key, const std::string& archive) {
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  const std::string temp = cache_dir + "/." + key + "-" + randomHex(4);
  fs::copy_file(archive, temp, fs::copy_options::overwrite_existing, ec);
  if (!ec) {
    fs::rename(temp, cache_dir + "/" + key + ".tgz", ec);
  }
  if (ec) {
    log::warn("cannot store a pulled chart in the chart cache", {{"dir", cache_dir}, {"error", ec.message()}});
    removeAll(temp);
  }
}

//! helm.repo + helm.chart (+ helm.version): the repository's index resolves the version, the cache is looked up
//! by (repo, chart, version, digest), and only a miss downloads the archive.
Result<PreparedChart> fetchRepoChart(const std::string& binary, const HelmRendererOptions& options,
                                     const RenderRequest& request, const std::string& scratch,
                                     const std::string& fleet_yaml, RenderNotes& notes) {
  const auto& helm = *request.options.helm;
  const std::string repo = helm.repo;
  notes.chart = repo + " " + helm.chart;
  static const std::regex kChartName("[A-Za-z0-9_][A-Za-z0-9_.\\-]*");
  if (!std::regex_match(helm.chart, kChartName)) {
    return fail(ErrorKind::kInvalid,
                fleet_yaml + ": helm.chart \"" + helm.chart + "\" must be a chart name when helm.repo is set",
                fleet_yaml);
  }
  if (!startsWith(repo, "http://") && !startsWith(repo, "https://")) {
    return fail(ErrorKind::kInvalid, fleet_yaml + ": helm.repo \"" + repo + "\" must be an http:// or https:// URL",
                fleet_yaml);
  }
  auto auth = authFor(repo, request.helm_access, options.credentials_dir, scratch, fleet_yaml);
  if (!auth.ok()) {
    return fail(auth.error());
  }
  std::vector<std::string> add = {"repo", "add", "fleet-chart", repo, "--force-update"};
  std::string input;
  if (!auth->username.empty()) {
    add.insert(add.end(), {"--username", auth->username, "--password-stdin"});
    input = auth->password;
  }
  for (auto& flag : auth->tlsFlags()) {
    add.push_back(std::move(flag));
  }
  FLOTILLA_TRY(fetchStep(binary, std::move(add), scratch, request.limits, "helm repo add " + repo, fleet_yaml, *auth,
                         std::move(input)));
  // helm's search is a substring match (fleet-chart/demo also finds fleet-chart/demo-extra): the exact name is
  // picked from its result. With --version it returns the newest version matching the constraint.
  std::vector<std::string> search = {"search", "repo", "fleet-chart/" + helm.chart, "-o", "json"};
  if (!helm.version.empty()) {
    search.insert(search.end(), {"--version", helm.version});
  }
  auto found = run(binary, std::move(search), scratch, request.limits, "helm search repo");
  if (!found.ok()) {
    return fail(found.error());
  }
  auto listed = Json::parse(found->exit_code == 0 ? trim(found->out) : std::string("[]"));
  const Json* match = nullptr;
  if (listed.ok() && listed->isArray()) {
    for (const auto& entry : listed->asArray()) {
      if (entry.isObject() && entry.getString("name") == "fleet-chart/" + helm.chart) {
        match = &entry;
        break;
      }
    }
  }
  if (match == nullptr) {
    return fail(ErrorKind::kInvalid,
                fleet_yaml + ": helm.chart \"" + helm.chart + "\"" +
                    (helm.version.empty() ? std::string() : " version \"" + helm.version + "\"") +
                    " not found in the repository " + repo,
                fleet_yaml);
  }
  notes.chart_version = match->getString("version");
  // The index names the archive's digest: together with the version it identifies the chart for the cache.
  auto index_text = readFile(scratch + "/helm/cache/repository/fleet-chart-index.yaml");
  if (index_text.ok()) {
    auto index = parseYaml(*index_text, "index.yaml", YamlLimits{.max_input_bytes = request.limits.max_output_bytes});
    const Json* entries = index.ok() ? index->at({"entries", helm.chart}) : nullptr;
    if (entries != nullptr && entries->isArray()) {
      for (const auto& entry : entries->asArray()) {
        if (entry.isObject() && entry.getString("version") == notes.chart_version) {
          notes.chart_digest = entry.getString("digest");
        }
      }
    }
  }
  const std::string key = sha256Hex(repo + "\n" + helm.chart + "\n" + notes.chart_version + "\n" + notes.chart_digest);
  const std::string label = helm.chart + "-" + notes.chart_version;
  if (!options.chart_cache_dir.empty() && !notes.chart_digest.empty()) {
    const std::string cached = options.chart_cache_dir + "/" + key + ".tgz";
    std::error_code ec;
    if (fs::is_regular_file(cached, ec) && sha256OfFile(cached) == notes.chart_digest) {
      notes.chart_source = "cache";
      return PreparedChart{cached, label};
    }
  }
  // The repository entry carries the credentials; helm pull still needs the TLS settings of its own.
  auto archive = pullChartArchive(binary, {"fleet-chart/" + helm.chart, "--version", notes.chart_version}, scratch,
                                  request.limits, helm.chart, fleet_yaml, *auth);
  if (!archive.ok()) {
    return fail(archive.error());
  }
  const std::string digest = sha256OfFile(*archive);
  if (!notes.chart_digest.empty() && digest != notes.chart_digest) {
    return fail(ErrorKind::kInvalid,
                fleet_yaml + ": the chart archive of " + label + " does not match the digest in the repository index",
                fleet_yaml);
  }
  notes.chart_digest = digest;
  notes.chart_source = "pulled";
  if (!options.chart_cache_dir.empty()) {
    storeInCache(options.chart_cache_dir, key, *archive);
  }
  return PreparedChart{*archive, label};
}

//! helm.chart as a chart archive URL or an oci:// reference: pulled on every render (its digest is only known
//! after the download), then described offline for the version.
Result<PreparedChart> fetchChartReference(const std::string& binary, const HelmRendererOptions& options,
                                          const RenderRequest& request, const std::string& scratch,
                                          const std::string& fleet_yaml, RenderNotes& notes) {
  const auto& helm = *request.options.helm;
  notes.chart = helm.chart;
  if (!startsWith(helm.chart, "https://") && !startsWith(helm.chart, "http://") && !startsWith(helm.chart, "oci://")) {
    return fail(ErrorKind::kInvalid,
                fleet_yaml + ": helm.chart \"" + helm.chart +
                    "\": only https://, http:// and oci:// chart references are supported",
                fleet_yaml);
  }
  auto auth = authFor(helm.chart, request.helm_access, options.credentials_dir, scratch, fleet_yaml);
  if (!auth.ok()) {
    return fail(auth.error());
  }
  const bool oci = startsWith(helm.chart, "oci://");
  std::vector<std::string> reference = {helm.chart};
  if (oci && !helm.version.empty()) {
    reference.insert(reference.end(), {"--version", helm.version});
  }
  if (!auth->username.empty()) {
    reference.insert(reference.end(), {"--username", auth->username, "--password", auth->password});
  }
  auto archive = pullChartArchive(binary, std::move(reference), scratch, request.limits, helm.chart, fleet_yaml, *auth);
  if (!archive.ok()) {
    return fail(archive.error());
  }
  notes.chart_digest = sha256OfFile(*archive);
  notes.chart_source = "pulled";
  RenderNotes described;
  FLOTILLA_TRY(describeArchive(binary, *archive, scratch, request.limits, fleet_yaml, described));
  notes.chart_version = described.chart_version;
  return PreparedChart{*archive, described.chart + "-" + described.chart_version};
}

//! A local chart whose Chart.yaml declares dependencies missing from charts/: a copy of it (the checkout is
//! shared by the bundles of the commit) gets `helm dependency build` with the repositories it names.
Result<PreparedChart> buildDependencies(const std::string& binary, const HelmRendererOptions& options,
                                        const RenderRequest& request, const std::string& scratch,
                                        const std::string& chart_dir, const std::string& chart_path) {
  const std::string chart_yaml = joinRelative(chart_dir, "Chart.yaml");
  auto text = readFile(chart_path + "/Chart.yaml");
  if (!text.ok()) {
    return PreparedChart{chart_path, chart_dir};  // helm template reports it
  }
  auto chart = parseYaml(*text, chart_yaml, YamlLimits{.max_input_bytes = request.limits.max_file_bytes});
  const Json* dependencies = chart.ok() ? chart->find("dependencies") : nullptr;
  if (dependencies == nullptr || !dependencies->isArray() || dependencies->asArray().empty()) {
    return PreparedChart{chart_path, chart_dir};
  }
  std::error_code ec;
  bool missing = false;
  std::set<std::string> repositories;
  for (const auto& dependency : dependencies->asArray()) {
    if (!dependency.isObject()) {
      continue;
    }
    const std::string name = dependency.getString("name");
    const std::string repository = dependency.getString("repository");
    if (startsWith(repository, "http://") || startsWith(repository, "https://")) {
      repositories.insert(repository);
    }
    bool vendored = fs::is_directory(std::string(chart_path).append("/charts/").append(name), ec);
    for (fs::directory_iterator it(chart_path + "/charts", ec); !vendored && !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      const std::string file = it->path().filename().string();
      vendored = startsWith(file, name + "-") && endsWith(file, ".tgz");
    }
    missing = missing || !vendored;
  }
  if (!missing || request.options.helm->disable_dependency_update) {
    return PreparedChart{chart_path, chart_dir};
  }
  const std::string copy = scratch + "/chart";
  fs::copy(chart_path, copy, fs::copy_options::recursive, ec);
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot copy the chart " + chart_dir + ": " + ec.message(), "copy");
  }
  RepoAuth last_auth;
  int index = 0;
  for (const auto& repository : repositories) {
    auto auth = authFor(repository, request.helm_access, options.credentials_dir, scratch, chart_yaml);
    if (!auth.ok()) {
      return fail(auth.error());
    }
    std::vector<std::string> add = {"repo", "add", "dependency-" + std::to_string(index++), repository,
                                    "--force-update"};
    std::string input;
    if (!auth->username.empty()) {
      add.insert(add.end(), {"--username", auth->username, "--password-stdin"});
      input = auth->password;
    }
    for (auto& flag : auth->tlsFlags()) {
      add.push_back(std::move(flag));
    }
    FLOTILLA_TRY(fetchStep(binary, std::move(add), scratch, request.limits, "helm repo add " + repository, chart_yaml,
                           *auth, std::move(input)));
    last_auth = *auth;
  }
  FLOTILLA_TRY(fetchStep(binary, {"dependency", "build", copy, "--skip-refresh"}, scratch, request.limits,
                         "helm dependency build", chart_yaml, last_auth));
  return PreparedChart{copy, chart_dir};
}

//! Serialises post-renders of one kustomization directory (they write into the shared checkout): striped locks
//! by path, so unrelated directories rarely wait and nothing grows with the number of checkouts.
std::mutex& postRenderLock(const std::string& dir) {
  static std::array<std::mutex, 64> locks;
  return locks[std::hash<std::string>{}(dir) % locks.size()];
}

constexpr std::string_view kPostRenderManifests = "fleet-manifests.yaml";

//! Fleet's Helm post-render: helm's output becomes a resource of the bundle's kustomization.
Result<std::vector<RenderedObject>> postRender(const std::string& kustomize_binary, const RenderRequest& request,
                                               const std::string& kustomize_dir, const std::string& helm_output,
                                               const std::string& scratch) {
  const std::string kustomization = joinRelative(kustomize_dir, "kustomization.yaml");
  auto path = source::resolveInside(request.root, kustomize_dir);
  if (!path.ok()) {
    return fail(ErrorKind::kInvalid, kustomization + ": resolves outside the repository checkout", kustomization);
  }
  std::set<std::string> visited;
  FLOTILLA_TRY(checkKustomizationInside(request.root, kustomize_dir, visited));
  std::lock_guard lock(postRenderLock(*path));
  const std::string file = *path + "/kustomization.yaml";
  auto original = readFile(file);
  if (!original.ok()) {
    return fail(ErrorKind::kInternal, "cannot read " + kustomization + ": " + original.error().message, "readFile");
  }
  const std::string manifests = *path + "/" + std::string(kPostRenderManifests);
  std::error_code ec;
  const bool had_manifests = fs::exists(manifests, ec);
  struct Restore {
    std::string file, text, manifests;
    bool had_manifests;
    ~Restore() {
      (void)writeFile(file, text);
      if (!had_manifests) {
        removeAll(manifests);
      }
    }
  } restore{file, *original, manifests, had_manifests};
  if (!trim(helm_output).empty()) {
    auto parsed = parseYaml(*original, kustomization, YamlLimits{.max_input_bytes = request.limits.max_file_bytes});
    if (!parsed.ok()) {
      return fail(ErrorKind::kInvalid, parsed.error().message, kustomization);
    }
    Json document = parsed->isObject() ? *parsed : Json::object();
    Json resources = Json::array();
    resources.push(std::string(kPostRenderManifests));
    if (const Json* listed = document.find("resources"); listed != nullptr && listed->isArray()) {
      for (const auto& resource : listed->asArray()) {
        if (!(resource == Json(std::string(kPostRenderManifests)))) {
          resources.push(resource);
        }
      }
    }
    document["resources"] = std::move(resources);
    FLOTILLA_TRY(writeFile(manifests, helm_output));
    FLOTILLA_TRY(writeFile(file, toYaml(document)));
  }
  auto result = run(kustomize_binary, {"build", *path}, scratch, request.limits, "kustomize build");
  if (!result.ok()) {
    return fail(result.error());
  }
  if (result->timed_out || result->exit_code != 0) {
    std::string text = result->timed_out ? std::string("did not finish in time")
                                         : lastLines(result->err.empty() ? result->out : result->err);
    for (size_t at = text.find(request.root + "/"); at != std::string::npos; at = text.find(request.root + "/")) {
      text.erase(at, request.root.size() + 1);
    }
    return fail(ErrorKind::kInvalid, kustomization + ": kustomize build (post-rendering the chart) failed: " + text,
                kustomization);
  }
  return parseManifestText(result->out, kustomization, request.limits.max_output_bytes);
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

bool isRemoteChart(const model::HelmOptions& helm) {
  return !helm.repo.empty() || helm.chart.find("://") != std::string::npos || startsWith(helm.chart, "oci:");
}

HelmRepoAccess helmRepoAccessOf(const model::GitRepo& gitrepo) {
  return HelmRepoAccess{gitrepo.spec.helm_secret_name, gitrepo.spec.helm_repo_url_regex,
                        gitrepo.spec.insecure_skip_tls_verify};
}

Result<std::vector<RenderedObject>> HelmRenderer::render(const RenderRequest& request) const {
  const auto& helm = request.options.helm;
  const std::string fleet_yaml = joinRelative(request.bundle_path, "fleet.yaml");
  auto scratch = Scratch::create(request.root, "helm");
  if (!scratch.ok()) {
    return fail(scratch.error());
  }
  RenderNotes notes;
  Result<PreparedChart> chart = fail(ErrorKind::kInternal, "no chart");
  if (helm && isRemoteChart(*helm)) {
    chart = !helm->repo.empty() ? fetchRepoChart(binary_, options_, request, scratch->dir(), fleet_yaml, notes)
                                : fetchChartReference(binary_, options_, request, scratch->dir(), fleet_yaml, notes);
  } else {
    const std::string chart_dir = joinRelative(request.bundle_path, helm && !helm->chart.empty() ? helm->chart : ".");
    auto chart_path = source::resolveInside(request.root, chart_dir);
    if (!chart_path.ok() || !isDirectory(*chart_path)) {
      return fail(ErrorKind::kInvalid, fleet_yaml + ": helm.chart: no chart directory \"" + chart_dir + "\"",
                  fleet_yaml);
    }
    FLOTILLA_TRY(checkLinksInside(request.root, chart_dir));
    chart = buildDependencies(binary_, options_, request, scratch->dir(), chart_dir, *chart_path);
  }
  if (!chart.ok()) {
    return fail(chart.error());
  }
  if (request.notes != nullptr) {
    *request.notes = notes;
  }
  const std::string& chart_dir = chart->label;
  std::string release = helm && !helm->release_name.empty() ? helm->release_name : request.bundle_id;
  std::string ns = !request.options.target_namespace.empty()    ? request.options.target_namespace
                   : !request.options.default_namespace.empty() ? request.options.default_namespace
                                                                : std::string("default");
  std::vector<std::string> args = {"template", release,          chart->path,   "--namespace",
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
  // Per-cluster rendering: .Capabilities.KubeVersion / .APIVersions of the target cluster.
  if (!request.kube_version.empty()) {
    args.insert(args.end(), {"--kube-version", request.kube_version});
  }
  for (const auto& api_version : request.api_versions) {
    args.insert(args.end(), {"--api-versions", api_version});
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
  auto objects = parseHelmOutput(result->out, chart_dir, request.limits.max_output_bytes);
  if (!objects.ok() || options_.kustomize_binary.empty()) {
    return objects;
  }
  const std::string kustomize_dir = joinRelative(
      request.bundle_path,
      request.options.kustomize && !request.options.kustomize->dir.empty() ? request.options.kustomize->dir : ".");
  auto kustomization = source::resolveInside(request.root, joinRelative(kustomize_dir, "kustomization.yaml"));
  struct stat info {};
  if (!kustomization.ok() || ::stat(kustomization->c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return objects;
  }
  return postRender(options_.kustomize_binary, request, kustomize_dir, objects->empty() ? std::string() : result->out,
                    scratch->dir());
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
  std::set<std::string> visited;
  FLOTILLA_TRY(checkKustomizationInside(request.root, dir, visited));
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

}  // namespace flotilla::render
