// flotilla/kube/client.h
//
// A Kubernetes API client for Flotilla's agent and tests: discovery and a REST mapper (apiVersion + kind ->
// resource path, refreshed when a kind is new), get/list/server-side apply/delete/watch on flotilla::Json objects,
// and a raw request for anything else. Every API failure comes back as an Error whose kind says what to do next
// (see errors.h). Thread-safe: one KubeClient may be used from several threads; a Watch belongs to one thread.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/kube/errors.h"
#include "flotilla/kube/http_client.h"
#include "flotilla/kube/kubeconfig.h"

namespace flotilla::kube {

//! How an apiVersion + kind is addressed over REST.
struct ResourceMapping {
  std::string group;     //!< "" for the core group
  std::string version;   //!< "v1"
  std::string resource;  //!< plural, lower case: "configmaps"
  std::string kind;      //!< "ConfigMap"
  bool namespaced = false;

  //! "v1" or "group/version".
  [[nodiscard]] std::string apiVersion() const;
};

//! The API server's /version.
struct ServerVersion {
  std::string git_version;  //!< "v1.36.3"
  std::string major;        //!< "1"
  std::string minor;        //!< "36" (some distributions append "+")
};

struct ApplyOptions {
  std::string field_manager = "flotilla";
  bool force = false;    //!< take over fields other managers own instead of failing with kConflict
  bool dry_run = false;  //!< validate and return the result without persisting (dryRun=All)
  //! Strict: unknown or duplicate fields are kInvalid instead of being dropped with a warning.
  std::string field_validation = "Strict";
};

enum class Propagation { kBackground, kForeground, kOrphan };

struct DeleteOptions {
  Propagation propagation = Propagation::kBackground;
  std::optional<int64_t> grace_period_seconds;  //!< unset: the object's default
  bool dry_run = false;
};

struct ListOptions {
  std::string label_selector;  //!< "app=web,tier!=db"
  std::string field_selector;  //!< "metadata.name=x"
  int64_t page_size = 500;     //!< items per request; pages are followed until the list is complete
};

struct ObjectList {
  std::vector<Json> items;       //!< each with apiVersion and kind filled in
  std::string resource_version;  //!< the list's resourceVersion: watch from here to see later changes
};

struct WatchOptions {
  //! Where to start: "" replays the current objects as ADDED first; a list's resourceVersion sees only later
  //! changes.
  std::string resource_version;
  std::string label_selector;
  std::string field_selector;
  bool bookmarks = true;  //!< ask for BOOKMARK events, which keep resourceVersion() fresh on quiet watches
  //! The server ends each watch request after this long; Watch then reconnects from the last resourceVersion.
  std::chrono::seconds server_timeout{300};
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark };

//! "ADDED", "MODIFIED", "DELETED", "BOOKMARK".
std::string_view watchEventTypeName(WatchEventType type);

struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  Json object;  //!< the object (for DELETED its last state; for BOOKMARK only metadata.resourceVersion)
};

struct KubeClientOptions {
  std::chrono::milliseconds request_timeout{30000};  //!< per request, connecting included
  std::chrono::milliseconds connect_timeout{10000};
  size_t max_idle_connections = 4;
  std::string user_agent = "flotilla";
  std::chrono::seconds token_reload{60};  //!< how often a token file is re-read
  //! Counters go here (names flotilla_<service>_kube_*); when null the client keeps its own ("kube").
  Metrics* metrics = nullptr;
};

//! Who a client acts as (Kubernetes user impersonation: Impersonate-User / Impersonate-Group headers). The
//! caller's own identity must be allowed the `impersonate` verb on that user (for a service account
//! "system:serviceaccount:<ns>:<name>": on serviceaccounts <name> in <ns>) and on each group.
struct Impersonation {
  std::string user;                 //!< "system:serviceaccount:app:deployer"
  std::vector<std::string> groups;  //!< empty: the API server derives them (for a service account, its groups)
};

