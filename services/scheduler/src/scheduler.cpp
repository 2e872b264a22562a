#include "flotilla/scheduler/scheduler.h"

#include <algorithm>
#include <ctime>
#include <exception>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/labels.h"
#include "flotilla/scheduler/keys.h"
#include "flotilla/scheduler/terminations.h"

namespace flotilla::scheduler {

using std::chrono::milliseconds;

namespace {

int64_t nowMs() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string formatTime(std::chrono::system_clock::time_point at) {
  auto ms = std::chrono::duration_cast<milliseconds>(at.time_since_epoch()).count();
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return buf;
}

//! True when `incoming` is an older event time than `current` (both RFC 3339 UTC with the same layout, as every
//! Flotilla producer writes them; anything else is not compared).
bool olderThan(std::string_view incoming, std::string_view current) {
  if (incoming.empty() || current.empty() || incoming.size() != current.size() || incoming.back() != 'Z' ||
      current.back() != 'Z') {
    return false;
  }
  return incoming < current;
}

//! A generation that grows with every DeployEvent for a (cluster, bundle) and survives the record's removal:
//! at least the previous one + 1, and at least the cause's clock in ms (so a bundle deleted and re-added later
//! still gets a higher generation than anything the agent saw before).
int64_t nextGeneration(int64_t previous, int64_t clock_ms) {
  return std::max(previous + 1, clock_ms);
}

Json withoutUpdated(Json record) {
  record.erase("updated");
  return record;
}

}  // namespace

// ---- construction and start-up --------------------------------------------------------------------------------

Result<std::unique_ptr<Scheduler>> Scheduler::create(service::Hub hub, Metrics& metrics, SchedulerOptions options) {
  if (!hub.connection || !hub.js || !hub.clusters || !hub.bundles || !hub.deployments || !hub.status) {
    return fail(ErrorKind::kInvalid,
                "the scheduler needs the hub's connection, JetStream and the clusters, bundles, "
                "deployments and status buckets");
  }
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(hub), metrics, options));
}

Scheduler::Scheduler(service::Hub hub, Metrics& metrics, SchedulerOptions options)
    : hub_(std::move(hub)), metrics_(metrics), options_(options) {}

Scheduler::~Scheduler() {
  stop();
}

Status Scheduler::start() {
  if (started_.exchange(true)) {
    return {};
  }
  FLOTILLA_TRY(loadState());
  FLOTILLA_TRY(subscribeRegistrations());
  FLOTILLA_TRY(setUpConsumers());
  enqueueReconcile("");
  watch_thread_ = std::thread([this] { watchLoop(); });
  reconcile_thread_ = std::thread([this] { reconcileLoop(); });
  std::lock_guard lock(mutex_);
  log::info("scheduler started", {{"clusters", static_cast<int64_t>(clusters_.size())},
                                  {"bundles", static_cast<int64_t>(bundles_.size())},
                                  {"deployments", static_cast<int64_t>(deployments_.size())}});
  return {};
}

void Scheduler::stop() {
  if (stopping_.exchange(true)) {
    return;
  }
  { std::lock_guard lock(wake_mutex_); }
  wake_.notify_all();
  register_subscription_ = bus::Subscription();
  for (auto* consumer : {bundle_consumer_.get(), status_consumer_.get()}) {
    if (consumer != nullptr) {
      consumer->stop();
    }
  }
  for (auto* thread : {&watch_thread_, &reconcile_thread_}) {
    if (thread->joinable()) {
      thread->join();
    }
  }
  clusters_watcher_.stop();
}

bool Scheduler::ready(std::string& why) const {
  if (!hub_.connection->connected()) {
    why = "not connected to NATS";
    return false;
  }
  {
    std::lock_guard lock(mutex_);
    if (!loaded_) {
      why = "state not loaded from KV yet";
      return false;
    }
  }
  if (!bound_) {
    why = "durable consumers not bound yet";
    return false;
  }
  if (!subscribed_) {
    why = "not subscribed to registrations yet";
    return false;
  }
  return true;
}

Status Scheduler::loadState() {
  auto read_all = [&](bus::KeyValue& kv, std::string_view pattern) -> Result<std::vector<bus::KvEntry>> {
    auto watcher = kv.watch(pattern);
    FLOTILLA_TRY(watcher);
    auto values = watcher->initialValues(options_.load_timeout);
    watcher->stop();
    return values;
  };
  auto invalid = [&](std::string_view bucket, const std::string& key, const Error& error) {
    metrics_
        .counter("invalid_records_total", "KV records that could not be read (skipped)",
                 {{"bucket", std::string(bucket)}})
        .Increment();
    log::warn("skipping an unreadable record",
              {{"bucket", std::string(bucket)}, {"key", key}, {"error", error.describe()}});
  };

  // The clusters watcher stays open: after its initial values it delivers live changes to watchLoop().
  auto watcher = hub_.clusters->watch(">");
  FLOTILLA_TRY(watcher);
  clusters_watcher_ = std::move(watcher).value();
  auto cluster_entries = clusters_watcher_.initialValues(options_.load_timeout);
  FLOTILLA_TRY(cluster_entries);
  auto bundle_entries = read_all(*hub_.bundles, ">");
  FLOTILLA_TRY(bundle_entries);
  auto deployment_entries = read_all(*hub_.deployments, ">");
  FLOTILLA_TRY(deployment_entries);
  auto status_entries = read_all(*hub_.status, "bd.>");
  FLOTILLA_TRY(status_entries);
  auto summary_entries = read_all(*hub_.status, "summary.>");
  FLOTILLA_TRY(summary_entries);

  for (const auto& entry : *cluster_entries) {
    handleClustersEntry(entry);
  }
  std::lock_guard lock(mutex_);
  for (const auto& entry : *bundle_entries) {
    auto info = bundleFromRecord(entry.value);
    if (!info.ok()) {
      if (info.error().kind != ErrorKind::kNotFound) {
        invalid(hub_.bundles->bucket(), entry.key, info.error());
      }
      continue;
    }
    if (auto loaded = loadVariants(*info); !loaded.ok()) {
      // Its clusters are held (deployments left as they are) until the next BundleEvent of the bundle.
      invalid(hub_.manifests->bucket(), info->targeting ? info->targeting->variants_object : entry.key, loaded.error());
    }
    const std::string key = bundleRecordKey(info->workspace, info->bundle);
    bundles_[key] = std::move(info).value();
  }
  for (const auto& entry : *deployment_entries) {
    auto record = decodeDeploymentRecord(entry.value);
    if (!record.ok()) {
      invalid(hub_.deployments->bucket(), entry.key, record.error());
      continue;
    }
    deployments_[entry.key] = std::move(record).value();
  }
  for (const auto& entry : *status_entries) {
    auto status = decodeBdStatus(entry.value);
    if (!status.ok()) {
      invalid(hub_.status->bucket(), entry.key, status.error());
      continue;
    }
    statuses_[deploymentRecordKey(status->cluster, status->workspace, status->bundle)] = std::move(status).value();
  }
  for (const auto& entry : *summary_entries) {
    auto parsed = Json::parse(entry.value);
    if (!parsed.ok()) {
      continue;
    }
    if (startsWith(entry.key, "summary.cluster.")) {
      std::string beat = parsed->getString("lastHeartbeat");
      std::string cluster = parsed->getString("cluster");
      if (!beat.empty() && !cluster.empty() && !last_heartbeat_.contains(cluster)) {
        last_heartbeat_[cluster] = beat;
      }
    }
    summaries_[entry.key] = withoutUpdated(std::move(parsed).value());
  }
  size_t orphans = 0;
  for (const auto& [key, record] : deployments_) {
    if (!bundles_.contains(bundleRecordKey(record.workspace, record.bundle))) {
      ++orphans;
    }
  }
  if (orphans > 0) {
    // Left alone: only a deleted BundleEvent or a targeting change removes a deployment, never a record the
    // scheduler could not read.
    log::warn("deployments of bundles without a readable bundles record", {{"count", static_cast<int64_t>(orphans)}});
  }
  loaded_ = true;
  updateGauges();
  return {};
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
  auto bundles = consumerOptions(service::kBundlesStream, kBundleConsumer, events::kBundleFilter, "bundles");
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
  status_consumer_ = std::make_unique<service::Consumer>(
      hub_.js, consumerOptions(service::kStatusStream, kStatusConsumer, events::kStatusFilter, "status"),
      [this](const bus::Message& message, const service::Delivery& delivery) {
        if (auto forwarded = forwardAgentTermination(message.subject(), message.data(), *hub_.status, *hub_.js,
                                                     options_.public_events)) {
          return *forwarded;
        }
        return handleStatus(message.subject(), message.data(), delivery.delivery_count);
      },
      metrics_, reports);
  FLOTILLA_TRY(bundle_consumer_->start());
  FLOTILLA_TRY(status_consumer_->start());
  bound_ = true;
  return {};
}

