// flotilla/service/stage_latency.h
//
// Where a commit's time goes on its way to the clusters (docs/pipeline.md "Stage latency"). Each service observes
// the stage it ends, from the time its input event carries to the moment its output is stored, in one histogram
// family shared by every service: flotilla_<service>_stage_latency_seconds{stage}. Summed over the services, the
// families give the whole path: push or poll -> commit event -> bundle event -> deploy event -> applied -> status
// recorded.
//
// A stage that crosses machines (the agent's) compares two wall clocks: an event time ahead of this host's clock
// is observed as 0 and counted in stage_latency_clock_skew_total{stage} (logged at most once a minute per stage);
// an event time that does not parse is not observed, counted in stage_latency_unmeasured_total{stage} and logged
// the same way.
#pragma once

#include <array>
#include <chrono>
#include <mutex>
#include <string_view>

#include "flotilla/core/clock.h"
#include "flotilla/core/metrics.h"

namespace flotilla::service {

enum class Stage {
  kPollToCommit,      //!< poller: a poll's start -> its CommitEvent stored
  kWebhookToCommit,   //!< poller: a verified push received -> its CommitEvent stored
  kCommitToBundle,    //!< bundler: CommitEvent time -> each of its BundleEvents stored
  kBundleToDeploy,    //!< scheduler: BundleEvent time -> each DeployEvent its handling stored
  kDeployToApplied,   //!< agent: DeployEvent time -> the agent's first report on that deploy (applied, any state)
  kStatusToRecorded,  //!< scheduler: StatusEvent time -> the report's status/bd.* record written
};
inline constexpr size_t kStageCount = 6;

//! The `stage` label: "poll_to_commit", "webhook_to_commit", "commit_to_bundle", "bundle_to_deploy",
//! "deploy_to_applied", "status_to_recorded".
std::string_view stageName(Stage stage);

//! The buckets of stage_latency_seconds: 1 ms to 10 minutes (a staged rollout's later partitions are minutes).
std::vector<double> stageLatencyBuckets();

class StageLatency {
 public:
  explicit StageLatency(Metrics& metrics, Clock* clock = nullptr,
                        std::chrono::milliseconds log_interval = std::chrono::minutes(1));

  //! Observes the time from `since` to now under `stage` (0 and counted as clock skew when `since` is ahead).
  void observe(Stage stage, SystemTime since);
  //! The same with `since` an event's RFC 3339 `time`; one that does not parse is counted, not observed.
  void observe(Stage stage, std::string_view since_rfc3339);

 private:
  //! True when a line about `stage` may be logged now (at most one per log interval).
  bool mayLog(Stage stage);

  Metrics& metrics_;
  Clock* clock_;
  std::chrono::milliseconds log_interval_;
  std::mutex mutex_;
  std::array<Clock::SteadyTime, kStageCount> logged_{};
  std::array<bool, kStageCount> ever_logged_{};
};

}  // namespace flotilla::service
