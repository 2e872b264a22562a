#include "flotilla/kube/client.h"

#include <array>
#include <utility>

#include "client_internal.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"

namespace flotilla::kube {
namespace {

using Clock = std::chrono::steady_clock;
using detail::appendQuery;
using detail::groupVersionPath;
using detail::parseBody;

constexpr std::array<std::pair<WatchEventType, std::string_view>, 4> kWatchEventNames{{
    {WatchEventType::kAdded, "ADDED"},
    {WatchEventType::kModified, "MODIFIED"},
    {WatchEventType::kDeleted, "DELETED"},
    {WatchEventType::kBookmark, "BOOKMARK"},
}};

std::string_view propagationName(Propagation p) {
  return p == Propagation::kForeground ? "Foreground" : (p == Propagation::kOrphan ? "Orphan" : "Background");
}

//! The query of one list page: selectors, page size and the continue token of the previous page.
std::string listTarget(const std::string& base, const ListOptions& options, const std::string& continue_token) {
  std::string target = base;
  if (!options.label_selector.empty()) {
    appendQuery(target, "labelSelector", options.label_selector);
  }
  if (!options.field_selector.empty()) {
    appendQuery(target, "fieldSelector", options.field_selector);
  }
  if (options.page_size > 0) {
    appendQuery(target, "limit", std::to_string(options.page_size));
  }
  if (!continue_token.empty()) {
    appendQuery(target, "continue", continue_token);
  }
  return target;
}

//! What apply needs of an object: apiVersion, kind and metadata.name, and a field manager to apply as.
Status checkApplicable(const Json& object, const ApplyOptions& options) {
  if (!object.isObject()) {
    return fail(ErrorKind::kInvalid, "apply: the object is not a JSON object");
  }
  std::string api_version = object.getString("apiVersion");
  std::string kind = object.getString("kind");
  if (api_version.empty() || kind.empty()) {
    return fail(ErrorKind::kInvalid,
                "apply: the object has no " + std::string(api_version.empty() ? "apiVersion" : "kind"));
  }
  const Json* name = object.at({"metadata", "name"});
  if (name == nullptr || !name->isString() || name->asString().empty()) {
    return fail(ErrorKind::kInvalid, "apply: " + kind + " has no metadata.name");
  }
  if (options.field_manager.empty()) {
    return fail(ErrorKind::kInvalid, "apply: field_manager is empty");
  }
  return okStatus();
}

}  // namespace

namespace detail {

std::string groupVersionPath(const std::string& group, const std::string& version) {
  return group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
}

Result<Json> parseBody(const HttpResponse& response, std::string_view where) {
  auto json = Json::parse(response.body);
  if (!json.ok()) {
    return fail(ErrorKind::kInternal, "the API server answered with invalid JSON: " + json.error().message,
                std::string(where));
  }
  return std::move(*json);
}

void appendQuery(std::string& target, std::string_view key, std::string_view value) {
  target += target.find('?') == std::string::npos ? '?' : '&';
  target += key;
  target += '=';
  target += urlEncode(value);
}

}  // namespace detail

std::string ResourceMapping::apiVersion() const {
  return group.empty() ? version : group + "/" + version;
}

std::string_view watchEventTypeName(WatchEventType type) {
  for (const auto& [value, name] : kWatchEventNames) {
    if (value == type) {
      return name;
    }
  }
  return "ADDED";
}

std::optional<WatchEventType> detail::watchEventTypeFromName(std::string_view name) {
  for (const auto& [value, known] : kWatchEventNames) {
    if (known == name) {
      return value;
    }
  }
  return std::nullopt;
}

Result<std::pair<std::string, std::string>> splitApiVersion(std::string_view api_version) {
  if (api_version.empty()) {
    return fail(ErrorKind::kInvalid, "apiVersion is empty");
  }
  size_t slash = api_version.find('/');
  if (slash == std::string_view::npos) {
    return std::pair<std::string, std::string>{"", std::string(api_version)};
  }
  std::string_view group = api_version.substr(0, slash);
  std::string_view version = api_version.substr(slash + 1);
  if (group.empty() || version.empty() || version.find('/') != std::string_view::npos) {
    return fail(ErrorKind::kInvalid, "apiVersion \"" + std::string(api_version) + "\" is not group/version");
  }
  return std::pair<std::string, std::string>{std::string(group), std::string(version)};
}

std::string urlEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// ---- KubeClient ---------------------------------------------------------------------------------------------

KubeClient::KubeClient(Kubeconfig config, KubeClientOptions options)
    : config_(std::move(config)), options_(std::move(options)) {
  if (options_.metrics == nullptr) {
    own_metrics_ = std::make_unique<Metrics>("kube");
    metrics_ = own_metrics_.get();
  } else {
    metrics_ = options_.metrics;
  }
  token_ = config_.token;
  token_read_at_ = Clock::now();
}

KubeClient::~KubeClient() = default;

Result<std::unique_ptr<KubeClient>> KubeClient::create(const Kubeconfig& config, KubeClientOptions options) {
  if (config.host.empty() || config.port.empty()) {
    return fail(ErrorKind::kInvalid, "kubeconfig has no server", "KubeClient::create");
  }
  std::unique_ptr<KubeClient> client(new KubeClient(config, std::move(options)));
  auto http = HttpClient::create(client->config_, {.connect_timeout = client->options_.connect_timeout,
                                                   .max_idle_connections = client->options_.max_idle_connections,
                                                   .user_agent = client->options_.user_agent,
                                                   .metrics = client->metrics_});
  FLOTILLA_TRY(http);
  client->http_ = std::move(*http);
  return client;
}

std::unique_ptr<KubeClient> KubeClient::impersonating(Impersonation who) const {
  KubeClientOptions options = options_;
  options.metrics = metrics_;
  std::unique_ptr<KubeClient> client(new KubeClient(config_, std::move(options)));
  client->http_ = http_;
  client->impersonation_ = std::move(who);
  return client;
}

std::string KubeClient::bearerToken() {
  std::lock_guard lock(token_mutex_);
  // Projected service-account tokens rotate (the kubelet rewrites the file), so a token file is re-read.
  if (!config_.token_file.empty() && Clock::now() - token_read_at_ >= options_.token_reload) {
    auto text = readFile(config_.token_file);
    if (text.ok() && !trim(*text).empty()) {
      token_ = trim(*text);
    } else {
      log::warn("cannot re-read the kube token file; keeping the previous token",
                {{"file", config_.token_file}, {"error", text.ok() ? std::string("empty") : text.error().message}});
      metrics_->counter("kube_token_reload_failures_total", "failed re-reads of the kube token file").Increment();
    }
    token_read_at_ = Clock::now();
  }
  return token_;
}

void KubeClient::authorize(HttpRequest& request) {
  std::string token = bearerToken();
  if (!token.empty()) {
    request.headers.emplace_back("Authorization", "Bearer " + token);
  }
  if (impersonation_) {
    request.headers.emplace_back("Impersonate-User", impersonation_->user);
    for (const auto& group : impersonation_->groups) {
      request.headers.emplace_back("Impersonate-Group", group);
    }
  }
}

Result<HttpResponse> KubeClient::send(HttpRequest request) {
  authorize(request);
  if (request.timeout.count() <= 0) {
    request.timeout = options_.request_timeout;
  }
  auto response = http_->send(request);
  std::string code = response.ok() ? std::to_string(response->status) : "transport_error";
  metrics_
      ->counter("kube_requests_total", "requests to kube-apiserver by verb and HTTP status",
                {{"verb", request.method}, {"code", code}})
      .Increment();
  if (!response.ok()) {
    log::warn("kube request failed",
              {{"request", request.method + " " + request.target}, {"error", response.error().message}});
  }
  return response;
}

Result<HttpResponse> KubeClient::sendChecked(HttpRequest request) {
  std::string where = request.method + " " + request.target;
  auto response = send(std::move(request));
  FLOTILLA_TRY(response);
  if (response->status < 200 || response->status > 299) {
    return fail(apiError(response->status, response->body, where));
  }
  return response;
}

Result<std::unique_ptr<HttpStream>> KubeClient::openStream(HttpRequest request) {
  authorize(request);
  request.timeout = options_.request_timeout;
  return http_->stream(request);
}

Result<Json> KubeClient::sendForJson(HttpRequest request) {
  bool has_accept = false;
  for (const auto& [name, value] : request.headers) {
    has_accept = has_accept || name == "Accept";
  }
  if (!has_accept) {
    request.headers.emplace_back("Accept", "application/json");
  }
  std::string where = request.method + " " + request.target;
  auto response = sendChecked(std::move(request));
  FLOTILLA_TRY(response);
  return parseBody(*response, where);
}

Result<HttpResponse> KubeClient::request(std::string_view method, std::string_view path, std::string_view body,
                                         std::string_view content_type) {
  HttpRequest request{.method = std::string(method),
                      .target = config_.base_path + std::string(path),
                      .body = std::string(body),
                      .content_type = std::string(content_type)};
  return sendChecked(std::move(request));
}

Result<Json> KubeClient::requestJson(std::string_view method, std::string_view path, std::string_view body,
                                     std::string_view content_type) {
  return sendForJson(HttpRequest{.method = std::string(method),
                                 .target = config_.base_path + std::string(path),
                                 .body = std::string(body),
                                 .content_type = std::string(content_type)});
}

Result<ServerVersion> KubeClient::serverVersion() {
  auto json = requestJson("GET", "/version");
  FLOTILLA_TRY(json);
  return ServerVersion{.git_version = json->getString("gitVersion"),
                       .major = json->getString("major"),
                       .minor = json->getString("minor")};
}

// ---- objects ------------------------------------------------------------------------------------------------

std::string KubeClient::collectionPath(const ResourceMapping& m, std::string_view ns) const {
  std::string path = config_.base_path + groupVersionPath(m.group, m.version);
  if (m.namespaced && !ns.empty()) {
    path += "/namespaces/" + urlEncode(ns);
  }
  return path + "/" + m.resource;
}

Result<std::string> KubeClient::objectPath(std::string_view api_version, std::string_view kind, std::string_view ns,
                                           std::string_view name) {
  if (name.empty()) {
    return fail(ErrorKind::kInvalid, std::string(kind) + ": name is empty");
  }
  auto m = mapping(api_version, kind);
  FLOTILLA_TRY(m);
  std::string_view effective_ns = ns.empty() ? std::string_view(config_.default_namespace) : ns;
  return collectionPath(*m, effective_ns) + "/" + urlEncode(name);
}

Result<Json> KubeClient::get(std::string_view api_version, std::string_view kind, std::string_view ns,
                             std::string_view name) {
  auto path = objectPath(api_version, kind, ns, name);
  FLOTILLA_TRY(path);
  return sendForJson(HttpRequest{.target = *path});
}

Result<ObjectList> KubeClient::list(std::string_view api_version, std::string_view kind, std::string_view ns,
                                    const ListOptions& options) {
  auto m = mapping(api_version, kind);
  FLOTILLA_TRY(m);
  const std::string base = collectionPath(*m, ns);
  ObjectList out;
  std::string continue_token;
  do {
    auto page = sendForJson(HttpRequest{.target = listTarget(base, options, continue_token)});
    FLOTILLA_TRY(page);
    if (Json* items = page->find("items"); items != nullptr && items->isArray()) {
      for (auto& item : items->asArray()) {
        // List items leave out their own apiVersion and kind; callers expect whole objects.
        item["apiVersion"] = m->apiVersion();
        item["kind"] = m->kind;
        out.items.push_back(std::move(item));
      }
    }
    const Json* meta = page->find("metadata");
    out.resource_version = meta != nullptr ? meta->getString("resourceVersion") : out.resource_version;
    continue_token = meta != nullptr ? meta->getString("continue") : std::string();
  } while (!continue_token.empty());
  return out;
}

Result<Json> KubeClient::apply(const Json& object, const ApplyOptions& options) {
  FLOTILLA_TRY(checkApplicable(object, options));
  const Json* ns_field = object.at({"metadata", "namespace"});
  std::string ns = ns_field != nullptr && ns_field->isString() ? ns_field->asString() : std::string();
  auto m = mapping(object.getString("apiVersion"), object.getString("kind"));
  FLOTILLA_TRY(m);
  std::string target = collectionPath(*m, ns.empty() ? config_.default_namespace : ns) + "/" +
                       urlEncode(object.at({"metadata", "name"})->asString());
  appendQuery(target, "fieldManager", options.field_manager);
  if (!options.field_validation.empty()) {
    appendQuery(target, "fieldValidation", options.field_validation);
  }
  if (options.force) {
    appendQuery(target, "force", "true");
  }
  if (options.dry_run) {
    appendQuery(target, "dryRun", "All");
  }
  // JSON is YAML, and the server's apply patch type takes either.
  return sendForJson(HttpRequest{
      .method = "PATCH", .target = target, .body = object.dump(), .content_type = "application/apply-patch+yaml"});
}

Status KubeClient::remove(std::string_view api_version, std::string_view kind, std::string_view ns,
                          std::string_view name, const DeleteOptions& options) {
  auto path = objectPath(api_version, kind, ns, name);
  FLOTILLA_TRY(path);
  Json body = Json::obj({{"apiVersion", "v1"},
                         {"kind", "DeleteOptions"},
                         {"propagationPolicy", std::string(propagationName(options.propagation))}});
  if (options.grace_period_seconds) {
    body["gracePeriodSeconds"] = *options.grace_period_seconds;
  }
  if (options.dry_run) {
    body["dryRun"] = Json(Json::Array{Json("All")});
  }
  HttpRequest request{.method = "DELETE",
                      .target = *path,
                      .body = body.dump(),
                      .content_type = "application/json",
                      .headers = {{"Accept", "application/json"}}};
  auto response = sendChecked(request);
  FLOTILLA_TRY(response);
  return okStatus();
}

Result<std::unique_ptr<Watch>> KubeClient::watch(std::string_view api_version, std::string_view kind,
                                                 std::string_view ns, const WatchOptions& options) {
  auto m = mapping(api_version, kind);
  FLOTILLA_TRY(m);
  std::unique_ptr<Watch> w(new Watch(this, collectionPath(*m, ns), m->apiVersion(), m->kind, options));
  // Open now so a forbidden or unknown collection fails here rather than on the first next().
  FLOTILLA_TRY(w->open(Clock::now() + options_.request_timeout));
  return w;
}

}  // namespace flotilla::kube