Status Scheduler::subscribeRegistrations() {
  auto connection = hub_.connection;
  auto subscription =
      connection->subscribe(events::kRegisterSubject, kRegisterQueue, [this, connection](bus::Message message) {
        events::RegisterReply reply;
        auto request = events::parsePayload<events::RegisterRequest>(message.data());
        if (!request.ok()) {
          metrics_.counter("registrations_total", "Registration requests by result", {{"result", "invalid"}})
              .Increment();
          log::warn("rejecting an unreadable registration", {{"error", request.error().describe()}});
          reply = events::RegisterReply{.id = events::newEventId(),
                                        .time = log::nowRfc3339(),
                                        .accepted = false,
                                        .message = request.error().describe()};
        } else {
          reply = handleRegister(*request);
        }
        if (!message.reply().empty()) {
          auto sent = connection->publish(message.reply(), events::encode(reply).dump());
          if (!sent.ok()) {
            log::warn("cannot answer a registration", {{"error", sent.error().describe()}});
          }
        }
      });
  FLOTILLA_TRY(subscription);
  register_subscription_ = std::move(subscription).value();
  // Make sure the server knows the subscription before anyone relies on it (readiness says so).
  FLOTILLA_TRY(connection->flush());
  subscribed_ = true;
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

void Scheduler::watchLoop() {
  milliseconds delay = options_.retry_base;
  while (!stopping_) {
    auto entry = clusters_watcher_.next(options_.fetch_timeout);
    if (!entry.ok()) {
      metrics_.counter("watch_errors_total", "Failures of the clusters bucket watcher").Increment();
      log::warn("clusters watcher failed, re-opening",
                {{"error", entry.error().describe()}, {"retry_in_ms", static_cast<int64_t>(delay.count())}});
      if (!sleepFor(delay)) {
        break;
      }
      delay = std::min(delay * 2, options_.retry_max);
      // Re-open: the initial values bring every change missed meanwhile; handleClustersEntry ignores repeats.
      auto reopened = hub_.clusters->watch(">");
      if (reopened.ok()) {
        clusters_watcher_ = std::move(reopened).value();
      }
      continue;
    }
    delay = options_.retry_base;
    if (*entry) {
      handleClustersEntry(**entry);
    }
  }
}

void Scheduler::enqueueReconcile(const std::string& cluster) {
  {
    std::lock_guard lock(wake_mutex_);
    if (std::find(reconcile_queue_.begin(), reconcile_queue_.end(), cluster) == reconcile_queue_.end()) {
      reconcile_queue_.push_back(cluster);
    }
  }
  wake_.notify_all();
}

void Scheduler::reconcileLoop() {
  milliseconds delay = options_.retry_base;
  while (!stopping_) {
    std::deque<std::string> work;
    {
      std::unique_lock lock(wake_mutex_);
      // Targeting runs on the newest bundles only once the backlog is handled, so a restart does not briefly
      // deploy an older rendering that a queued BundleEvent is about to replace.
      wake_.wait(lock, [this] { return stopping_.load() || (caught_up_.load() && !reconcile_queue_.empty()); });
      if (stopping_) {
        break;
      }
      work.swap(reconcile_queue_);
    }
    bool everything = std::find(work.begin(), work.end(), "") != work.end();
    Status done;
    if (everything) {
      done = reconcileAll();
    } else {
      for (const auto& cluster : work) {
        done = reconcileCluster(cluster);
        if (!done.ok()) {
          break;
        }
      }
    }
    if (done.ok()) {
      delay = options_.retry_base;
      continue;
    }
    metrics_.counter("reconcile_failures_total", "Re-targeting passes that failed and were retried").Increment();
    log::warn("re-targeting failed, retrying",
              {{"error", done.error().describe()}, {"retry_in_ms", static_cast<int64_t>(delay.count())}});
    for (const auto& cluster : work) {
      enqueueReconcile(cluster);
    }
    if (!sleepFor(delay)) {
      break;
    }
    delay = std::min(delay * 2, options_.retry_max);
  }
}

// ---- registration and the clusters bucket --------------------------------------------------------------------

events::RegisterReply Scheduler::handleRegister(const events::RegisterRequest& request) {
  events::RegisterReply reply{.id = events::newEventId(), .time = log::nowRfc3339()};
  std::string workspace = request.workspace.empty() ? std::string(model::kDefaultNamespace) : request.workspace;
  std::string problem;
  if (!model::isDns1123Label(request.cluster)) {
    problem = "cluster name \"" + request.cluster +
              "\" is not a DNS-1123 label (lower-case a-z, 0-9 and '-', at "
              "most 63 characters, alphanumeric at both ends)";
  } else if (!model::isDns1123Label(workspace)) {
    problem = "workspace \"" + workspace + "\" is not a DNS-1123 label";
  } else if (auto labels = model::validateLabels(request.labels, "labels"); !labels.ok()) {
    problem = labels.error().message;
  }
  auto count = [&](const char* result) {
    metrics_.counter("registrations_total", "Registration requests by result", {{"result", result}}).Increment();
  };
  if (!problem.empty()) {
    count("rejected");
    log::warn("registration rejected", {{"cluster", request.cluster}, {"error", problem}});
    reply.message = problem;
    return reply;
  }

  std::string now = log::nowRfc3339();
  bool targeting_changed = false;
  bool created = false;
  {
    std::lock_guard lock(mutex_);
    auto existing = clusters_.find(request.cluster);
    model::Cluster cluster;
    if (existing != clusters_.end()) {
      cluster = existing->second;
      targeting_changed = cluster.metadata.ns != workspace || cluster.metadata.labels != request.labels;
    } else {
      created = true;
      targeting_changed = true;
      cluster.metadata.name = request.cluster;
      cluster.metadata.creation_timestamp = now;
    }
    cluster.metadata.ns = workspace;
    cluster.metadata.labels = request.labels;
    cluster.status.agent = model::AgentStatus{
        .last_seen = now, .version = request.agent_version, .kubernetes_version = request.kubernetes_version};
    model::Condition registered{.type = "Registered",
                                .status = "True",
                                .reason = "AgentRegistered",
                                .message = "agent " + request.agent_version + " registered",
                                .last_update_time = now,
                                .last_transition_time = cluster.metadata.creation_timestamp};
    cluster.status.conditions = {registered};
    auto put = hub_.clusters->put(clusterRecordKey(request.cluster), model::encode(cluster).dump());
    if (!put.ok()) {
      count("error");
      log::warn("cannot store a registration; the agent will retry",
                {{"cluster", request.cluster}, {"error", put.error().describe()}});
      reply.message = "the hub cannot store the registration right now: " + put.error().describe();
      return reply;
    }
    clusters_[request.cluster] = cluster;
    updateGauges();
  }
  count(created ? "new" : (targeting_changed ? "updated" : "unchanged"));
  log::info(created ? "cluster registered" : "cluster re-registered",
            {{"cluster", request.cluster},
             {"workspace", workspace},
             {"labels", model::formatSelector(model::LabelSelector{.match_labels = request.labels})},
             {"kubernetes_version", request.kubernetes_version},
             {"agent_version", request.agent_version}});
  if (created || targeting_changed) {
    publishPublic(
        events::toCloudEvent(events::cloudEventType("cluster", created ? "registered" : "updated"),
                             std::string(kEventSource), workspace + "/" + request.cluster, events::encode(request)),
        "cluster", {workspace, request.cluster});
  }
  // Always: a re-registration refreshes the cluster summary (versions, last seen) even when nothing moves.
  enqueueReconcile(request.cluster);
  reply.accepted = true;
  reply.cluster_id = request.cluster;
  reply.message = created ? "registered" : "registration updated";
  return reply;
}

void Scheduler::handleClustersEntry(const bus::KvEntry& entry) {
  bool deleted = entry.operation != bus::KvOperation::kPut;
  auto invalid = [&](const Error& error) {
    metrics_.counter("invalid_records_total", "KV records that could not be read (skipped)", {{"bucket", "clusters"}})
        .Increment();
    log::warn("ignoring an unreadable clusters record", {{"key", entry.key}, {"error", error.describe()}});
  };
  if (startsWith(entry.key, "group.")) {
    auto names = keyNames(entry.key, "group", 2);
    if (!names.ok()) {
      invalid(names.error());
      return;
    }
    std::optional<GroupInfo> group;
    if (!deleted) {
      auto parsed = Json::parse(entry.value);
      auto decoded = parsed.ok() ? model::decodeClusterGroup(*parsed, entry.key)
                                 : Result<model::ClusterGroup>(fail(parsed.error()));
      if (!decoded.ok()) {
        invalid(decoded.error());
        return;
      }
      group = groupInfoOf(*decoded);
      // The key is authoritative for identity.
      group->workspace = (*names)[0];
      group->name = (*names)[1];
    }
    bool changed = false;
    bool live = false;
    {
      std::lock_guard lock(mutex_);
      live = loaded_;
      auto it = groups_.find(entry.key);
      if (group) {
        changed = it == groups_.end() || !(it->second == *group);
        groups_[entry.key] = *group;
      } else if (it != groups_.end()) {
        groups_.erase(it);
        changed = true;
      }
    }
    if (changed && live) {
      log::info(deleted ? "cluster group removed" : "cluster group changed",
                {{"workspace", (*names)[0]}, {"group", (*names)[1]}});
      enqueueReconcile("");
    }
    return;
  }
  if (startsWith(entry.key, "cluster.")) {
    auto names = keyNames(entry.key, "cluster", 1);
    if (!names.ok()) {
      invalid(names.error());
      return;
    }
    const std::string& name = (*names)[0];
    std::optional<model::Cluster> cluster;
    if (!deleted) {
      auto decoded = decodeClusterRecord(entry.value);
      if (!decoded.ok()) {
        invalid(decoded.error());
        return;
      }
      cluster = std::move(decoded).value();
      cluster->metadata.name = name;
    }
    bool changed = false;
    bool live = false;
    {
      std::lock_guard lock(mutex_);
      live = loaded_;
      auto it = clusters_.find(name);
      if (cluster) {
        changed = it == clusters_.end() || !(clusterInfoOf(it->second) == clusterInfoOf(*cluster));
        clusters_[name] = *cluster;
      } else if (it != clusters_.end()) {
        clusters_.erase(it);
        changed = true;
      }
      updateGauges();
    }
    if (changed && live) {
      // Written by another scheduler replica or by hand: re-target like a registration would.
      enqueueReconcile(name);
    }
    return;
  }
  if (startsWith(entry.key, "heartbeat.")) {
    auto names = keyNames(entry.key, "heartbeat", 1);
    if (!names.ok() || deleted) {
      return;
    }
    // The value is the agent's Heartbeat payload; its time is what the agent says, the entry time what the
    // hub saw. Either is fine for "last seen"; prefer the payload's.
    std::string at = formatTime(entry.created);
    if (auto parsed = Json::parse(entry.value); parsed.ok()) {
      auto heartbeat = events::decodePayload<events::Heartbeat>(*parsed);
      if (heartbeat.ok() && !heartbeat->time.empty()) {
        at = heartbeat->time;
      }
    }
    bool refresh = false;
    {
      std::lock_guard lock(mutex_);
      std::string& last = last_heartbeat_[(*names)[0]];
      if (at > last) {
        last = at;
        refresh = loaded_ && clusters_.contains((*names)[0]);
      }
    }
    if (refresh) {
      metrics_.counter("heartbeats_total", "Agent heartbeats handled", {{"result", "recorded"}}).Increment();
      std::lock_guard lock(mutex_);
      Affected affected;
      affected.clusters.insert((*names)[0]);
      if (auto written = writeSummaries(affected); !written.ok()) {
        log::warn("cannot write a cluster summary", {{"cluster", (*names)[0]}, {"error", written.error().describe()}});
      }
    }
  }
}

// ---- targeting -------------------------------------------------------------------------------------------------

std::vector<GroupInfo> Scheduler::groupList() const {
  std::vector<GroupInfo> out;
  out.reserve(groups_.size());
  for (const auto& [key, group] : groups_) {
    out.push_back(group);
  }
  return out;
}

Status Scheduler::publishDeploy(const events::DeployEvent& event) {
  auto ack = hub_.js->publish(events::deploySubject(event.cluster), events::encode(event).dump(), event.id);
  FLOTILLA_TRY(ack);
  metrics_.counter("deploys_published_total", "DeployEvents published", {{"action", event.remove ? "delete" : "apply"}})
      .Increment();
  if (ack->duplicate) {
    // The redo of a deploy published before a crash: JetStream kept the first copy.
    metrics_.counter("deploys_deduplicated_total", "DeployEvents JetStream had already stored (redo after a crash)")
        .Increment();
  }
  publishPublic(events::toCloudEvent(event, kEventSource), "bundledeployment", {event.cluster, event.bundle});
  return {};
}

Status Scheduler::loadVariants(BundleInfo& bundle) {
  if (!bundle.targeting || bundle.targeting->variants_object.empty()) {
    return {};
  }
  auto data = hub_.manifests->get(bundle.targeting->variants_object);
  FLOTILLA_TRY(data);
  auto json = Json::parse(*data);
  FLOTILLA_TRY(json);
  auto table = events::decodeBundleVariants(*json);
  FLOTILLA_TRY(table);
  bundle.targeting->variants = std::move(table).value();
  return {};
}

Status Scheduler::reconcilePair(const BundleInfo* bundle, const std::string& workspace, const std::string& bundle_name,
                                const std::string& cluster_name, int64_t clock_ms, Affected& affected,
                                bool& published) {
  std::optional<Placement> want;
  auto cluster = clusters_.find(cluster_name);
  if (bundle != nullptr && bundle->targeting && cluster != clusters_.end()) {
    want = place(*bundle->targeting, clusterInfoOf(cluster->second), groupList());
  }
  if (want && want->hold) {
    // A per-cluster bundle the bundler has not rendered for this cluster yet (it re-renders when it learns about
    // the cluster): keep what runs there now.
    metrics_.counter("variants_held_total", "Placements held: a per-cluster bundle not yet rendered for the cluster")
        .Increment();
    log::info("holding a per-cluster bundle until the bundler renders it for the cluster",
              {{"bundle", bundle_name}, {"cluster", cluster_name}, {"workspace", workspace}});
    return {};
  }
  std::string key = deploymentRecordKey(cluster_name, workspace, bundle_name);
  auto existing = deployments_.find(key);
  const DeploymentRecord* record = existing == deployments_.end() ? nullptr : &existing->second;
  std::string gitrepo = bundle != nullptr ? bundle->gitrepo : (record != nullptr ? record->gitrepo : std::string());

  if (want) {
    const BundleTargeting& targeting = *bundle->targeting;
    bool paused = targeting.paused;
    bool same_release =
        record != nullptr && record->deployment_id == want->deployment_id && record->depends_on == targeting.depends_on;
    DeploymentRecord next = record != nullptr ? *record : DeploymentRecord{};
    if (same_release && record->staged_deployment_id.empty()) {
      if (record->commit == targeting.commit || targeting.commit.empty()) {
        return {};
      }
      // The same content at a newer commit: nothing changes on the cluster (no DeployEvent), but the record
      // follows the commit, so "this cluster runs commit X" stays true for readers.
      next.commit = targeting.commit;
      next.updated = log::nowRfc3339();
      auto put = hub_.deployments->put(key, encode(next).dump());
      FLOTILLA_TRY(put);
      deployments_[key] = next;
      affected.bundles.emplace(workspace, bundle_name);
      affected.gitrepos.emplace(workspace, gitrepo);
      return {};
    }
    next.cluster = cluster_name;
    next.workspace = workspace;
    next.bundle = bundle_name;
    next.gitrepo = gitrepo;
    next.target = want->target;
    next.customization = want->customization;
    next.updated = log::nowRfc3339();
    if (paused || same_release) {
      // Fleet holds a paused bundle's new deployments (they show OutOfSync): nothing goes to the agent, the record
      // remembers what is staged. Un-staging a deployment that equals the released one needs no DeployEvent either.
      next.staged_deployment_id = (paused && !same_release) ? want->deployment_id : std::string();
      if (record != nullptr && next.staged_deployment_id == record->staged_deployment_id) {
        return {};
      }
      auto put = hub_.deployments->put(key, encode(next).dump());
      FLOTILLA_TRY(put);
      if (!next.staged_deployment_id.empty()) {
        metrics_.counter("deploys_held_total", "Deployments staged but not released (bundle paused)").Increment();
        log::info("deployment held: bundle paused", {{"cluster", cluster_name},
                                                     {"bundle", bundle_name},
                                                     {"gitrepo", gitrepo},
                                                     {"deploymentID", want->deployment_id}});
      }
    } else {
      int64_t generation = nextGeneration(record != nullptr ? record->generation : 0, clock_ms);
      events::DeployEvent event{.id = deployMsgId(cluster_name, bundle_name, want->deployment_id, generation),
                                .time = log::nowRfc3339(),
                                .cluster = cluster_name,
                                .workspace = workspace,
                                .bundle = bundle_name,
                                .deployment_id = want->deployment_id,
                                .manifest_id = want->manifest_id,
                                .options = want->options,
                                .depends_on = targeting.depends_on,
                                .commit = targeting.commit,
                                .generation = generation};
      // Publish first, then the record (see the file comment of scheduler.h).
      FLOTILLA_TRY(publishDeploy(event));
      next.commit = targeting.commit;
      next.deployment_id = want->deployment_id;
      next.manifest_id = want->manifest_id;
      next.options = want->options;
      next.depends_on = targeting.depends_on;
      next.staged_deployment_id.clear();
      next.generation = generation;
      auto put = hub_.deployments->put(key, encode(next).dump());
      FLOTILLA_TRY(put);
      published = true;
      log::info("deployment scheduled", {{"cluster", cluster_name},
                                         {"bundle", bundle_name},
                                         {"gitrepo", gitrepo},
                                         {"commit", targeting.commit},
                                         {"deploymentID", want->deployment_id},
                                         {"generation", generation}});
    }
    deployments_[key] = next;
  } else if (record != nullptr) {
    DeploymentRecord gone = *record;
    if (!gone.deployment_id.empty()) {
      int64_t generation = nextGeneration(gone.generation, clock_ms);
      events::DeployEvent event{
          .id = deployMsgId(cluster_name, bundle_name, "", generation),
          .time = log::nowRfc3339(),
          .cluster = cluster_name,
          .workspace = workspace,
          .bundle = bundle_name,
          .remove = true,
          .options = gone.options,  // keepResources and deleteCRDResources decide what the agent removes
          .commit = gone.commit,
          .generation = generation};
      FLOTILLA_TRY(publishDeploy(event));
      published = true;
    }
    FLOTILLA_TRY(hub_.deployments->remove(key));
    if (statuses_.contains(key)) {
      auto removed = hub_.status->remove(bdStatusKey(cluster_name, workspace, bundle_name));
      if (!removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
        return removed;
      }
      statuses_.erase(key);
    }
    deployments_.erase(key);
    log::info("deployment removed",
              {{"cluster", cluster_name},
               {"bundle", bundle_name},
               {"gitrepo", gitrepo},
               {"reason", bundle == nullptr || !bundle->targeting ? "bundle deleted" : "cluster no longer targeted"}});
  } else {
    return {};
  }
  affected.bundles.emplace(workspace, bundle_name);
  if (!gitrepo.empty()) {
    affected.gitrepos.emplace(workspace, gitrepo);
  }
  affected.clusters.insert(cluster_name);
  updateGauges();
  return {};
}

Status Scheduler::reconcileBundle(const BundleInfo& bundle, int64_t clock_ms, Affected& affected, bool& published) {
  std::set<std::string> clusters;
  for (const auto& [name, cluster] : clusters_) {
    clusters.insert(name);
  }
  for (const auto& [key, record] : deployments_) {
    if (record.workspace == bundle.workspace && record.bundle == bundle.bundle) {
      clusters.insert(record.cluster);
    }
  }
  for (const auto& cluster : clusters) {
    FLOTILLA_TRY(reconcilePair(&bundle, bundle.workspace, bundle.bundle, cluster, clock_ms, affected, published));
  }
  return {};
}

Status Scheduler::deleteBundle(const std::string& workspace, const std::string& bundle_name, const std::string& gitrepo,
                               int64_t clock_ms, Affected& affected) {
  std::vector<std::string> clusters;
  for (const auto& [key, record] : deployments_) {
    if (record.workspace == workspace && record.bundle == bundle_name) {
      clusters.push_back(record.cluster);
    }
  }
  bool published = false;
  for (const auto& cluster : clusters) {
    FLOTILLA_TRY(reconcilePair(nullptr, workspace, bundle_name, cluster, clock_ms, affected, published));
  }
  affected.bundles.emplace(workspace, bundle_name);
  if (!gitrepo.empty()) {
    affected.gitrepos.emplace(workspace, gitrepo);
  }
  return {};
}

Status Scheduler::reconcileAll() {
  std::lock_guard lock(mutex_);
  Affected affected;
  int64_t clock_ms = nowMs();
  for (const auto& [key, bundle] : bundles_) {
    if (!bundle.targeting) {
      continue;
    }
    bool published = false;
    FLOTILLA_TRY(reconcileBundle(bundle, clock_ms, affected, published));
    affected.bundles.emplace(bundle.workspace, bundle.bundle);
    if (!bundle.gitrepo.empty()) {
      affected.gitrepos.emplace(bundle.workspace, bundle.gitrepo);
    }
  }
  for (const auto& [name, cluster] : clusters_) {
    affected.clusters.insert(name);
  }
  metrics_.counter("reconciles_total", "Re-targeting passes", {{"scope", "all"}}).Increment();
  return writeSummaries(affected);
}

Status Scheduler::reconcileCluster(const std::string& cluster) {
  std::lock_guard lock(mutex_);
  Affected affected;
  int64_t clock_ms = nowMs();
  for (const auto& [key, bundle] : bundles_) {
    if (!bundle.targeting) {
      continue;
    }
    bool published = false;
    FLOTILLA_TRY(reconcilePair(&bundle, bundle.workspace, bundle.bundle, cluster, clock_ms, affected, published));
  }
  affected.clusters.insert(cluster);
  metrics_.counter("reconciles_total", "Re-targeting passes", {{"scope", "cluster"}}).Increment();
  return writeSummaries(affected);
}

// ---- bundle events ---------------------------------------------------------------------------------------------

Outcome Scheduler::handleBundle(std::string_view data, int64_t clock_ms, uint64_t delivery_count) {
  if (clock_ms <= 0) {
    clock_ms = nowMs();
  }
  auto reject = [&](const std::string& problem) {
    metrics_.counter("invalid_messages_total", "Messages that could not be decoded (term'd)", {{"consumer", "bundles"}})
        .Increment();
    log::error("dropping an invalid bundle event", {{"error", problem}});
    return Outcome::reject("invalid");
  };
  auto json = Json::parse(data);
  if (!json.ok()) {
    return reject(json.error().describe());
  }
  auto message = decodeBundleMessage(*json);
  if (!message.ok()) {
    return reject(message.error().describe());
  }
  const events::BundleEvent& event = message->event;
  if (!model::isDns1123Subdomain(event.bundle) || event.workspace.empty()) {
    return reject("bundle \"" + event.bundle + "\" in workspace \"" + event.workspace + "\" is not a valid name");
  }
  std::lock_guard lock(mutex_);
  std::string id = bundleRecordKey(event.workspace, event.bundle);
  auto existing = bundles_.find(id);
  if (existing != bundles_.end() && olderThan(event.time, existing->second.time)) {
    // A newer rendering of this bundle was handled already (e.g. loaded from KV at start).
    log::info("ignoring a superseded bundle event", {{"bundle", event.bundle},
                                                     {"gitrepo", event.gitrepo},
                                                     {"commit", event.commit},
                                                     {"time", event.time},
                                                     {"newest", existing->second.time}});
    return Outcome::ack("superseded");
  }
  Affected affected;
  if (message->deleted) {
    std::string gitrepo = !event.gitrepo.empty()
                              ? event.gitrepo
                              : (existing != bundles_.end() ? existing->second.gitrepo : std::string());
    auto deleted = deleteBundle(event.workspace, event.bundle, gitrepo, clock_ms, affected);
    if (!deleted.ok()) {
      log::warn("cannot remove a deleted bundle's deployments yet",
                {{"bundle", event.bundle}, {"gitrepo", gitrepo}, {"error", deleted.error().describe()}});
      return Outcome::retry(backoff(delivery_count), "retry");
    }
    bundles_.erase(id);
    auto written = writeSummaries(affected);
    if (!written.ok()) {
      return Outcome::retry(backoff(delivery_count), "retry");
    }
    updateGauges();
    log::info("bundle deleted", {{"bundle", event.bundle}, {"gitrepo", gitrepo}, {"commit", event.commit}});
    return Outcome::ack("deleted");
  }

  auto info = bundleFromEvent(event, existing != bundles_.end() ? &existing->second : nullptr);
  if (info.ok()) {
    if (auto loaded = loadVariants(*info); !loaded.ok()) {
      if (loaded.error().kind != ErrorKind::kInvalid && loaded.error().kind != ErrorKind::kNotFound) {
        log::warn("cannot read a bundle's variants table yet, retrying", {{"bundle", event.bundle},
                                                                          {"variants_object", event.variants_object},
                                                                          {"error", loaded.error().describe()}});
        return Outcome::retry(backoff(delivery_count), "retry");
      }
      info = Result<BundleInfo>(
          fail(ErrorKind::kInvalid, "variants table " + event.variants_object + ": " + loaded.error().message));
    }
  }
  bool invalid_targets = false;
  if (!info.ok()) {
    // The bundler checked fleet.yaml, so this is a contract problem; report it like a render error (the last good
    // deployments keep running) and do not retry.
    invalid_targets = true;
    BundleInfo kept = existing != bundles_.end() ? existing->second : BundleInfo{};
    kept.workspace = event.workspace;
    kept.gitrepo = event.gitrepo;
    kept.bundle = event.bundle;
    kept.time = event.time;
    kept.error = events::RenderError{.message = "invalid targeting: " + info.error().message};
    kept.error_commit = event.commit;
    kept.error_time = event.time;
    info = std::move(kept);
  }
  bundles_[id] = *info;
  const BundleInfo& bundle = bundles_[id];
  affected.bundles.emplace(event.workspace, event.bundle);
  affected.gitrepos.emplace(event.workspace, event.gitrepo);
  for (const auto& [key, record] : deployments_) {
    if (record.workspace == event.workspace && record.bundle == event.bundle) {
      affected.clusters.insert(record.cluster);
    }
  }
  std::string result;
  if (event.error || invalid_targets) {
    metrics_.counter("render_errors_total", "Bundle events reporting a render failure").Increment();
    log::warn("bundle failed to render; its last good deployments stay", {{"bundle", event.bundle},
                                                                          {"gitrepo", event.gitrepo},
                                                                          {"commit", event.commit},
                                                                          {"error", bundle.error->message}});
    result = invalid_targets ? "invalid" : "render-error";
  } else {
    bool published = false;
    auto reconciled = reconcileBundle(bundle, clock_ms, affected, published);
    if (!reconciled.ok()) {
      log::warn("cannot schedule the bundle yet, retrying", {{"bundle", event.bundle},
                                                             {"gitrepo", event.gitrepo},
                                                             {"commit", event.commit},
                                                             {"error", reconciled.error().describe()}});
      return Outcome::retry(backoff(delivery_count), "retry");
    }
    result = published ? "scheduled" : "unchanged";
  }
  auto written = writeSummaries(affected);
  if (!written.ok()) {
    log::warn("cannot write summaries yet, retrying",
              {{"bundle", event.bundle}, {"error", written.error().describe()}});
    return Outcome::retry(backoff(delivery_count), "retry");
  }
  updateGauges();
  if (invalid_targets) {
    metrics_.counter("invalid_messages_total", "Messages that could not be decoded (term'd)", {{"consumer", "bundles"}})
        .Increment();
    return Outcome::reject(result);
  }
  return Outcome::ack(result);
}

// ---- status events ---------------------------------------------------------------------------------------------

Outcome Scheduler::handleStatus(std::string_view subject, std::string_view data, uint64_t delivery_count) {
  auto reject = [&](const std::string& problem, const char* reason) {
    metrics_.counter("invalid_messages_total", "Messages that could not be decoded (term'd)", {{"consumer", "status"}})
        .Increment();
    log::warn("dropping an invalid status message",
              {{"subject", std::string(subject)}, {"reason", reason}, {"error", problem}});
    return Outcome::reject("invalid");
  };
  auto tokens = events::subjectTokens(subject, "flotilla.status");
  if (!tokens.ok() || tokens->size() != 2) {
    return reject(tokens.ok() ? "expected flotilla.status.<cluster>.<bundle>" : tokens.error().describe(), "subject");
  }
  auto json = Json::parse(data);
  if (!json.ok()) {
    return reject(json.error().describe(), "json");
  }
  auto kind = events::payloadKind(*json);
  if (!kind.ok()) {
    return reject(kind.error().describe(), "kind");
  }
  if (*kind == events::Heartbeat::kKind) {
    return handleHeartbeat((*tokens)[0], *json);
  }
  if (*kind != events::StatusEvent::kKind) {
    return reject("unexpected payload kind " + *kind, "kind");
  }
  return handleStatusEvent((*tokens)[0], (*tokens)[1], *json, delivery_count);
}

Outcome Scheduler::handleHeartbeat(const std::string& cluster, const Json& json) {
  auto heartbeat = events::decodePayload<events::Heartbeat>(json);
  if (!heartbeat.ok() || heartbeat->cluster != cluster) {
    metrics_.counter("invalid_messages_total", "Messages that could not be decoded (term'd)", {{"consumer", "status"}})
        .Increment();
    log::warn("dropping an invalid heartbeat",
              {{"cluster", cluster},
               {"error", heartbeat.ok() ? "cluster " + heartbeat->cluster + " on another cluster's subject"
                                        : heartbeat.error().describe()}});
    return Outcome::reject("invalid");
  }
  std::lock_guard lock(mutex_);
  if (!clusters_.contains(cluster)) {
    metrics_.counter("heartbeats_total", "Agent heartbeats handled", {{"result", "unregistered"}}).Increment();
    log::info("heartbeat from a cluster that is not registered", {{"cluster", cluster}});
    return Outcome::ack("unregistered");
  }
  std::string at = heartbeat->time.empty() ? log::nowRfc3339() : heartbeat->time;
  std::string& last = last_heartbeat_[cluster];
  if (at > last) {
    last = at;
  }
  Affected affected;
  affected.clusters.insert(cluster);
  auto written = writeSummaries(affected);
  if (!written.ok()) {
    return Outcome::retry(options_.retry_base, "retry");
  }
  metrics_.counter("heartbeats_total", "Agent heartbeats handled", {{"result", "recorded"}}).Increment();
  return Outcome::ack("heartbeat");
}

const BdStatus* Scheduler::statusOf(const DeploymentRecord& record) const {
  auto it = statuses_.find(deploymentRecordKey(record.cluster, record.workspace, record.bundle));
  return it == statuses_.end() ? nullptr : &it->second;
}

Outcome Scheduler::handleStatusEvent(const std::string& cluster, const std::string& bundle_name, const Json& json,
                                     uint64_t delivery_count) {
  auto decoded = events::decodePayload<events::StatusEvent>(json);
  if (!decoded.ok() || decoded->cluster != cluster || decoded->bundle != bundle_name) {
    // Agents may publish only under their own cluster's subjects; a payload naming another is not trusted.
    metrics_.counter("invalid_messages_total", "Messages that could not be decoded (term'd)", {{"consumer", "status"}})
        .Increment();
    log::warn("dropping an invalid status event",
              {{"cluster", cluster},
               {"bundle", bundle_name},
               {"error", decoded.ok() ? "payload names " + decoded->cluster + "/" + decoded->bundle
                                      : decoded.error().describe()}});
    return Outcome::reject("invalid");
  }
  const events::StatusEvent& event = *decoded;
  auto count = [&](const char* result) {
    metrics_.counter("status_events_total", "Status events handled, by result", {{"result", result}}).Increment();
  };
  std::lock_guard lock(mutex_);
  std::string workspace = event.workspace;
  if (workspace.empty()) {
    for (const auto& [key, record] : deployments_) {
      if (record.cluster == cluster && record.bundle == bundle_name) {
        workspace = record.workspace;
        break;
      }
    }
  }
  std::string key = deploymentRecordKey(cluster, workspace, bundle_name);
  auto record_it = deployments_.find(key);
  Affected affected;
  if (record_it == deployments_.end()) {
    // The deployment was removed (the agent confirms a delete, or reports on a bundle it still tracks).
    if (statuses_.contains(key)) {
      auto removed = hub_.status->remove(bdStatusKey(cluster, workspace, bundle_name));
      if (!removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
        return Outcome::retry(backoff(delivery_count), "retry");
      }
      statuses_.erase(key);
      affected.clusters.insert(cluster);
      affected.bundles.emplace(workspace, bundle_name);
      if (!writeSummaries(affected).ok()) {
        return Outcome::retry(backoff(delivery_count), "retry");
      }
    }
    count("no-deployment");
    log::debug("status for a deployment that does not exist (removed)",
               {{"cluster", cluster}, {"bundle", bundle_name}, {"reason", event.reason}});
    return Outcome::ack("no-deployment");
  }
  const DeploymentRecord& record = record_it->second;
  const BdStatus* stored = statusOf(record);
  bool stale = event.deployment_id != record.deployment_id;
  if (stale) {
    if (event.generation > record.generation && delivery_count < options_.ahead_retries) {
      // The agent answers a DeployEvent whose record is not written yet (in flight elsewhere, or lost in a
      // crash and about to be redone): wait for the record rather than call the report stale.
      count("ahead");
      return Outcome::retry(std::max(options_.retry_base, milliseconds(200)), "ahead");
    }
    if (stored != nullptr && !stored->stale && stored->deployment_id == record.deployment_id) {
      count("stale-dropped");
      log::info("dropping a status report about an older deployment", {{"cluster", cluster},
                                                                       {"bundle", bundle_name},
                                                                       {"reported", event.deployment_id},
                                                                       {"current", record.deployment_id}});
      return Outcome::ack("stale");
    }
  } else if (stored != nullptr && !stored->stale && stored->deployment_id == event.deployment_id &&
             olderThan(event.time, stored->reported)) {
    count("older-dropped");
    return Outcome::ack("older");
  }
  BdStatus next = bdStatusFrom(event);
  next.workspace = workspace;
  next.stale = stale;
  next.updated = log::nowRfc3339();
  auto put = hub_.status->put(bdStatusKey(cluster, workspace, bundle_name), encode(next).dump());
  if (!put.ok()) {
    log::warn("cannot store a status report yet, retrying",
              {{"cluster", cluster}, {"bundle", bundle_name}, {"error", put.error().describe()}});
    return Outcome::retry(backoff(delivery_count), "retry");
  }
  bool changed = stored == nullptr || stored->state != next.state || stored->deployment_id != next.deployment_id ||
                 stored->stale != next.stale;
  statuses_[key] = next;
  affected.clusters.insert(cluster);
  affected.bundles.emplace(workspace, bundle_name);
  if (!record.gitrepo.empty()) {
    affected.gitrepos.emplace(workspace, record.gitrepo);
  }
  auto written = writeSummaries(affected);
  if (!written.ok()) {
    log::warn("cannot write summaries yet, retrying",
              {{"cluster", cluster}, {"bundle", bundle_name}, {"error", written.error().describe()}});
    return Outcome::retry(backoff(delivery_count), "retry");
  }
  count(stale ? "stale-stored" : "stored");
  if (changed && !stale) {
    events::StatusEvent published = event;
    published.workspace = workspace;
    publishPublic(events::toCloudEvent(published, kEventSource), "bundledeployment", {cluster, bundle_name});
  }
  log::debug("status stored", {{"cluster", cluster},
                               {"bundle", bundle_name},
                               {"gitrepo", record.gitrepo},
                               {"state", event.state},
                               {"stale", stale}});
  return Outcome::ack(stale ? "stale-stored" : "stored");
}

// ---- summaries -------------------------------------------------------------------------------------------------

std::vector<DeploymentView> Scheduler::deploymentsOfBundle(const std::string& workspace,
                                                           const std::string& bundle) const {
  std::vector<DeploymentView> out;
  for (const auto& [key, record] : deployments_) {
    if (record.workspace == workspace && record.bundle == bundle) {
      out.push_back(DeploymentView{&record, statusOf(record)});
    }
  }
  return out;
}

std::vector<DeploymentView> Scheduler::deploymentsOfCluster(const std::string& cluster) const {
  std::vector<DeploymentView> out;
  for (const auto& [key, record] : deployments_) {
    if (record.cluster == cluster) {
      out.push_back(DeploymentView{&record, statusOf(record)});
    }
  }
  return out;
}

Status Scheduler::writeSummary(const std::string& key, Json record, std::string_view kind) {
  auto cached = summaries_.find(key);
  if (cached != summaries_.end() && cached->second == record) {
    return {};
  }
  Json stored = record;
  stored["updated"] = log::nowRfc3339();
  auto put = hub_.status->put(key, stored.dump());
  FLOTILLA_TRY(put);
  summaries_[key] = std::move(record);
  metrics_.counter("summaries_written_total", "Summary records written", {{"kind", std::string(kind)}}).Increment();
  return {};
}

Status Scheduler::removeSummary(const std::string& key) {
  if (!summaries_.contains(key)) {
    return {};
  }
  auto removed = hub_.status->remove(key);
  if (!removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
    return removed;
  }
  summaries_.erase(key);
  return {};
}

void Scheduler::noteBundleState(const std::string& workspace, const std::string& bundle, const Json& summary) {
  auto cached = summaries_.find(bundleSummaryKey(workspace, bundle));
  std::string before = cached != summaries_.end() ? cached->second.getString("state") : std::string();
  std::string after = summary.getString("state");
  if (before == after || after.empty()) {
    return;
  }
  Json data = Json::obj({{"workspace", workspace},
                         {"bundle", bundle},
                         {"gitrepo", summary.getString("gitrepo")},
                         {"commit", summary.getString("commit")},
                         {"summary", summary.find("summary") != nullptr ? *summary.find("summary") : Json::object()}});
  publishPublic(events::toCloudEvent(events::cloudEventType("bundle", after), std::string(kEventSource),
                                     workspace + "/" + bundle, std::move(data)),
                "bundle", {workspace, bundle});
}

Status Scheduler::writeSummaries(const Affected& affected) {
  for (const auto& [workspace, bundle] : affected.bundles) {
    auto it = bundles_.find(bundleRecordKey(workspace, bundle));
    auto views = deploymentsOfBundle(workspace, bundle);
    std::string key = bundleSummaryKey(workspace, bundle);
    if (it == bundles_.end() && views.empty()) {
      FLOTILLA_TRY(removeSummary(key));
      continue;
    }
    Json record = bundleSummaryRecord(workspace, bundle, it == bundles_.end() ? nullptr : &it->second, views);
    noteBundleState(workspace, bundle, record);
    FLOTILLA_TRY(writeSummary(key, std::move(record), "bundle"));
  }
  for (const auto& [workspace, gitrepo] : affected.gitrepos) {
    std::map<std::string, GitRepoBundle> members;
    for (const auto& [key, bundle] : bundles_) {
      if (bundle.workspace == workspace && bundle.gitrepo == gitrepo) {
        members[bundle.bundle].bundle = &bundle;
      }
    }
    for (const auto& [key, record] : deployments_) {
      if (record.workspace == workspace && record.gitrepo == gitrepo) {
        members[record.bundle].deployments.push_back(DeploymentView{&record, statusOf(record)});
      }
    }
    std::string key = gitRepoSummaryKey(workspace, gitrepo);
    if (members.empty()) {
      FLOTILLA_TRY(removeSummary(key));
      continue;
    }
    std::vector<GitRepoBundle> list;
    for (auto& [name, member] : members) {
      list.push_back(std::move(member));
    }
    FLOTILLA_TRY(writeSummary(key, gitRepoSummaryRecord(workspace, gitrepo, list), "gitrepo"));
  }
  for (const auto& cluster : affected.clusters) {
    auto it = clusters_.find(cluster);
    auto views = deploymentsOfCluster(cluster);
    std::string key = clusterSummaryKey(cluster);
    if (it == clusters_.end() && views.empty()) {
      FLOTILLA_TRY(removeSummary(key));
      continue;
    }
    auto beat = last_heartbeat_.find(cluster);
    FLOTILLA_TRY(writeSummary(key,
                              clusterSummaryRecord(cluster, it == clusters_.end() ? nullptr : &it->second, views,
                                                   beat == last_heartbeat_.end() ? std::string() : beat->second),
                              "cluster"));
  }
  return {};
}

// ---- public events and gauges ----------------------------------------------------------------------------------

void Scheduler::publishPublic(const events::CloudEvent& event, std::string_view kind,
                              std::initializer_list<std::string_view> parts) {
  if (!options_.public_events) {
    return;
  }
  // Informational: a failure is logged and counted but never holds up the pipeline.
  auto ack = hub_.js->publish(events::eventsSubject(kind, parts), events::encode(event).dump(),
                              "event/" + event.type + "/" + event.id);
  if (ack.ok()) {
    metrics_.counter("public_events_total", "CloudEvents published on flotilla.events.>", {{"type", event.type}})
        .Increment();
  } else {
    metrics_.counter("public_event_failures_total", "CloudEvents that could not be published").Increment();
    log::warn("cannot publish a public event", {{"type", event.type}, {"error", ack.error().describe()}});
  }
}

void Scheduler::updateGauges() {
  metrics_.gauge("clusters", "Registered clusters").Set(static_cast<double>(clusters_.size()));
  metrics_.gauge("bundles", "Bundles known").Set(static_cast<double>(bundles_.size()));
  metrics_.gauge("deployments", "BundleDeployment records").Set(static_cast<double>(deployments_.size()));
}

// ---- introspection ---------------------------------------------------------------------------------------------

std::optional<model::Cluster> Scheduler::cluster(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = clusters_.find(name);
  if (it == clusters_.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::optional<DeploymentRecord> Scheduler::deployment(const std::string& cluster, const std::string& workspace,
                                                      const std::string& bundle) const {
  std::lock_guard lock(mutex_);
  auto it = deployments_.find(deploymentRecordKey(cluster, workspace, bundle));
  if (it == deployments_.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::string Scheduler::lastHeartbeat(const std::string& cluster) const {
  std::lock_guard lock(mutex_);
  auto it = last_heartbeat_.find(cluster);
  return it == last_heartbeat_.end() ? std::string() : it->second;
}

}  // namespace flotilla::scheduler
