// The cluster's API versions: discovery at registration, a CRD watch that re-registers when the set changed.
#include "flotilla/agent/api_versions.h"

#include <algorithm>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"

namespace flotilla::agent {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

constexpr const char* kCrdApiVersion = "apiextensions.k8s.io/v1";
constexpr const char* kCrdKind = "CustomResourceDefinition";

bool established(const Json& crd) {
  const Json* conditions = crd.at({"status", "conditions"});
  for (size_t i = 0; conditions != nullptr && conditions->isArray() && i < conditions->size(); ++i) {
    const Json& condition = conditions->asArray()[i];
    if (condition.getString("type") == "Established") {
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
  const bool live = !deleted && established(crd);
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

ApiVersionsTracker::ApiVersionsTracker(kube::KubeClient& kube, Metrics& metrics, std::string cluster,
                                       ApiVersionsOptions options)
    : kube_(kube), metrics_(metrics), cluster_(std::move(cluster)), options_(options) {}

std::vector<std::string> ApiVersionsTracker::discover() {
  auto served = kube_.servedApiVersions();
  std::lock_guard lock(mutex_);
  if (!served.ok()) {
    countFailure("discovery", served.error());
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

void ApiVersionsTracker::countFailure(const char* what, const Error& error) {
  if (std::string_view(what) == "discovery") {
    metrics_.counter("api_discovery_errors_total", "Reads of the cluster's discovery that failed (retried)")
        .Increment();
  } else {
    metrics_
        .counter("crd_watch_errors_total", "CRD list/watch failures (listed again after a backoff)", {{"step", what}})
        .Increment();
  }
  log::warn("cannot follow the cluster's API versions; retrying",
            {{"cluster", cluster_}, {"step", what}, {"error", error.describe()}});
}

Result<std::string> ApiVersionsTracker::listResourceVersion() {
  // limit=1: only the collection's resourceVersion is needed, not every CRD's schema.
  auto list = kube_.requestJson("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?limit=1");
  FLOTILLA_TRY(list);
  const Json* version = list->at({"metadata", "resourceVersion"});
  if (version == nullptr || !version->isString() || version->asString().empty()) {
    return fail(ErrorKind::kTransient, "the CRD list has no resourceVersion");
  }
  return version->asString();
}

void ApiVersionsTracker::run(const std::function<bool()>& stopping, const Sleep& sleep, const Reregister& reregister) {
  milliseconds backoff = options_.backoff_min;
  while (!stopping()) {
    auto version = listResourceVersion();
    Result<std::unique_ptr<kube::Watch>> watch =
        version.ok() ? kube_.watch(kCrdApiVersion, kCrdKind, "", kube::WatchOptions{.resource_version = *version})
                     : Result<std::unique_ptr<kube::Watch>>(fail(version.error()));
    if (!watch.ok()) {
      countFailure(version.ok() ? "watch" : "list", watch.error());
      if (!sleep(backoff)) {
        return;
      }
      backoff = std::min(backoff * 2, options_.backoff_max);
      continue;
    }
    backoff = options_.backoff_min;
    // What changed before this list (between the registration and now, or while the watch was down) counts too.
    dirty_ = true;
    deadline_ = steady_clock::now() + options_.settle_deadline;
    auto ended = follow(**watch, stopping, sleep, reregister);
    if (!ended.ok()) {
      countFailure(kube::isGone(ended.error()) ? "gone" : "watch", ended.error());
      if (!kube::isGone(ended.error()) && !sleep(backoff)) {
        return;
      }
    }
  }
}

Status ApiVersionsTracker::follow(kube::Watch& watch, const std::function<bool()>& stopping, const Sleep& sleep,
                                  const Reregister& reregister) {
  milliseconds backoff = options_.backoff_min;
  auto last_check = steady_clock::now();
  while (!stopping()) {
    auto event = watch.next(dirty_ ? options_.settle_retry : options_.poll);
    FLOTILLA_TRY(event);
    if (event->has_value() && (*event)->type != kube::WatchEventType::kBookmark) {
      expect(**event);
    }
    // A burst of changes (a chart installing ten CRDs) is read once it is quiet, or every few seconds.
    const bool quiet = !event->has_value();
    if (!dirty_ || (!quiet && steady_clock::now() - last_check < std::chrono::seconds(5))) {
      continue;
    }
    last_check = steady_clock::now();
    if (check(reregister)) {
      backoff = options_.backoff_min;
    } else {
      if (!sleep(backoff)) {
        break;
      }
      backoff = std::min(backoff * 2, options_.backoff_max);
    }
  }
  return {};
}

void ApiVersionsTracker::expect(const kube::WatchEvent& event) {
  for (auto& [entry, present] : crdExpectations(event.object, event.type == kube::WatchEventType::kDeleted)) {
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
    countFailure("discovery", served.error());
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
