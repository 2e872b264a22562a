// StatusPublisher (status events with stable ids) and ManifestSource (the hub's manifests object store, opened
// when first needed): the agent's two ways to the hub besides the deploy consumer.
#include <algorithm>
#include <thread>

#include "flotilla/agent/deploy_handler.h"
#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"

namespace flotilla::agent {
namespace {

constexpr int kPublishAttempts = 3;

}  // namespace

StatusPublisher::StatusPublisher(std::shared_ptr<bus::JetStream> js, std::string cluster, Metrics& metrics,
                                 std::string agent_version)
    : js_(std::move(js)), cluster_(std::move(cluster)), metrics_(metrics), agent_version_(std::move(agent_version)) {}

int64_t StatusPublisher::nextSequence(const std::string& bundle) {
  int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::lock_guard lock(mutex_);
  int64_t& last = sequences_[bundle];
  last = std::max(last + 1, now);
  return last;
}

Status StatusPublisher::publish(events::StatusEvent event) {
  event.cluster = cluster_;
  event.agent_version = agent_version_;
  event.time = log::nowRfc3339();
  if (event.sequence == 0) {
    event.sequence = nextSequence(event.bundle);
  }
  event.id = events::statusMsgId(cluster_, event.bundle, event.deployment_id, event.state, event.sequence);
  std::string subject = events::statusSubject(cluster_, event.bundle);
  const std::string& msg_id = event.id;
  std::string data = events::encode(event).dump();
  Error last;
  for (int attempt = 1; attempt <= kPublishAttempts; ++attempt) {
    auto ack = js_->publish(subject, data, msg_id);
    if (ack.ok()) {
      log::info("status published", {{"cluster", cluster_},
                                     {"workspace", event.workspace},
                                     {"bundle", event.bundle},
                                     {"state", event.state},
                                     {"reason", event.reason},
                                     {"duplicate", ack->duplicate}});
      metrics_.counter("status_published_total", "StatusEvents published, by state", {{"state", event.state}})
          .Increment();
      return {};
    }
    last = ack.error();
    metrics_.counter("status_publish_failures_total", "Failed attempts to publish a StatusEvent").Increment();
    log::warn("status publish failed",
              {{"cluster", cluster_}, {"bundle", event.bundle}, {"attempt", attempt}, {"error", last.describe()}});
    if (attempt < kPublishAttempts) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
    }
  }
  return fail(ErrorKind::kTransient, "publishing status: " + last.message, last.where);
}

Result<std::string> ManifestSource::get(std::string_view manifest_id) {
  std::shared_ptr<bus::ObjectStore> store;
  {
    std::lock_guard lock(mutex_);
    if (!store_) {
      auto opened = bus::ObjectStore::open(js_, events::kManifestsBucket, /*create_if_missing=*/false);
      if (!opened.ok()) {
        if (opened.error().kind == ErrorKind::kNotFound) {
          return fail(ErrorKind::kTransient, "the manifests bucket does not exist on the hub yet", "manifests");
        }
        return fail(opened.error());
      }
      store_ = std::move(opened).value();
    }
    store = store_;
  }
  return store->get(events::manifestObjectName(manifest_id));
}

}  // namespace flotilla::agent