class KubeClient;

//! A watch on one resource collection. Pull-style: next() returns events as they arrive. When the server ends
//! the request (server_timeout) it reconnects from the last resourceVersion seen, so one Watch can run for days.
//! After a transport error next() fails once and the following call reconnects; a 410 Gone (isGone) means the
//! resourceVersion is too old: list again and start a new Watch from the list's resourceVersion.
//! The KubeClient must outlive its Watches.
class Watch {
 public:
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  //! The next event, waiting at most `timeout` for one to arrive (re-opening the request when needed may add up
  //! to the client's connect/request timeout); nullopt when none arrived in time. An ERROR event from the server
  //! is returned as the error it carries (410 -> isGone()). Events can repeat after a reconnect that started
  //! from "" (no event seen yet): handlers must be idempotent anyway.
  Result<std::optional<WatchEvent>> next(std::chrono::milliseconds timeout);
  //! The resourceVersion of the last event (or bookmark) seen; where a reconnect resumes.
  [[nodiscard]] const std::string& resourceVersion() const { return resource_version_; }
  //! How many times the watch request was re-established after the server ended it.
  [[nodiscard]] size_t reconnects() const { return reconnects_; }

 private:
  friend class KubeClient;
  Watch(KubeClient* client, std::string collection_path, std::string api_version, std::string kind,
        WatchOptions options);
  std::string target() const;
  Status open(std::chrono::steady_clock::time_point deadline);
  Status parseLines();
  //! Reads what arrives before `deadline` (re-opening the request when needed); false when the deadline passed.
  Result<bool> readSome(std::chrono::steady_clock::time_point deadline);

  KubeClient* client_;
  std::string collection_path_;
  std::string api_version_;
  std::string kind_;
  WatchOptions options_;
  std::string resource_version_;
  std::unique_ptr<HttpStream> stream_;
  std::string buffer_;
  std::deque<WatchEvent> ready_;
  size_t reconnects_ = 0;
  bool opened_once_ = false;
};

class KubeClient {
 public:
  //! A client for the server in `config`; connects lazily, so a server that is down is reported by the first call.
  static Result<std::unique_ptr<KubeClient>> create(const Kubeconfig& config, KubeClientOptions options = {});
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  //! A client that sends every request as `who`, sharing this client's server, credentials, connection pool and
  //! metrics (this client must outlive it). A denied request is kPermanent with the API server's message, which names
  //! the user, verb and resource.
  [[nodiscard]] std::unique_ptr<KubeClient> impersonating(Impersonation who) const;
  //! Who this client impersonates (nullopt: itself).
  [[nodiscard]] const std::optional<Impersonation>& impersonation() const { return impersonation_; }

  //! GET /version.
  Result<ServerVersion> serverVersion();

  //! The REST mapping of apiVersion + kind from discovery (/api, /apis; aggregated discovery when the server
  //! offers it). Cached; on a miss the kind's group-version is fetched again once, so a CRD established a moment
  //! ago is found. kNotFound when the server does not serve it, kInvalid for a malformed apiVersion.
  Result<ResourceMapping> mapping(std::string_view api_version, std::string_view kind);
  //! Drops the discovery cache and loads it again.
  Status refreshDiscovery();
  //! What the server serves, as Helm's .Capabilities.APIVersions lists it for a live cluster: every
  //! "group/version" ("v1" for the core group) and "group/version/Kind" (subresource kinds included, as Helm's
  //! discovery does), sorted and unique. Loads discovery afresh (refreshDiscovery), so a CRD established a
  //! moment ago is in it.
  Result<std::vector<std::string>> servedApiVersions();

