// The cluster's API versions: discovery at registration; a CRD watch and an APIService watch that re-register
// when the set changed.
#include "flotilla/agent/api_versions.h"

#include <algorithm>
#include <array>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"

namespace flotilla::agent {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

constexpr const char* kCrdApiVersion = "apiextensions.k8s.io/v1";
constexpr const char* kCrdKind = "CustomResourceDefinition";
constexpr const char* kApiServiceApiVersion = "apiregistration.k8s.io/v1";
constexpr const char* kApiServiceKind = "APIService";

//! status.conditions[type] is "True".
bool conditionTrue(const Json& object, std::string_view type) {
  const Json* conditions = object.at({"status", "conditions"});
  for (size_t i = 0; conditions != nullptr && conditions->isArray() && i < conditions->size(); ++i) {
    const Json& condition = conditions->asArray()[i];
    if (condition.getString("type") == type) {
      return condition.getString("status") == "True";
    }
  }
  return false;
}

}  // namespace

std::string apiVersionsDigest(const std::vector<std::string>& api_versions) {
  std::vector<std::string> sorted = api_versions;
  std::sort(sorted.begin(), sorted.end());
  std::string joined;
  for (const auto& entry : sorted) {
    joined += entry;
    joined += '\n';
  }
  return sha256Hex(joined);
}

std::map<std::string, bool> crdExpectations(const Json& crd, bool deleted) {
  std::map<std::string, bool> out;
  const Json* spec = crd.find("spec");
  const Json* names = spec != nullptr ? spec->find("names") : nullptr;
  const Json* versions = spec != nullptr ? spec->find("versions") : nullptr;
  const std::string group = spec != nullptr ? spec->getString("group") : std::string();
  const std::string kind = names != nullptr ? names->getString("kind") : std::string();
  if (group.empty() || kind.empty() || versions == nullptr || !versions->isArray()) {
    return out;
  }
  const bool live = !deleted && conditionTrue(crd, "Established");
  for (const auto& version : versions->asArray()) {
    const std::string name = version.getString("name");
    if (name.empty()) {
      continue;
    }
    const bool served = version.getBool("served");
    if (deleted || !served || live) {
      std::string entry = group;
      entry.append("/").append(name).append("/").append(kind);
      out[entry] = live && served;
    }
  }
  return out;
}

std::map<std::string, bool> apiServiceExpectations(const Json& apiservice, bool deleted) {
  const Json* spec = apiservice.find("spec");
  if (spec == nullptr) {
    return {};
  }
  const std::string version = spec->getString("version");
  if (version.empty()) {
    return {};
  }
  const std::string group = spec->getString("group");
  const std::string group_version = group.empty() ? version : group + "/" + version;
  // Not Available (its Service has no endpoints, or does not answer): discovery lists its version as stale, with no
  // kinds, and the served set leaves it out (api_versions.h) — so it is expected absent, like a deleted one.
  return {{group_version, !deleted && conditionTrue(apiservice, "Available")}};
}

ApiVersionsTracker::ApiVersionsTracker(kube::KubeClient& kube, Metrics& metrics, std::string cluster,
                                       ApiVersionsOptions options)
    : kube_(kube), metrics_(metrics), cluster_(std::move(cluster)), options_(options) {}

std::vector<std::string> ApiVersionsTracker::discover() {
  auto served = kube_.servedApiVersions();
  std::lock_guard lock(mutex_);
  if (!served.ok()) {
    countDiscoveryFailure(served.error());
    return last_;
  }
  last_ = std::move(served).value();
  return last_;
}

void ApiVersionsTracker::reported(const std::vector<std::string>& api_versions) {
  std::lock_guard lock(mutex_);
  reported_digest_ = apiVersionsDigest(api_versions);
  metrics_.gauge("api_versions", "Entries of the API-version set last reported to the hub")
      .Set(static_cast<double>(api_versions.size()));
}

void ApiVersionsTracker::countDiscoveryFailure(const Error& error) {
  metrics_.counter("api_discovery_errors_total", "Reads of the cluster's discovery that failed (retried)").Increment();
  log::warn("cannot follow the cluster's API versions; retrying",
            {{"cluster", cluster_}, {"step", "discovery"}, {"error", error.describe()}});
}

void ApiVersionsTracker::countWatchFailure(const Source& source, const char* step, const Error& error) {
  metrics_
      .counter(source.errors_metric,
               std::string(source.kind) + " list/watch failures (listed again, after a backoff unless 410 Gone)",
               {{"step", step}})
      .Increment();
  log::warn("cannot follow the cluster's API versions; retrying",
            {{"cluster", cluster_}, {"kind", source.kind}, {"step", step}, {"error", error.describe()}});
}

Result<std::string> ApiVersionsTracker::listResourceVersion(const Source& source) {
  // limit=1: only the collection's resourceVersion is needed, not every object (a CRD's schema can be large).
  auto list = kube_.requestJson("GET", std::string(source.list_path) + "?limit=1");
  FLOTILLA_TRY(list);
  const Json* version = list->at({"metadata", "resourceVersion"});
  if (version == nullptr || !version->isString() || version->asString().empty()) {
    return fail(ErrorKind::kTransient, std::string("the ") + source.kind + " list has no resourceVersion");
  }
  return version->asString();
}

