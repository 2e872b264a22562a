#include "flotilla/scheduler/scheduler.h"

#include <algorithm>
#include <ctime>
#include <exception>

#include "flotilla/core/log.h"
#include "flotilla/core/lookup.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/scheduler/terminations.h"
#include "flotilla/service/runtime.h"
#include "times.h"

namespace flotilla::scheduler {

using std::chrono::milliseconds;

// ---- construction and start-up --------------------------------------------------------------------------------

Result<std::unique_ptr<Scheduler>> Scheduler::create(service::Hub hub, Metrics& metrics, SchedulerOptions options) {
  if (!hub.connection || !hub.js || !hub.clusters || !hub.bundles || !hub.deployments || !hub.status) {
    return fail(ErrorKind::kInvalid,
                "the scheduler needs the hub's connection, JetStream and the clusters, bundles, "
                "deployments and status buckets");
  }
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(hub), metrics, std::move(options)));
}

Scheduler::Scheduler(service::Hub hub, Metrics& metrics, SchedulerOptions options)
    : hub_(std::move(hub)),
      metrics_(metrics),
      options_(std::move(options)),
      stages_(metrics_),
      manifest_server_(std::make_unique<ManifestServer>(hub_.connection, hub_.deployments, hub_.status, hub_.manifests,
                                                        metrics_, options_.manifests)) {
  StateGaugeScope scope{
      .owns_gitrepo = [this](const std::string& workspace,
                             const std::string& gitrepo) { return options_.partition.ownsGitRepo(workspace, gitrepo); },
      .owns_cluster = [this](const std::string& cluster) { return options_.partition.ownsCluster(cluster); }};
  state_gauges_ =
      std::make_unique<StateGauges>(metrics_, gaugeLabels(), options_.per_cluster_metrics, std::move(scope));
}

Scheduler::~Scheduler() {
  stop();
}

Status Scheduler::start() {
  if (started_.exchange(true)) {
    return {};
  }
  FLOTILLA_TRY(loadState());
  FLOTILLA_TRY(subscribeRegistrations());
  if (options_.serve_manifests) {
    FLOTILLA_TRY(serveManifests());
  }
  FLOTILLA_TRY(setUpConsumers());
  enqueueReconcile("");
  watch_thread_ = std::thread([this] { watchLoop(); });
  reconcile_thread_ = std::thread([this] { reconcileLoop(); });
  if (!options_.partition.whole()) {
    // One thread per watch, each waiting on its own (as the manifest server's).
    other_records_thread_ = std::thread([this] { followOtherPartitions(/*records=*/true); });
    other_statuses_thread_ = std::thread([this] { followOtherPartitions(/*records=*/false); });
  }
  std::lock_guard lock(mutex_);
  log::info("scheduler started", {{"partition", options_.partition.name()},
                                  {"clusters", static_cast<int64_t>(clusters_.size())},
                                  {"bundles", static_cast<int64_t>(bundles_.size())},
                                  {"deployments", static_cast<int64_t>(deployments_.size())}});
  return {};
}

Status Scheduler::serveManifests() {
  if (serving_manifests_.exchange(true)) {
    return {};
  }
  return manifest_server_->start();
}

bool Scheduler::readyAsStandby(std::string& why) const {
  std::string manifests_why;
  const bool manifests = manifest_server_->ready(manifests_why);
  return service::readyWhen(
      why, {{hub_.connection->connected(), "not connected to NATS"}, {manifests, "not serving manifests yet"}});
}

void Scheduler::stop() {
  if (stopping_.exchange(true)) {
    return;
  }
  { std::lock_guard lock(wake_mutex_); }
  wake_.notify_all();
  register_subscription_ = bus::Subscription();
  manifest_server_->stop();
  for (auto* consumer : {bundle_consumer_.get(), status_consumer_.get()}) {
    if (consumer != nullptr) {
      consumer->stop();
    }
  }
  for (auto* thread : {&watch_thread_, &reconcile_thread_, &other_records_thread_, &other_statuses_thread_}) {
    if (thread->joinable()) {
      thread->join();  // the followers see stopping_ within one watch wait
    }
  }
  clusters_watcher_.stop();
  other_records_watcher_.stop();
  other_statuses_watcher_.stop();
  std::lock_guard lock(mutex_);
  flushPublicEvents();  // what the handlers queued last
}

bool Scheduler::ready(std::string& why) const {
  bool loaded = false;
  {
    std::lock_guard lock(mutex_);
    loaded = loaded_;
  }
  std::string manifests_why;
  const bool manifests = !options_.serve_manifests || manifest_server_->ready(manifests_why);
  return service::readyWhen(why, {{hub_.connection->connected(), "not connected to NATS"},
                                  {loaded, "state not loaded from KV yet"},
                                  {bound_, "durable consumers not bound yet"},
                                  {subscribed_, "not subscribed to registrations yet"},
                                  {manifests, "not serving manifests yet"}});
}