  //! One object. An empty namespace means the kubeconfig's namespace (for namespaced kinds).
  Result<Json> get(std::string_view api_version, std::string_view kind, std::string_view ns, std::string_view name);
  //! Every object of a kind (all pages). An empty namespace lists across all namespaces.
  Result<ObjectList> list(std::string_view api_version, std::string_view kind, std::string_view ns,
                          const ListOptions& options = {});
  //! Server-side apply of `object` (apiVersion, kind, metadata.name required; metadata.namespace defaults to the
  //! kubeconfig's). Returns the object as stored (or as it would be, with dry_run). A field another manager owns
  //! fails with kConflict naming the manager and field unless `force`.
  Result<Json> apply(const Json& object, const ApplyOptions& options = {});
  //! Deletes an object. kNotFound when it does not exist (callers treat that as done). With Foreground/Orphan the
  //! object stays (with a finalizer) until the garbage collector has handled its dependents.
  Status remove(std::string_view api_version, std::string_view kind, std::string_view ns, std::string_view name,
                const DeleteOptions& options = {});
  //! Starts watching a collection (an empty namespace watches all namespaces).
  Result<std::unique_ptr<Watch>> watch(std::string_view api_version, std::string_view kind, std::string_view ns,
                                       const WatchOptions& options = {});

  //! Any other call: `path` is the absolute path with query ("/readyz", ".../status"). Non-2xx answers are
  //! errors (errors.h); the body is returned as is.
  Result<HttpResponse> request(std::string_view method, std::string_view path, std::string_view body = {},
                               std::string_view content_type = {});
  //! request() for a JSON answer.
  Result<Json> requestJson(std::string_view method, std::string_view path, std::string_view body = {},
                           std::string_view content_type = {});

  //! The configuration the client was made with (server, namespace, credentials).
  [[nodiscard]] const Kubeconfig& config() const { return config_; }
  //! The HTTPS layer (connection statistics for tests and diagnostics).
  [[nodiscard]] HttpClient& http() { return *http_; }
  //! Where the client's counters are (the caller's Metrics or the client's own "kube" one).
  [[nodiscard]] Metrics& metrics() { return *metrics_; }

 private:
  friend class Watch;
  KubeClient(Kubeconfig config, KubeClientOptions options);

  Result<HttpResponse> send(HttpRequest request);
  Result<HttpResponse> sendChecked(HttpRequest request);
  //! sendChecked() for a JSON answer (asks for application/json unless the request names its own Accept).
  Result<Json> sendForJson(HttpRequest request);
  Result<std::unique_ptr<HttpStream>> openStream(HttpRequest request);
  void authorize(HttpRequest& request);
  std::string bearerToken();

  Status loadDiscoveryLocked();
  Status loadGroupVersionLocked(const std::string& group, const std::string& version);
  void addLegacyResourcesLocked(const Json& resource_list, const std::string& group, const std::string& version);
  void addAggregatedLocked(const Json& discovery_list);
  void addServedLocked(const std::string& group_version, const Json& resources);
  Result<std::string> objectPath(std::string_view api_version, std::string_view kind, std::string_view ns,
                                 std::string_view name);
  std::string collectionPath(const ResourceMapping& mapping, std::string_view ns) const;

  Kubeconfig config_;
  KubeClientOptions options_;
  std::unique_ptr<Metrics> own_metrics_;
  Metrics* metrics_ = nullptr;
  std::shared_ptr<HttpClient> http_;  //!< shared with the impersonating clients made from this one
  std::optional<Impersonation> impersonation_;

  std::mutex token_mutex_;
  std::string token_;
  std::chrono::steady_clock::time_point token_read_at_{};

  std::mutex discovery_mutex_;
  bool discovery_loaded_ = false;
  std::map<std::string, ResourceMapping, std::less<>> mappings_;  // "group/version/Kind"
  std::set<std::string> served_;  // servedApiVersions(): "group/version" and "group/version/Kind" entries
};

//! Splits "group/version" (or "v1") into group and version; kInvalid when malformed.
Result<std::pair<std::string, std::string>> splitApiVersion(std::string_view api_version);

//! Percent-encodes a query value or path segment (RFC 3986 unreserved characters stay).
std::string urlEncode(std::string_view text);

}  // namespace flotilla::kube