void ApiVersionsTracker::run(const std::function<bool()>& stopping, const Sleep& sleep, const Reregister& reregister) {
  std::array<Source, 2> sources{Source{.api_version = kCrdApiVersion,
                                       .kind = kCrdKind,
                                       .list_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                       .errors_metric = "crd_watch_errors_total"},
                                Source{.api_version = kApiServiceApiVersion,
                                       .kind = kApiServiceKind,
                                       .list_path = "/apis/apiregistration.k8s.io/v1/apiservices",
                                       .errors_metric = "apiservice_watch_errors_total"}};
  for (auto& source : sources) {
    source.backoff = options_.backoff_min;
  }
  milliseconds backoff = options_.backoff_min;
  auto last_check = steady_clock::now();
  while (!stopping()) {
    auto event_seen = poll(sources, dirty_ ? options_.settle_retry : options_.poll, sleep);
    if (!event_seen) {
      return;  // stopping
    }
    // A burst of changes (a chart installing ten CRDs) is read once it is quiet, or every few seconds.
    if (!dirty_ || (*event_seen && steady_clock::now() - last_check < std::chrono::seconds(5))) {
      continue;
    }
    last_check = steady_clock::now();
    if (check(reregister)) {
      backoff = options_.backoff_min;
    } else {
      if (!sleep(backoff)) {
        return;
      }
      backoff = std::min(backoff * 2, options_.backoff_max);
    }
  }
}

std::optional<bool> ApiVersionsTracker::poll(std::array<Source, 2>& sources, milliseconds wait, const Sleep& sleep) {
  size_t open = 0;
  auto next_retry = steady_clock::time_point::max();
  for (auto& source : sources) {
    if (!source.watch && steady_clock::now() >= source.retry_at) {
      openWatch(source);
    }
    open += source.watch ? 1 : 0;
    if (!source.watch) {
      next_retry = std::min(next_retry, source.retry_at);
    }
  }
  if (open == 0) {
    // Neither collection can be watched now: wait for the first retry (at most `wait`, so a dirty set is still
    // read on time).
    auto until = std::chrono::duration_cast<milliseconds>(next_retry - steady_clock::now());
    return sleep(std::clamp(until, milliseconds(1), wait)) ? std::optional<bool>(false) : std::nullopt;
  }
  bool event_seen = false;
  for (auto& source : sources) {
    if (!source.watch) {
      continue;
    }
    auto event = source.watch->next(wait / static_cast<int64_t>(open));
    if (!event.ok()) {
      dropWatch(source, event.error());
      continue;
    }
    if (event->has_value()) {
      event_seen = true;
      if ((*event)->type != kube::WatchEventType::kBookmark) {
        expect(source, **event);
      }
    }
  }
  return event_seen;
}

void ApiVersionsTracker::openWatch(Source& source) {
  auto version = listResourceVersion(source);
  Result<std::unique_ptr<kube::Watch>> watch =
      version.ok() ? kube_.watch(source.api_version, source.kind, "", kube::WatchOptions{.resource_version = *version})
                   : Result<std::unique_ptr<kube::Watch>>(fail(version.error()));
  if (!watch.ok()) {
    countWatchFailure(source, version.ok() ? "watch" : "list", watch.error());
    source.retry_at = steady_clock::now() + source.backoff;
    source.backoff = std::min(source.backoff * 2, options_.backoff_max);
    return;
  }
  source.watch = std::move(watch).value();
  source.backoff = options_.backoff_min;
  // What changed before this list (between the registration and now, or while the watch was down) counts too.
  dirty_ = true;
  deadline_ = steady_clock::now() + options_.settle_deadline;
}

void ApiVersionsTracker::dropWatch(Source& source, const Error& error) {
  const bool gone = kube::isGone(error);
  countWatchFailure(source, gone ? "gone" : "watch", error);
  source.watch.reset();
  // 410 Gone: the resourceVersion is too old, list again at once; anything else after a backoff.
  source.retry_at = gone ? steady_clock::now() : steady_clock::now() + source.backoff;
  if (!gone) {
    source.backoff = std::min(source.backoff * 2, options_.backoff_max);
  }
}

void ApiVersionsTracker::expect(const Source& source, const kube::WatchEvent& event) {
  const bool deleted = event.type == kube::WatchEventType::kDeleted;
  const auto expectations = std::string_view(source.kind) == kCrdKind ? crdExpectations(event.object, deleted)
                                                                      : apiServiceExpectations(event.object, deleted);
  for (const auto& [entry, present] : expectations) {
    expectations_[entry] = present;
  }
  if (!dirty_) {
    deadline_ = steady_clock::now() + options_.settle_deadline;
  }
  dirty_ = true;
}

bool ApiVersionsTracker::check(const Reregister& reregister) {
  auto served = kube_.servedApiVersions();
  if (!served.ok()) {
    countDiscoveryFailure(served.error());
    return false;
  }
  bool settled = steady_clock::now() >= deadline_;
  if (!settled) {
    settled = std::all_of(expectations_.begin(), expectations_.end(), [&](const auto& expectation) {
      return std::binary_search(served->begin(), served->end(), expectation.first) == expectation.second;
    });
  }
  const std::string digest = apiVersionsDigest(*served);
  std::string known;
  {
    std::lock_guard lock(mutex_);
    last_ = *served;
    known = reported_digest_;
  }
  if (digest != known) {
    log::info("the cluster's API versions changed; registering again",
              {{"cluster", cluster_}, {"api_versions", static_cast<int64_t>(served->size())}, {"settled", settled}});
    const bool accepted = reregister(*served);
    metrics_
        .counter("api_versions_reregistrations_total",
                 "Registrations sent again because the cluster's API versions changed",
                 {{"result", accepted ? "accepted" : "failed"}})
        .Increment();
    if (!accepted) {
      return false;
    }
    reported(*served);
  }
  if (settled) {
    dirty_ = false;
    expectations_.clear();
  }
  return true;
}

}  // namespace flotilla::agent
