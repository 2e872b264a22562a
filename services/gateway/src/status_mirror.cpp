// KV -> CR status: watches of the poller's and the scheduler's GitRepo records feed the facts of each GitRepo; one
// writer thread turns them into Fleet's status shape and writes the ones that changed through the status
// subresource, at most options.status_rate a second (write_limiter.h).
#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/kube/errors.h"
#include "gateway_core.h"

namespace flotilla::gateway {
namespace {

std::string statusPath(const std::string& key) {
  const auto slash = key.find('/');
  return "/apis/" + std::string(kFleetApiVersion) + "/namespaces/" + kube::urlEncode(key.substr(0, slash)) +
         "/gitrepos/" + kube::urlEncode(key.substr(slash + 1)) + "/status";
}

}  // namespace

void Gateway::Core::runStatusWatch(const std::string& filter) {
  const bool summary = filter.starts_with("summary.");
  const std::string prefix = summary ? "summary.gitrepo" : "gitrepo";
  while (!stopping) {
    auto watcher = hub.status->watch(filter);
    if (!watcher.ok()) {
      log::warn("cannot watch GitRepo records; retrying", {{"filter", filter}, {"error", watcher.error().describe()}});
      metrics.mirrorRestart("status", "error");
      sleepFor(options.retry_max / 10);
      continue;
    }
    while (!stopping) {
      auto entry = watcher->next(options.poll_interval);
      if (!entry.ok()) {
        log::warn("GitRepo record watch failed; watching again", {{"error", entry.error().describe()}});
        metrics.mirrorRestart("status", "error");
        break;
      }
      if (!entry->has_value()) {
        continue;
      }
      const bus::KvEntry& kv = **entry;
      auto names = events::keyNames(kv.key, prefix, 2);
      if (!names.ok()) {
        continue;
      }
      const bool gone = kv.operation != bus::KvOperation::kPut;
      updateFacts(names->at(0) + "/" + names->at(1), [&](GitRepoFacts& facts) {
        if (summary) {
          auto record = gone ? Result<events::GitRepoSummary>(fail(ErrorKind::kNotFound, "deleted"))
                             : events::parseRecord<events::GitRepoSummary>(kv.value);
          facts.summary = record.ok() ? std::optional(std::move(record).value()) : std::nullopt;
        } else {
          auto record = gone ? Result<events::PollStatus>(fail(ErrorKind::kNotFound, "deleted"))
                             : events::parseRecord<events::PollStatus>(kv.value);
          facts.poll = record.ok() ? std::optional(std::move(record).value()) : std::nullopt;
        }
      });
    }
  }
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
  if (queue.push(key)) {
    metrics.queueDepth(queue.size());
  }
}

void Gateway::Core::runStatusWriter() {
  using Clock = TokenBucket::Clock;
  TokenBucket bucket(options.status_rate, options.status_burst, Clock::now());
  std::map<std::string, Json> written;  // what each CR's status was last set to, by this process
  while (!stopping) {
    auto key = queue.pop(options.poll_interval);
    metrics.queueDepth(queue.size());
    if (!key) {
      continue;
    }
    auto status = pendingStatus(*key, written);
    if (!status) {
      continue;
    }
    // Only real writes spend the budget. A change during the wait queues the key again, so it is not lost.
    for (auto wait = bucket.waitFrom(Clock::now()); wait > Clock::duration::zero() && !stopping;
         wait = bucket.waitFrom(Clock::now())) {
      sleepFor(std::chrono::duration_cast<std::chrono::milliseconds>(wait) + std::chrono::milliseconds(1));
    }
    bucket.take();
    writeStatus(*key, std::move(*status), written);
  }
}

}  // namespace flotilla::gateway
