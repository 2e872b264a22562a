#include "flotilla/kube/client.h"

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"

namespace flotilla::kube {
namespace {

using Clock = std::chrono::steady_clock;

// Aggregated discovery (one request for every group) when the server has it, the classic documents otherwise.
constexpr const char* kDiscoveryAccept =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

std::string mappingKey(std::string_view group, std::string_view version, std::string_view kind) {
  return std::string(group) + "/" + std::string(version) + "/" + std::string(kind);
}

std::string groupVersionPath(const std::string& group, const std::string& version) {
  return group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
}

std::string_view propagationName(Propagation p) {
  switch (p) {
    case Propagation::kForeground:
      return "Foreground";
    case Propagation::kOrphan:
      return "Orphan";
    case Propagation::kBackground:
      break;
  }
  return "Background";
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

}  // namespace

std::string ResourceMapping::apiVersion() const {
  return group.empty() ? version : group + "/" + version;
}

std::string_view watchEventTypeName(WatchEventType type) {
  switch (type) {
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kAdded:
      break;
  }
  return "ADDED";
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
  HttpRequest request{.method = std::string(method),
                      .target = config_.base_path + std::string(path),
                      .body = std::string(body),
                      .content_type = std::string(content_type),
                      .headers = {{"Accept", "application/json"}}};
  std::string where = request.method + " " + request.target;
  auto response = sendChecked(std::move(request));
  FLOTILLA_TRY(response);
  return parseBody(*response, where);
}

Result<ServerVersion> KubeClient::serverVersion() {
  auto json = requestJson("GET", "/version");
  FLOTILLA_TRY(json);
  return ServerVersion{.git_version = json->getString("gitVersion"),
                       .major = json->getString("major"),
                       .minor = json->getString("minor")};
}

// ---- discovery ----------------------------------------------------------------------------------------------

void KubeClient::addLegacyResourcesLocked(const Json& resource_list, const std::string& group,
                                          const std::string& version) {
  const Json* resources = resource_list.find("resources");
  if (resources == nullptr || !resources->isArray()) {
    return;
  }
  for (const auto& r : resources->asArray()) {
    std::string name = r.getString("name");
    std::string kind = r.getString("kind");
    if (name.empty() || kind.empty() || name.find('/') != std::string::npos) {
      continue;  // subresources ("deployments/status") share the kind of their parent
    }
    mappings_.try_emplace(
        mappingKey(group, version, kind),
        ResourceMapping{
            .group = group, .version = version, .resource = name, .kind = kind, .namespaced = r.getBool("namespaced")});
  }
}

void KubeClient::addAggregatedLocked(const Json& discovery_list) {
  const Json* items = discovery_list.find("items");
  if (items == nullptr || !items->isArray()) {
    return;
  }
  for (const auto& item : items->asArray()) {
    const Json* name = item.at({"metadata", "name"});
    std::string group = name != nullptr && name->isString() ? name->asString() : std::string();
    const Json* versions = item.find("versions");
    if (versions == nullptr || !versions->isArray()) {
      continue;
    }
    for (const auto& v : versions->asArray()) {
      std::string version = v.getString("version");
      const Json* resources = v.find("resources");
      if (version.empty() || resources == nullptr || !resources->isArray()) {
        continue;
      }
      for (const auto& r : resources->asArray()) {
        const Json* kind = r.at({"responseKind", "kind"});
        std::string resource = r.getString("resource");
        if (kind == nullptr || !kind->isString() || kind->asString().empty() || resource.empty()) {
          continue;
        }
        mappings_.try_emplace(mappingKey(group, version, kind->asString()),
                              ResourceMapping{.group = group,
                                              .version = version,
                                              .resource = resource,
                                              .kind = kind->asString(),
                                              .namespaced = r.getString("scope") == "Namespaced"});
      }
    }
  }
}

Status KubeClient::loadGroupVersionLocked(const std::string& group, const std::string& version) {
  auto list = requestJson("GET", groupVersionPath(group, version));
  FLOTILLA_TRY(list);
  addLegacyResourcesLocked(*list, group, version);
  return okStatus();
}

Status KubeClient::loadDiscoveryLocked() {
  mappings_.clear();
  for (const char* root : {"/api", "/apis"}) {
    HttpRequest request{.target = config_.base_path + root, .headers = {{"Accept", kDiscoveryAccept}}};
    std::string where = std::string("GET ") + request.target;
    auto response = sendChecked(std::move(request));
    FLOTILLA_TRY(response);
    auto json = parseBody(*response, where);
    FLOTILLA_TRY(json);
    if (json->getString("kind") == "APIGroupDiscoveryList") {
      addAggregatedLocked(*json);
      continue;
    }
    // Classic discovery: /api lists core versions, /apis lists groups; each group-version has its own document.
    if (const Json* versions = json->find("versions"); versions != nullptr && versions->isArray()) {
      for (const auto& v : versions->asArray()) {
        if (v.isString()) {
          FLOTILLA_TRY(loadGroupVersionLocked("", v.asString()));
        }
      }
    }
    if (const Json* groups = json->find("groups"); groups != nullptr && groups->isArray()) {
      for (const auto& g : groups->asArray()) {
        const Json* gvs = g.find("versions");
        for (size_t i = 0; gvs != nullptr && gvs->isArray() && i < gvs->size(); ++i) {
          FLOTILLA_TRY(loadGroupVersionLocked(g.getString("name"), gvs->asArray()[i].getString("version")));
        }
      }
    }
  }
  discovery_loaded_ = true;
  return okStatus();
}

Status KubeClient::refreshDiscovery() {
  std::lock_guard lock(discovery_mutex_);
  discovery_loaded_ = false;
  return loadDiscoveryLocked();
}

Result<ResourceMapping> KubeClient::mapping(std::string_view api_version, std::string_view kind) {
  auto gv = splitApiVersion(api_version);
  FLOTILLA_TRY(gv);
  if (kind.empty()) {
    return fail(ErrorKind::kInvalid, "kind is empty");
  }
  const auto& [group, version] = *gv;
  std::string key = mappingKey(group, version, kind);
  std::lock_guard lock(discovery_mutex_);
  if (!discovery_loaded_) {
    FLOTILLA_TRY(loadDiscoveryLocked());
  }
  if (auto it = mappings_.find(key); it != mappings_.end()) {
    return it->second;
  }
  // A miss may be a kind that appeared after discovery was loaded (a CRD just established): ask its
  // group-version once before giving up.
  log::info("kube kind not in discovery cache; refreshing its group-version",
            {{"apiVersion", std::string(api_version)}, {"kind", std::string(kind)}});
  metrics_->counter("kube_discovery_refreshes_total", "discovery refreshes caused by an unknown kind").Increment();
  auto refreshed = loadGroupVersionLocked(group, version);
  if (!refreshed.ok()) {
    if (refreshed.error().kind == ErrorKind::kNotFound) {
      return fail(ErrorKind::kNotFound,
                  "apiVersion " + std::string(api_version) + " is not served by " + config_.server,
                  refreshed.error().where);
    }
    return fail(refreshed.error());
  }
  if (auto it = mappings_.find(key); it != mappings_.end()) {
    return it->second;
  }
  return fail(ErrorKind::kNotFound,
              "kind " + std::string(kind) + " is not served in apiVersion " + std::string(api_version) + " by " +
                  config_.server,
              "discovery");
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
  HttpRequest request{.target = *path, .headers = {{"Accept", "application/json"}}};
  auto response = sendChecked(request);
  FLOTILLA_TRY(response);
  return parseBody(*response, "GET " + *path);
}

Result<ObjectList> KubeClient::list(std::string_view api_version, std::string_view kind, std::string_view ns,
                                    const ListOptions& options) {
  auto m = mapping(api_version, kind);
  FLOTILLA_TRY(m);
  std::string base = collectionPath(*m, ns);
  ObjectList out;
  std::string continue_token;
  do {
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
    HttpRequest request{.target = target, .headers = {{"Accept", "application/json"}}};
    auto response = sendChecked(request);
    FLOTILLA_TRY(response);
    auto page = parseBody(*response, "GET " + target);
    FLOTILLA_TRY(page);
    if (Json* items = page->find("items"); items != nullptr && items->isArray()) {
      for (auto& item : items->asArray()) {
        // List items leave out their own apiVersion and kind; callers expect whole objects.
        item["apiVersion"] = m->apiVersion();
        item["kind"] = m->kind;
        out.items.push_back(std::move(item));
      }
    }
    if (const Json* meta = page->find("metadata"); meta != nullptr) {
      out.resource_version = meta->getString("resourceVersion");
      continue_token = meta->getString("continue");
    } else {
      continue_token.clear();
    }
  } while (!continue_token.empty());
  return out;
}

Result<Json> KubeClient::apply(const Json& object, const ApplyOptions& options) {
  if (!object.isObject()) {
    return fail(ErrorKind::kInvalid, "apply: the object is not a JSON object");
  }
  std::string api_version = object.getString("apiVersion");
  std::string kind = object.getString("kind");
  const Json* name = object.at({"metadata", "name"});
  if (api_version.empty() || kind.empty()) {
    return fail(ErrorKind::kInvalid,
                "apply: the object has no " + std::string(api_version.empty() ? "apiVersion" : "kind"));
  }
  if (name == nullptr || !name->isString() || name->asString().empty()) {
    return fail(ErrorKind::kInvalid, "apply: " + kind + " has no metadata.name");
  }
  if (options.field_manager.empty()) {
    return fail(ErrorKind::kInvalid, "apply: field_manager is empty");
  }
  const Json* ns = object.at({"metadata", "namespace"});
  std::string ns_text = ns != nullptr && ns->isString() ? ns->asString() : std::string();
  auto m = mapping(api_version, kind);
  FLOTILLA_TRY(m);
  std::string target =
      collectionPath(*m, ns_text.empty() ? config_.default_namespace : ns_text) + "/" + urlEncode(name->asString());
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
  HttpRequest request{.method = "PATCH",
                      .target = target,
                      .body = object.dump(),
                      .content_type = "application/apply-patch+yaml",
                      .headers = {{"Accept", "application/json"}}};
  auto response = sendChecked(request);
  FLOTILLA_TRY(response);
  return parseBody(*response, "PATCH " + target);
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

// ---- Watch --------------------------------------------------------------------------------------------------

Watch::Watch(KubeClient* client, std::string collection_path, std::string api_version, std::string kind,
             WatchOptions options)
    : client_(client),
      collection_path_(std::move(collection_path)),
      api_version_(std::move(api_version)),
      kind_(std::move(kind)),
      options_(std::move(options)),
      resource_version_(options_.resource_version) {}

Watch::~Watch() = default;

std::string Watch::target() const {
  std::string target = collection_path_;
  appendQuery(target, "watch", "true");
  if (!resource_version_.empty()) {
    appendQuery(target, "resourceVersion", resource_version_);
  }
  if (options_.bookmarks) {
    appendQuery(target, "allowWatchBookmarks", "true");
  }
  if (!options_.label_selector.empty()) {
    appendQuery(target, "labelSelector", options_.label_selector);
  }
  if (!options_.field_selector.empty()) {
    appendQuery(target, "fieldSelector", options_.field_selector);
  }
  appendQuery(target, "timeoutSeconds", std::to_string(options_.server_timeout.count()));
  return target;
}

Status Watch::open(Clock::time_point deadline) {
  std::string target_text = target();
  auto stream = client_->openStream(HttpRequest{.target = target_text, .headers = {{"Accept", "application/json"}}});
  FLOTILLA_TRY(stream);
  client_->metrics_
      ->counter("kube_requests_total", "requests to kube-apiserver by verb and HTTP status",
                {{"verb", "WATCH"}, {"code", std::to_string((*stream)->status())}})
      .Increment();
  if ((*stream)->status() != 200) {
    // An error answer is short; read it whole for its Status object.
    std::string body;
    while (!(*stream)->done() && Clock::now() < deadline) {
      auto piece = (*stream)->read(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
      FLOTILLA_TRY(piece);
      body += *piece;
    }
    return fail(apiError((*stream)->status(), body, "WATCH " + target_text));
  }
  if (opened_once_) {
    ++reconnects_;
    client_->metrics_->counter("kube_watch_reconnects_total", "watch requests re-established after they ended")
        .Increment();
  }
  opened_once_ = true;
  stream_ = std::move(*stream);
  buffer_.clear();
  return okStatus();
}

Status Watch::parseLines() {
  size_t start = 0;
  size_t newline = 0;
  while ((newline = buffer_.find('\n', start)) != std::string::npos) {
    std::string_view line(buffer_.data() + start, newline - start);
    start = newline + 1;
    if (trim(line).empty()) {
      continue;
    }
    auto event = Json::parse(line);
    if (!event.ok()) {
      buffer_.erase(0, start);
      stream_.reset();
      return fail(ErrorKind::kTransient, "unreadable watch event: " + event.error().message, "WATCH " + kind_);
    }
    std::string type = event->getString("type");
    Json object;
    if (Json* o = event->find("object"); o != nullptr) {
      object = std::move(*o);
    }
    if (type == "ERROR") {
      buffer_.erase(0, start);
      stream_.reset();
      return fail(statusError(object, "WATCH " + collection_path_));
    }
    WatchEventType event_type = WatchEventType::kAdded;
    if (type == "MODIFIED") {
      event_type = WatchEventType::kModified;
    } else if (type == "DELETED") {
      event_type = WatchEventType::kDeleted;
    } else if (type == "BOOKMARK") {
      event_type = WatchEventType::kBookmark;
    } else if (type != "ADDED") {
      log::warn("kube watch event of unknown type skipped", {{"type", type}, {"kind", kind_}});
      continue;
    }
    if (const Json* rv = object.at({"metadata", "resourceVersion"}); rv != nullptr && rv->isString()) {
      resource_version_ = rv->asString();
    }
    ready_.push_back(WatchEvent{event_type, std::move(object)});
  }
  buffer_.erase(0, start);
  return okStatus();
}

Result<std::optional<WatchEvent>> Watch::next(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    if (!ready_.empty()) {
      WatchEvent event = std::move(ready_.front());
      ready_.pop_front();
      return std::optional<WatchEvent>(std::move(event));
    }
    if (!stream_) {
      // First use after an error, or the server ended the previous request: resume from the last version.
      FLOTILLA_TRY(open(std::max(deadline, Clock::now() + std::chrono::seconds(5))));
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return std::optional<WatchEvent>();
    }
    auto piece = stream_->read(left);
    if (!piece.ok()) {
      stream_.reset();
      return fail(piece.error());
    }
    buffer_ += *piece;
    FLOTILLA_TRY(parseLines());
    if (stream_ && stream_->done()) {
      log::debug("kube watch ended by the server; resuming", {{"kind", kind_}, {"resourceVersion", resource_version_}});
      stream_.reset();
      if (ready_.empty() && Clock::now() >= deadline) {
        return std::optional<WatchEvent>();
      }
    }
  }
}

}  // namespace flotilla::kube
