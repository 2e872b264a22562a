#include "flotilla/service/stage_latency.h"

#include <string>

#include "flotilla/core/log.h"

namespace flotilla::service {

namespace {

constexpr std::string_view kHelp =
    "Time a commit spends in one stage of the pipeline, from the input event's time to the output stored";

}  // namespace

std::string_view stageName(Stage stage) {
  switch (stage) {
    case Stage::kPollToCommit:
      return "poll_to_commit";
    case Stage::kWebhookToCommit:
      return "webhook_to_commit";
    case Stage::kCommitToBundle:
      return "commit_to_bundle";
    case Stage::kBundleToDeploy:
      return "bundle_to_deploy";
    case Stage::kDeployToApplied:
      return "deploy_to_applied";
    case Stage::kStatusToRecorded:
      return "status_to_recorded";
  }
  return "unknown";
}

std::vector<double> stageLatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
}

StageLatency::StageLatency(Metrics& metrics, Clock* clock, std::chrono::milliseconds log_interval)
    : metrics_(metrics), clock_(clock != nullptr ? clock : &systemClock()), log_interval_(log_interval) {}

void StageLatency::observe(Stage stage, SystemTime since) {
  const std::string name(stageName(stage));
  const auto elapsed = clock_->now() - since;
  double seconds = std::chrono::duration<double>(elapsed).count();
  if (seconds < 0) {
    // The event was stamped on another host whose clock is ahead of ours: the stage took no longer than 0.
    metrics_
        .counter("stage_latency_clock_skew_total", "Stage latencies whose start was ahead of this host's clock",
                 {{"stage", name}})
        .Increment();
    if (mayLog(stage)) {
      log::warn("an event's time is ahead of this host's clock; its stage latency is recorded as 0",
                {{"stage", name}, {"ahead_ms", static_cast<int64_t>(-seconds * 1000)}});
    }
    seconds = 0;
  }
  metrics_.histogram("stage_latency_seconds", kHelp, stageLatencyBuckets(), {{"stage", name}}).Observe(seconds);
}

void StageLatency::observe(Stage stage, std::string_view since_rfc3339) {
  if (auto since = parseRfc3339(since_rfc3339)) {
    observe(stage, *since);
    return;
  }
  const std::string name(stageName(stage));
  metrics_
      .counter("stage_latency_unmeasured_total", "Stage latencies not measured: the event's time did not parse",
               {{"stage", name}})
      .Increment();
  if (mayLog(stage)) {
    log::warn("an event's time is not an RFC 3339 time; its stage latency is not recorded",
              {{"stage", name}, {"time", std::string(since_rfc3339)}});
  }
}

bool StageLatency::mayLog(Stage stage) {
  const auto index = static_cast<size_t>(stage);
  const auto now = clock_->steadyNow();
  std::lock_guard lock(mutex_);
  if (ever_logged_[index] && now - logged_[index] < log_interval_) {
    return false;
  }
  ever_logged_[index] = true;
  logged_[index] = now;
  return true;
}

}  // namespace flotilla::service
