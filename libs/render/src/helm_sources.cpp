// Helm chart sources: repository charts (resolved, digest-checked, cached), chart URLs and oci:// references, and the
// repository access they share with chart_dependencies.cpp (helm_repo.h). Fetch steps may use the network; rendering
// never.
#include <filesystem>
#include <initializer_list>

#include "flotilla/core/ascii.h"
#include "flotilla/core/json.h"
#include "flotilla/core/log.h"
#include "flotilla/core/yaml.h"
#include "flotilla/secrets/secret_store.h"
#include "helm_repo.h"
#include "text_scan.h"
#include "tool_run.h"
#include "url_pattern.h"

namespace flotilla::render::detail {
namespace fs = std::filesystem;

namespace {

bool isPlainHttp(std::string_view url) {
  return url.size() >= 7 && toLowerAscii(url.substr(0, 7)) == "http://";
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

//! helm.repo and helm.chart must name a repository URL and a chart in it.
Status checkRepoChart(const model::HelmOptions& helm, const std::string& fleet_yaml) {
  if (!isChartName(helm.chart)) {
    return fail(ErrorKind::kInvalid,
                fleet_yaml + ": helm.chart \"" + helm.chart + "\" must be a chart name when helm.repo is set",
                fleet_yaml);
  }
  if (!startsWith(helm.repo, "http://") && !startsWith(helm.repo, "https://")) {
    return fail(ErrorKind::kInvalid,
                fleet_yaml + ": helm.repo \"" + helm.repo + "\" must be an http:// or https:// URL", fleet_yaml);
  }
  return {};
}

//! `helm registry login <host>` for an oci:// reference, the password on stdin; helm keeps the login in its registry
//! config (HELM_CONFIG_HOME, in the scratch dir) for the pull that follows.
Status loginToRegistry(const std::string& binary, const std::string& reference, const RepoAuth& auth,
                       const std::string& scratch, const RenderLimits& limits, const std::string& where) {
  const std::string rest = reference.substr(std::string_view("oci://").size());
  const std::string host = rest.substr(0, rest.find('/'));
  std::vector<std::string> login = {"registry", "login", host, "--username", auth.username, "--password-stdin"};
  if (!auth.ca_file.empty()) {
    login.insert(login.end(), {"--ca-file", auth.ca_file});
  }
  if (auth.insecure) {
    login.emplace_back("--insecure");
  }
  FLOTILLA_TRY(
      fetchStep(binary, std::move(login), scratch, limits, "helm registry login " + host, where, auth, auth.password));
  return {};
}

//! A chart archive URL with credentials: helm uses a repository entry's credentials for a URL that entry's cached
//! index lists (and only on that scheme and host), so the scratch dir gets a repository entry holding them (mode
//! 0600, as `helm repo add` writes it) and an index listing exactly this URL.
Status registerChartUrl(const std::string& url, const RepoAuth& auth, const std::string& scratch) {
  const std::string repo_url = url.substr(0, url.rfind('/'));
  Json entry = Json::obj({{"name", "fleet-chart-url"},
                          {"url", repo_url},
                          {"username", auth.username},
                          {"password", auth.password},
                          {"caFile", auth.ca_file},
                          {"insecure_skip_tls_verify", auth.insecure},
                          {"pass_credentials_all", false}});
  Json repositories = Json::array();
  repositories.push(std::move(entry));
  Json config = Json::obj({{"apiVersion", ""}, {"repositories", repositories}});
  Json urls = Json::array();
  urls.push(url);
  Json version = Json::obj({{"apiVersion", "v2"}, {"name", "fleet-chart-url"}, {"version", "0.0.0"}, {"urls", urls}});
  Json versions = Json::array();
  versions.push(std::move(version));
  Json index = Json::obj({{"apiVersion", "v1"}, {"entries", Json::obj({{"fleet-chart-url", versions}})}});
  std::error_code ec;
  fs::create_directories(scratch + "/helm/config", ec);
  fs::create_directories(scratch + "/helm/cache/repository", ec);
  // JSON is YAML: helm reads both files with its YAML parser.
  FLOTILLA_TRY(writeFile(scratch + "/helm/config/repositories.yaml", config.dump(), 0600));
  FLOTILLA_TRY(writeFile(scratch + "/helm/cache/repository/fleet-chart-url-index.yaml", index.dump(), 0600));
  return {};
}

//! The version of helm.repo/helm.chart that helm.version selects and the digest the repository's index names for
//! it, with the repository added to the scratch dir's helm config (its credentials in the entry) for a pull.
struct RepoChartVersion {
  std::string version;
  std::string digest;  //!< "" when the index names none
  RepoAuth auth;
};

Result<RepoChartVersion> resolveRepoChart(const std::string& binary, const HelmRendererOptions& options,
                                          const RenderRequest& request, const std::string& scratch,
                                          const std::string& fleet_yaml) {
  const auto& helm = *request.options.helm;
  FLOTILLA_TRY(checkRepoChart(helm, fleet_yaml));
  auto auth = authFor(helm.repo, "helm.repo", request.helm_access, options.credentials_dir, scratch, fleet_yaml);
  FLOTILLA_TRY(auth);
  FLOTILLA_TRY(addRepository(binary, "fleet-chart", helm.repo, *auth, scratch, request.limits, fleet_yaml));
  auto version = resolveChartVersion(binary, "fleet-chart", helm.chart, helm.version, helm.repo, scratch,
                                     request.limits, fleet_yaml, "helm.chart");
  FLOTILLA_TRY(version);
  RepoChartVersion out{.version = *version, .auth = std::move(auth).value()};
  out.digest = indexDigest(scratch, "fleet-chart", helm.chart, out.version, request.limits);
  return out;
}

}  // namespace

//! The credentials for repository `url` (named by `field` of `fleet_yaml` in errors): the GitRepo's helmSecretName
//! of its own workspace when helmRepoURLRegex matches. Never for a plain http:// URL unless the GitRepo allows it.
Result<RepoAuth> authFor(const std::string& url, std::string_view field, const HelmRepoAccess& access,
                         const std::string& credentials_dir, const std::string& scratch,
                         const std::string& fleet_yaml) {
  RepoAuth auth;
  auth.insecure = access.insecure_skip_tls_verify;
  if (access.secret_name.empty()) {
    return auth;
  }
  if (!access.repo_url_regex.empty()) {
    auto matches = urlPatternMatches(access.repo_url_regex, url);
    if (!matches.ok()) {
      return fail(ErrorKind::kInvalid, fleet_yaml + ": " + matches.error().message, fleet_yaml);
    }
    if (!*matches) {
      return auth;
    }
  }
  const std::string what = "helmSecretName \"" + access.secret_name + "\"";
  if (credentials_dir.empty()) {
    return fail(ErrorKind::kInvalid,
                fleet_yaml + ": " + what + " is set but the bundler runs without --credentials-dir", fleet_yaml);
  }
  if (isPlainHttp(url) && !access.allow_http) {
    std::string message = fleet_yaml;
    message.append(": ").append(field).append(" \"").append(url);
    message += "\" is a plain http:// URL and would send the credentials of " + what +
               " in clear; use https:// or set the GitRepo's spec.insecureAllowHTTP: true";
    return fail(ErrorKind::kInvalid, std::move(message), fleet_yaml);
  }
  auto secret = secrets::readSecret(credentials_dir, access.workspace, access.secret_name);
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
      std::string message = fleet_yaml;
      message.append(": ").append(what).append(" has unknown key \"").append(key);
      message += "\" (expected username, password, token or cacerts)";
      return fail(ErrorKind::kInvalid, std::move(message), fleet_yaml);
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
                                const RepoAuth& auth, std::string input) {
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
    const std::string message =
        withoutRoot(scrub(lastLines(result->err.empty() ? result->out : result->err), auth.password), scratch);
    return fail(ErrorKind::kInvalid, where + ": " + what + " failed: " + message, where);
  }
  return result;
}

//! `helm repo add <name> <url>` with the repository's credentials (password on stdin) and TLS settings.
Status addRepository(const std::string& binary, const std::string& name, const std::string& url, const RepoAuth& auth,
                     const std::string& scratch, const RenderLimits& limits, const std::string& where) {
  std::vector<std::string> add = {"repo", "add", name, url, "--force-update"};
  std::string input;
  if (!auth.username.empty()) {
    add.insert(add.end(), {"--username", auth.username, "--password-stdin"});
    input = auth.password;
  }
  for (auto& flag : auth.tlsFlags()) {
    add.push_back(std::move(flag));
  }
  FLOTILLA_TRY(
      fetchStep(binary, std::move(add), scratch, limits, "helm repo add " + url, where, auth, std::move(input)));
  return {};
}

//! The newest version of <repo_name>/<chart> matching `version` (a constraint; "" = the newest), from `helm search
//! repo`; helm's search is a substring match (fleet-chart/demo also finds fleet-chart/demo-extra), so the exact name
//! is picked from it. The error names `field` (helm.chart, dependencies[].name) and the repository `repo_url`.
Result<std::string> resolveChartVersion(const std::string& binary, const std::string& repo_name,
                                        const std::string& chart, const std::string& version,
                                        const std::string& repo_url, const std::string& scratch,
                                        const RenderLimits& limits, const std::string& where, std::string_view field) {
  const std::string qualified = repo_name + "/" + chart;
  std::vector<std::string> search = {"search", "repo", qualified, "-o", "json"};
  if (!version.empty()) {
    search.insert(search.end(), {"--version", version});
  }
  auto found = run(binary, std::move(search), scratch, limits, "helm search repo");
  FLOTILLA_TRY(found);
  auto listed = Json::parse(found->exit_code == 0 ? trim(found->out) : std::string("[]"));
  if (listed.ok() && listed->isArray()) {
    for (const auto& entry : listed->asArray()) {
      if (entry.isObject() && entry.getString("name") == qualified) {
        return entry.getString("version");
      }
    }
  }
  std::string message = where;
  message.append(": ").append(field).append(" \"").append(chart).append("\"");
  if (!version.empty()) {
    message += " version \"" + version + "\"";
  }
  message += " not found in the repository " + repo_url;
  return fail(ErrorKind::kInvalid, std::move(message), where);
}

//! The digest the cached index of repository `repo_name` names for `chart` at `version` ("" when it names none):
//! together with the version it identifies the chart (the chart cache's and the render cache's key).
std::string indexDigest(const std::string& scratch, const std::string& repo_name, const std::string& chart,
                        const std::string& version, const RenderLimits& limits) {
  auto index_text = readFile(scratch + "/helm/cache/repository/" + repo_name + "-index.yaml");
  if (!index_text.ok()) {
    return {};
  }
  auto index = parseYaml(*index_text, "index.yaml", YamlLimits{.max_input_bytes = limits.max_output_bytes});
  const Json* entries = index.ok() ? index->at({"entries", chart}) : nullptr;
  std::string digest;
  if (entries != nullptr && entries->isArray()) {
    for (const auto& entry : entries->asArray()) {
      if (entry.isObject() && entry.getString("version") == version) {
        digest = entry.getString("digest");
      }
    }
  }
  return digest;
}

//! Appends each value with its length in front: no two different lists of fields read the same.
void identityFields(std::string& out, std::initializer_list<std::string_view> values) {
  for (std::string_view value : values) {
    out += std::to_string(value.size());
    out += ':';
    out += value;
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
  auto resolved = resolveRepoChart(binary, options, request, scratch, fleet_yaml);
  FLOTILLA_TRY(resolved);
  notes.chart_version = resolved->version;
  notes.chart_digest = resolved->digest;
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
                                  request.limits, helm.chart, fleet_yaml, resolved->auth);
  FLOTILLA_TRY(archive);
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
  auto auth = authFor(helm.chart, "helm.chart", request.helm_access, options.credentials_dir, scratch, fleet_yaml);
  if (!auth.ok()) {
    return fail(auth.error());
  }
  const bool oci = startsWith(helm.chart, "oci://");
  std::vector<std::string> reference = {helm.chart};
  if (oci && !helm.version.empty()) {
    reference.insert(reference.end(), {"--version", helm.version});
  }
  if (!auth->username.empty()) {
    // helm pull takes a password only on its command line, where every local user can read it: the credentials
    // go to helm's own config files in the scratch dir instead (registry login reads the password on stdin).
    FLOTILLA_TRY(oci ? loginToRegistry(binary, helm.chart, *auth, scratch, request.limits, fleet_yaml)
                     : registerChartUrl(helm.chart, *auth, scratch));
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

Result<std::string> resolveRepoChartIdentity(const std::string& binary, const HelmRendererOptions& options,
                                             const RenderRequest& request, const std::string& scratch,
                                             const std::string& fleet_yaml) {
  auto resolved = resolveRepoChart(binary, options, request, scratch, fleet_yaml);
  FLOTILLA_TRY(resolved);
  const auto& helm = *request.options.helm;
  if (resolved->digest.empty()) {
    return fail(
        ErrorKind::kPermanent,
        fleet_yaml + ": the index of " + helm.repo + " names no digest for " + helm.chart + " " + resolved->version,
        fleet_yaml);
  }
  std::string identity;
  identityFields(identity, {helm.repo, helm.chart, resolved->version, resolved->digest});
  return identity;
}

Result<std::string> resolveChartReferenceIdentity(const std::string& binary, const HelmRendererOptions& options,
                                                  const RenderRequest& request, const std::string& scratch,
                                                  const std::string& fleet_yaml) {
  // Only the archive tells its digest: the pull is the resolution (a render after a miss pulls it again).
  RenderNotes notes;
  auto chart = fetchChartReference(binary, options, request, scratch, fleet_yaml, notes);
  FLOTILLA_TRY(chart);
  std::string identity;
  identityFields(identity, {request.options.helm->chart, request.options.helm->version, notes.chart_digest});
  return identity;
}

}  // namespace flotilla::render::detail
