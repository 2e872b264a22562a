// flotilla/agent/api_versions.h
//
// The cluster's API versions for the hub's Helm renders (.Capabilities.APIVersions, docs/events/register.md): the
// agent reports them at registration and registers again when they change. They change when a
// CustomResourceDefinition is created, deleted or changes its served versions — by a bundle or by anyone else — so
// the tracker watches CRDs (one watch, resumed from its resourceVersion, listed again after a 410 Gone) and, after a
// change, reads discovery until it shows what the CRD says (the API server may report a CRD Established a moment
// before discovery lists it), then compares a digest of the set with the one the hub has. Only a different set
// re-registers. Every failure (discovery, the watch, the re-registration) is logged, counted and retried with
// backoff.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
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
  //! Watches CRDs until `sleep` or `stopping` says stop; re-registers through `reregister` when the set changed.
  void run(const std::function<bool()>& stopping, const Sleep& sleep, const Reregister& reregister);

 private:
  //! The CRD collection's current resourceVersion (one list request for one item).
  Result<std::string> listResourceVersion();
  //! Follows one watch until it fails (the caller lists again) or the agent stops.
  Status follow(kube::Watch& watch, const std::function<bool()>& stopping, const Sleep& sleep,
                const Reregister& reregister);
  //! Reads discovery; re-registers when the set differs from the reported one; clears `dirty_` once every
  //! expectation is met (or the deadline passed) and the hub has the set. False after a failure (back off).
  bool check(const Reregister& reregister);
  void expect(const kube::WatchEvent& event);
  void countFailure(const char* what, const Error& error);

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
  std::map<std::string, bool> expectations_;  //!< "group/version/Kind" -> expected present
};

}  // namespace flotilla::agent
