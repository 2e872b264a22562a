// StatusPublisher: status events with stable ids, the agent's way to report to the hub (manifest_source.h is its way
// to get manifests, the deploy consumer its way to get work).
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

}  // namespace flotilla::agent
