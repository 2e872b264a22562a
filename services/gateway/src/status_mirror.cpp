// KV -> the hub cluster: watches of the poller's and scheduler's records feed the facts of each GitRepo, bundle and
// BundleDeployment; one writer thread turns them into GitRepo statuses and Bundle/BundleDeployment views in Fleet's
// shape and writes the ones that changed, at most options.status_rate requests a second (write_limiter.h).
#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/kube/errors.h"
#include "gateway_core.h"

namespace flotilla::gateway {
namespace {

constexpr std::string_view kGitRepoWrite = "gitrepo|";
constexpr std::string_view kBundleWrite = "bundle|";
constexpr std::string_view kDeploymentWrite = "bd|";

std::string statusPath(const std::string& key) {
  const auto slash = key.find('/');
  return "/apis/" + std::string(kFleetApiVersion) + "/namespaces/" + kube::urlEncode(key.substr(0, slash)) +
         "/gitrepos/" + kube::urlEncode(key.substr(slash + 1)) + "/status";
}

//! The record of a put, nullopt for a delete (or a record that does not decode, which is logged).
template <typename T>
std::optional<T> recordOf(const bus::KvEntry& entry) {
  if (entry.operation != bus::KvOperation::kPut) {
    return std::nullopt;
  }
  auto record = events::parseRecord<T>(entry.value);
  if (!record.ok()) {
    log::warn("ignoring an unreadable record", {{"key", entry.key}, {"error", record.error().describe()}});
    return std::nullopt;
  }
  return std::move(record).value();
}

}  // namespace

void Gateway::Core::queueWrite(const std::string& key) {
  if (queue.push(key)) {
    metrics.queueDepth(queue.size());
  } else {
    metrics.coalesced();
  }
}

void Gateway::Core::runKvWatch(bus::KeyValue& bucket, const std::string& filter,
                               const std::function<void(const bus::KvEntry&)>& apply) {
  while (!stopping) {
    auto watcher = bucket.watch(filter);
    if (!watcher.ok()) {
      log::warn("cannot watch records; retrying", {{"filter", filter}, {"error", watcher.error().describe()}});
      metrics.mirrorRestart("records", "error");
      sleepFor(options.retry_max / 10);
      continue;
    }
    while (!stopping) {
      auto entry = watcher->next(options.poll_interval);
      if (!entry.ok()) {
        log::warn("record watch failed; watching again", {{"filter", filter}, {"error", entry.error().describe()}});
        metrics.mirrorRestart("records", "error");
        break;
      }
      if (entry->has_value()) {
        apply(**entry);
      }
    }
  }
}

void Gateway::Core::applyGitRepoRecord(const bus::KvEntry& entry, bool summary) {
  auto names = events::keyNames(entry.key, summary ? "summary.gitrepo" : "gitrepo", 2);
  if (!names.ok()) {
    return;
  }
  updateFacts(names->at(0) + "/" + names->at(1), [&](GitRepoFacts& facts) {
    if (summary) {
      facts.summary = recordOf<events::GitRepoSummary>(entry);
    } else {
      facts.poll = recordOf<events::PollStatus>(entry);
    }
  });
}

void Gateway::Core::applyBundleSummary(const bus::KvEntry& entry) {
  auto names = events::keyNames(entry.key, "summary.bundle", 2);
  if (!names.ok()) {
    return;
  }
  const std::string key = names->at(0) + "/" + names->at(1);
  {
    std::lock_guard lock(mutex);
    if (auto record = recordOf<events::BundleSummary>(entry)) {
      bundles[key] = std::move(*record);
    } else {
      bundles.erase(key);
    }
  }
  queueWrite(std::string(kBundleWrite) + key);
}

void Gateway::Core::applyDeploymentFact(const bus::KvEntry& entry, bool report) {
  auto names = events::keyNames(entry.key, report ? "bd" : "", 3);
  if (!names.ok()) {
    return;
  }
  const std::string key = names->at(0) + "/" + names->at(1) + "/" + names->at(2);
  {
    std::lock_guard lock(mutex);
    DeploymentFacts& facts = deployments[key];
    if (report) {
      facts.status = recordOf<events::BdStatus>(entry);
    } else {
      facts.record = recordOf<events::DeploymentRecord>(entry);
    }
    if (!facts.status && !facts.record) {
      deployments.erase(key);
    }
  }
  queueWrite(std::string(kDeploymentWrite) + key);
}

std::optional<Json> Gateway::Core::pendingStatus(const std::string& key, const std::map<std::string, Json>& written) {
  GitRepoFacts facts;
  {
    std::lock_guard lock(mutex);
    auto found = gitrepos.find(key);
    if (found == gitrepos.end()) {
      return std::nullopt;  // the CR went since it was queued
    }
    facts = found->second;
  }
  Json status = gitRepoStatus(facts, log::nowRfc3339());
  // What this process wrote last, else what the CR has (a restarted gateway does not write every status again).
  auto previous = written.find(key);
  const Json& before = previous != written.end() ? previous->second : facts.current;
  if (before.isObject()) {
    keepTransitionTimes(status, before);
    if (sameStatus(status, before)) {
      metrics.statusWrite("unchanged");
      return std::nullopt;
    }
  }
  return status;
}

void Gateway::Core::writeStatus(const std::string& key, Json status, std::map<std::string, Json>& written) {
  const Json patch = Json::obj({{"status", status}});
  auto sent = kube->request("PATCH", statusPath(key), patch.dump(), "application/merge-patch+json");
  if (sent.ok()) {
    metrics.statusWrite("written");
    written[key] = std::move(status);
    return;
  }
  if (sent.error().kind == ErrorKind::kNotFound) {
    // No such CR (a GitRepo of KV records only, or deleted): forget it; a CR made later brings its facts back.
    metrics.statusWrite("gone");
    written.erase(key);
    std::lock_guard lock(mutex);
    gitrepos.erase(key);
    return;
  }
  metrics.statusWrite("failed");
  log::warn("cannot write a GitRepo's status; trying again", {{"gitrepo", key}, {"error", sent.error().describe()}});
  sleepFor(options.retry_base);
  queueWrite(std::string(kGitRepoWrite) + key);
}

bool Gateway::Core::spendToken(TokenBucket& bucket) {
  using Clock = TokenBucket::Clock;
  for (auto wait = bucket.waitFrom(Clock::now()); wait > Clock::duration::zero();
       wait = bucket.waitFrom(Clock::now())) {
    if (stopping) {
      return false;
    }
    sleepFor(std::chrono::duration_cast<std::chrono::milliseconds>(wait) + std::chrono::milliseconds(1));
  }
  bucket.take();
  return !stopping;
}

void Gateway::Core::runStatusWriter() {
  TokenBucket bucket(options.status_rate, options.status_burst, TokenBucket::Clock::now());
  std::map<std::string, Json> written;  // the status each GitRepo CR was last set to, by this process
  std::map<std::string, View> views;    // each view as last written
  while (!stopping) {
    auto key = queue.pop(options.poll_interval);
    metrics.queueDepth(queue.size());
    if (!key) {
      continue;
    }
    if (key->starts_with(kGitRepoWrite)) {
      const std::string name = key->substr(kGitRepoWrite.size());
      // Only real writes spend the budget. A change during the wait queues the key again, so it is not lost.
      if (auto status = pendingStatus(name, written); status && spendToken(bucket)) {
        writeStatus(name, std::move(*status), written);
      }
    } else {
      writeView(*key, bucket, views);
    }
  }
}

}  // namespace flotilla::gateway