service::ConsumerOptions Scheduler::consumerOptions(const char* stream, std::string_view durable,
                                                    std::string_view filter, std::string label) const {
  service::ConsumerOptions consumer;
  consumer.service = "scheduler";
  consumer.label = std::move(label);
  consumer.stream = stream;
  consumer.config = bus::ConsumerConfig{.durable = std::string(durable),
                                        .filter_subject = std::string(filter),
                                        .ack_wait = options_.ack_wait,
                                        .description = "flotilla scheduler"};
  consumer.max_deliveries = options_.max_deliveries;
  // One worker: every handler takes mutex_ anyway, and stream order is what the handlers expect.
  consumer.workers = 1;
  consumer.queue = std::max(1, options_.fetch_batch);
  consumer.fetch_timeout = options_.fetch_timeout;
  consumer.fetch_backoff = service::Backoff(options_.retry_base, options_.retry_max);
  consumer.budget = options_.budget;
  return consumer;
}

Status Scheduler::setUpConsumers() {
  service::TerminationReports reports{.status = hub_.status, .public_event = options_.public_events};
  // A partition has durables of its own: each reads every message and handles its own GitRepos' (partition.h).
  const std::string suffix = options_.partition.suffix();
  auto bundles = consumerOptions(service::kBundlesStream, std::string(kBundleConsumer) + suffix, events::kBundleFilter,
                                 "bundles" + suffix);
  bundles.on_idle = [this] {
    if (!caught_up_.exchange(true)) {
      log::info("bundle backlog handled", {});
      { std::lock_guard lock(wake_mutex_); }
      wake_.notify_all();
    }
  };
  bundle_consumer_ = std::make_unique<service::Consumer>(
      hub_.js, std::move(bundles),
      [this](const bus::Message& message, const service::Delivery& delivery) {
        return handleBundle(message.data(), delivery.timestamp_ms, delivery.delivery_count);
      },
      metrics_, reports);
  // Until the status consumer has read what the stream holds, the heartbeats loaded from KV may be older than
  // ones still to be read: no cluster is judged silent (noteStatusRead).
  status_read_until_ms_ = kStatusUnread;
  service::ConsumerOptions statuses = consumerOptions(service::kStatusStream, std::string(kStatusConsumer) + suffix,
                                                      events::kStatusFilter, "status" + suffix);
  statuses.on_idle = [this] { noteStatusRead(0, 0); };
  // Acks of status messages are not waited for: a lost one redelivers a report or heartbeat after ack_wait, and
  // handling one again stores what is already stored. Waiting would cost a round trip per report (10,000 at once
  // after a commit to 10,000 clusters).
  statuses.ack_sync = false;
  // Reports of different deployments are handled side by side: each writes its bd.* record without holding mutex_
  // (storeReport), so the round trips overlap; one deployment's reports still run one at a time, in stream order
  // (the ordering key is the subject, flotilla.status.<cluster>.<bundle>).
  statuses.workers = kStatusWorkers;
  status_consumer_ = std::make_unique<service::Consumer>(
      hub_.js, std::move(statuses),
      [this](const bus::Message& message, const service::Delivery& delivery) {
        if (auto forwarded = forwardAgentTermination(message.subject(), message.data(), *hub_.status, *hub_.js,
                                                     options_.public_events, options_.partition)) {
          return *forwarded;
        }
        Outcome outcome = handleStatus(message.subject(), message.data(), delivery.delivery_count, delivery.pending);
        // With several workers "read up to" is approximate by the messages in flight (milliseconds of stream time),
        // far inside --cluster-offline-after.
        noteStatusRead(delivery.pending, delivery.timestamp_ms);
        return outcome;
      },
      metrics_, reports);
  FLOTILLA_TRY(bundle_consumer_->start());
  FLOTILLA_TRY(status_consumer_->start());
  bound_ = true;
  return {};
}

// ---- loops ----------------------------------------------------------------------------------------------------

bool Scheduler::sleepFor(milliseconds duration) {
  std::unique_lock lock(wake_mutex_);
  return !wake_.wait_for(lock, duration, [this] { return stopping_.load(); });
}

std::chrono::milliseconds Scheduler::backoff(uint64_t delivery_count) const {
  return service::Backoff(options_.retry_base, options_.retry_max).delay(delivery_count);
}

// ---- introspection ---------------------------------------------------------------------------------------------

std::optional<model::Cluster> Scheduler::cluster(const std::string& name) const {
  std::lock_guard lock(mutex_);
  return valueAt(clusters_, name);
}

std::optional<DeploymentRecord> Scheduler::deployment(const std::string& cluster, const std::string& workspace,
                                                      const std::string& bundle) const {
  std::lock_guard lock(mutex_);
  return valueAt(deployments_, events::deploymentKey(cluster, workspace, bundle));
}

std::string Scheduler::lastHeartbeat(const std::string& cluster) const {
  std::lock_guard lock(mutex_);
  auto it = last_heartbeat_.find(cluster);
  return it == last_heartbeat_.end() ? std::string() : it->second;
}

}  // namespace flotilla::scheduler
