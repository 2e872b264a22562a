// flotilla/agent/api_versions.h
//
// The cluster's API versions for the hub's Helm renders (.Capabilities.APIVersions, docs/events/register.md): the
// agent reports them at registration and registers again when they change. They change when a
// CustomResourceDefinition is created, deleted or changes its served versions, or when an APIService (aggregated
// API, e.g. metrics.k8s.io) is created, deleted or changes its Available condition — by a bundle or by anyone
// else — so the tracker watches both collections (one watch each, resumed from its resourceVersion, listed again
// after a 410 Gone; a collection that cannot be watched, e.g. no RBAC for APIServices, is retried with backoff and
// never stops the other) and, after a change, reads discovery until it shows what the object says (the API server
// may report a CRD Established, or an APIService Available, a moment before discovery lists it), then compares a
// digest of the set with the one the hub has. Only a different set re-registers. Every failure (discovery, a
// watch, the re-registration) is logged, counted and retried with backoff.
//
// What is reported is what discovery returns, as Helm's .Capabilities does for a live cluster. An APIService that
// is not Available (its Service has no endpoints, its backend does not answer) counts for nothing: kube-apiserver's
// aggregated discovery lists its version with freshness "Stale" and no resources, which KubeClient::
// servedApiVersions skips — as client-go (and so Helm) drops stale versions. It counts once it is Available
// (group-version and kinds), and stops counting when it turns unavailable again or is deleted.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/kube/client.h"

namespace flotilla::agent {

struct ApiVersionsOptions {
  //! While a CRD change is not visible in discovery yet, discovery is read again this often...
  std::chrono::milliseconds settle_retry{500};
  //! ...for at most this long (then the set as discovery shows it is reported).
  std::chrono::milliseconds settle_deadline{std::chrono::seconds(30)};
  //! How long one wait for a watch event lasts: bounds the reaction to stop().
  std::chrono::milliseconds poll{1000};
  std::chrono::milliseconds backoff_min{500};  //!< after a failed watch, discovery or re-registration
  std::chrono::milliseconds backoff_max{std::chrono::seconds(30)};
};

//! sha256 (hex) of the sorted entries, one per line: equal sets have equal digests.
std::string apiVersionsDigest(const std::vector<std::string>& api_versions);

//! The "group/version/Kind" entries one CRD object makes served (`present`) or no longer served. `deleted`: the
//! CRD is gone (all its versions go). Only an Established CRD's served versions are expected present.
std::map<std::string, bool> crdExpectations(const Json& crd, bool deleted);
//! The "group/version" ("v1" for the core group) one APIService object makes served (Available=True) or not served
//! (not Available, or `deleted`). Nothing for an object without spec.version.
std::map<std::string, bool> apiServiceExpectations(const Json& apiservice, bool deleted);

class ApiVersionsTracker {
 public:
  //! Called with a changed set; true when the hub accepted the re-registration.
  using Reregister = std::function<bool(const std::vector<std::string>&)>;
  //! Sleeps up to a duration; false when the agent is stopping.
  using Sleep = std::function<bool(std::chrono::milliseconds)>;

  ApiVersionsTracker(kube::KubeClient& kube, Metrics& metrics, std::string cluster, ApiVersionsOptions options = {});

  //! Discovery now (sorted, unique). When discovery cannot be read: the last set discovered (logged and counted
  //! in api_discovery_errors_total), so a registration never fails for it.
  std::vector<std::string> discover();
  //! The hub accepted a registration with `api_versions`.
  void reported(const std::vector<std::string>& api_versions);
  //! Watches CRDs and APIServices until `sleep` or `stopping` says stop; re-registers through `reregister` when
  //! the set changed.
  void run(const std::function<bool()>& stopping, const Sleep& sleep, const Reregister& reregister);

 private:
  //! One watched collection, with its own watch and backoff.
  struct Source {
    const char* api_version = "";
    const char* kind = "";
    const char* list_path = "";      //!< the collection's URL path
    const char* errors_metric = "";  //!< crd_watch_errors_total, apiservice_watch_errors_total ({step})
    std::unique_ptr<kube::Watch> watch;
    std::chrono::milliseconds backoff{};
    std::chrono::steady_clock::time_point retry_at{};  //!< when a failed collection is listed again
  };
  //! The collection's current resourceVersion (one list request for one item).
  Result<std::string> listResourceVersion(const Source& source);
  //! Opens the watches that are due, then waits up to `wait` for events on the open ones. Whether an event
  //! arrived; nullopt when `sleep` said stop.
  std::optional<bool> poll(std::array<Source, 2>& sources, std::chrono::milliseconds wait, const Sleep& sleep);
  //! Lists and watches `source`; on failure counts it and schedules the next attempt.
  void openWatch(Source& source);
  //! A watch that failed: counted, closed, listed again at once after a 410 Gone, else after a backoff.
  void dropWatch(Source& source, const Error& error);
  //! Reads discovery; re-registers when the set differs from the reported one; clears `dirty_` once every
  //! expectation is met (or the deadline passed) and the hub has the set. False after a failure (back off).
  bool check(const Reregister& reregister);
  void expect(const Source& source, const kube::WatchEvent& event);
  void countDiscoveryFailure(const Error& error);
  void countWatchFailure(const Source& source, const char* step, const Error& error);

  kube::KubeClient& kube_;
  Metrics& metrics_;
  std::string cluster_;
  ApiVersionsOptions options_;

  std::mutex mutex_;  //!< guards last_ and reported_digest_ (registration runs on another thread)
  std::vector<std::string> last_;
  std::string reported_digest_;

  // The watch thread only.
  bool dirty_ = false;
  std::chrono::steady_clock::time_point deadline_{};
  std::map<std::string, bool> expectations_;  //!< "group/version[/Kind]" -> expected present
};

}  // namespace flotilla::agent
