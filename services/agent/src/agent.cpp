#include "flotilla/agent/agent.h"

#include <algorithm>
#include <exception>

#include <malloc.h>
#include <unistd.h>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/identity/permissions.h"
#include "flotilla/model/duration.h"
#include "flotilla/model/labels.h"
#include "flotilla/service/hub.h"
#include "flotilla/service/runtime.h"

namespace flotilla::agent {

using std::chrono::milliseconds;

Result<events::StringMap> parseLabels(std::string_view text) {
  events::StringMap labels;
  for (const auto& item : split(text, ',')) {
    std::string pair = trim(item);
    if (pair.empty()) {
      continue;
    }
    auto eq = pair.find('=');
    if (eq == std::string::npos) {
      return fail(ErrorKind::kInvalid, "--labels: \"" + pair + "\" is not key=value");
    }
    std::string key = trim(pair.substr(0, eq));
    std::string value = trim(pair.substr(eq + 1));
    FLOTILLA_TRY(model::validateLabelKey(key));
    FLOTILLA_TRY(model::validateLabelValue(value));
    labels[key] = value;
  }
  return labels;
}

Result<milliseconds> parseInterval(std::string_view text) {
  std::string value = trim(text);
  if (!value.empty() && value.find_first_not_of("0123456789") == std::string::npos) {
    return milliseconds(std::stoll(value) * 1000);
  }
  auto duration = model::parseDuration(value);
  FLOTILLA_TRY(duration);
  if (duration->count() <= 0) {
    return fail(ErrorKind::kInvalid, "interval must be positive, got \"" + value + "\"");
  }
  return *duration;
}

Result<milliseconds> parseHold(std::string_view text) {
  std::string value = trim(text);
  if (value == "0") {
    return milliseconds(0);
  }
  if (!value.empty() && value.find_first_not_of("0123456789") == std::string::npos) {
    return milliseconds(std::stoll(value) * 1000);
  }
  auto duration = model::parseDuration(value);  // rejects negative durations
  FLOTILLA_TRY(duration);
  return *duration;
}

std::string heartbeatSubjectFor(std::string_view cluster) {
  return events::statusSubject(cluster, "");
}

std::string consumerName(std::string_view cluster) {
  return "agent-" + events::escapeToken(cluster);
}

std::string deployKey(const bus::Message& message) {
  // A small JSON document (the manifest itself is in the object store): parsing it twice costs microseconds.
  auto payload = Json::parse(message.data());
  if (payload.ok()) {
    const Json* workspace = payload->find("workspace");
    const Json* bundle = payload->find("bundle");
    if (workspace != nullptr && workspace->isString() && bundle != nullptr && bundle->isString()) {
      return ownerOf(workspace->asString(), bundle->asString());
    }
  }
  return std::string(message.subject());
}

Agent::Agent(AgentOptions options, std::shared_ptr<bus::JetStream> js, std::shared_ptr<kube::KubeClient> kube,
             Metrics& metrics)
    : options_(std::move(options)),
      js_(std::move(js)),
      manifests_(
          std::make_unique<ManifestSource>(js_->connection(), options_.cluster_name, metrics, options_.manifests)),
      kube_(std::move(kube)),
      metrics_(metrics) {
  options_.retry.wake = [this] { wakeParked(); };
  drift_ = std::make_unique<DriftWatcher>(*kube_, metrics_,
                                          WatcherOptions{.fight_corrections = options_.fight_corrections,
                                                         .fight_window = options_.fight_window,
                                                         .cluster = options_.cluster_name,
                                                         .per_namespace = options_.namespaces.restricted()});
  drift_->setOnChange([this](const std::string& owner) { return handler_->reportFromWatch(owner); });
  options_.retry.drift = drift_.get();
  // The watch cache vouches for the owner of the objects it watches, so a re-deploy skips their reads.
  applier_ = std::make_unique<Applier>(
      *kube_,
      ApplierOptions{
          .crd_timeout = options_.crd_timeout,
          .owned_version = [drift = drift_.get()](const ObjectRef& ref,
                                                  const std::string& owner) { return drift->ownedVersion(ref, owner); },
          .scope = options_.namespaces},
      metrics_, [this] { return stopping_.load(); });
  inventories_ = std::make_unique<InventoryStore>(*kube_, options_.agent_namespace);
  publisher_ = std::make_unique<StatusPublisher>(js_, options_.cluster_name, metrics_, options_.agent_version);
  handler_ = std::make_unique<DeployHandler>(options_.cluster_name, *applier_, *inventories_, *manifests_, *publisher_,
                                             metrics_, options_.retry);
  api_versions_ = std::make_unique<ApiVersionsTracker>(*kube_, metrics_, options_.cluster_name, options_.api_versions);
}

Result<std::unique_ptr<Agent>> Agent::create(AgentOptions options, std::shared_ptr<bus::JetStream> js,
                                             std::shared_ptr<kube::KubeClient> kube, Metrics& metrics) {
  if (options.cluster_name.empty()) {
    return fail(ErrorKind::kInvalid, "--cluster-name is required");
  }
  if (!js || !kube) {
    return fail(ErrorKind::kInvalid, "agent: JetStream and Kubernetes client are required");
  }
  return std::unique_ptr<Agent>(new Agent(std::move(options), std::move(js), std::move(kube), metrics));
}

Agent::~Agent() {
  stop();
}

Status Agent::start() {
  std::lock_guard lock(mutex_);
  if (started_) {
    return {};
  }
  started_ = true;
  drift_->start();
  consumer_thread_ = std::thread([this] { consumerLoop(); });
  heartbeat_thread_ = std::thread([this] { heartbeatLoop(); });
  resync_thread_ = std::thread([this] { resyncLoop(); });
  api_versions_thread_ = std::thread([this] { apiVersionsLoop(); });
  trim_thread_ = std::thread([this] { trimLoop(); });
  return {};
}

void Agent::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  drift_->stop();  // its worker calls into the handler: it ends first
  for (auto* thread : {&consumer_thread_, &heartbeat_thread_, &resync_thread_, &api_versions_thread_, &trim_thread_}) {
    if (thread->joinable()) {
      thread->join();
    }
  }
  reregister_subscription_.unsubscribe();
  std::shared_ptr<service::Consumer> consumer;
  {
    std::lock_guard lock(consumer_mutex_);
    consumer = consumer_;
  }
  if (consumer) {
    consumer->stop();
  }
  bound_ = false;
}

void Agent::wakeParked() {
  std::shared_ptr<service::Consumer> consumer;
  {
    std::lock_guard lock(consumer_mutex_);
    consumer = consumer_;
  }
  if (consumer) {
    consumer->wakeParked();
  }
}

bool Agent::ready(std::string& why) const {
  return service::readyWhen(why,
                            {{registered_, "not registered with the hub yet"}, {bound_, "deploy consumer not bound"}});
}

std::string Agent::clusterId() const {
  std::lock_guard lock(mutex_);
  return cluster_id_;
}

bool Agent::sleepFor(milliseconds duration) {
  std::unique_lock lock(mutex_);
  return !wake_.wait_for(lock, duration, [this] { return stopping_.load(); });
}

// ---- registration ---------------------------------------------------------------------------------------------

Result<events::RegisterReply> Agent::registerOnce(const std::vector<std::string>& api_versions) {
  events::RegisterRequest request{.id = events::newEventId(),
                                  .time = log::nowRfc3339(),
                                  .cluster = options_.cluster_name,
                                  .workspace = options_.workspace,
                                  .labels = options_.labels,
                                  .agent_version = options_.agent_version,
                                  .api_versions = api_versions};
  auto version = kube_->serverVersion();
  if (version.ok()) {
    request.kubernetes_version = version->git_version;
  } else {
    log::warn("cannot read the Kubernetes version; registering without it",
              {{"cluster", options_.cluster_name}, {"error", version.error().describe()}});
  }
  auto reply = js_->connection()->request(identity::agentRegisterSubject(options_.cluster_name),
                                          events::encode(request).dump(), options_.register_timeout);
  FLOTILLA_TRY(reply);
  auto decoded = events::parsePayload<events::RegisterReply>(reply->data());
  FLOTILLA_TRY(decoded);
  return decoded;
}

bool Agent::registerWithHub() {
  milliseconds delay = options_.register_backoff_min;
  for (int attempt = 1; !stopping_; ++attempt) {
    const std::vector<std::string> api_versions = api_versions_->discover();
    auto reply = registerOnce(api_versions);
    std::string problem;
    if (!reply.ok()) {
      problem = reply.error().describe();
    } else if (!reply->accepted) {
      problem = "registration rejected: " + reply->message;
    } else {
      std::string id = reply->cluster_id.empty() ? options_.cluster_name : reply->cluster_id;
      if (id != options_.cluster_name) {
        // The hub knows the cluster by another name: deploy and status subjects use the hub's.
        log::warn("the hub assigned a different cluster id", {{"cluster", options_.cluster_name}, {"cluster_id", id}});
        publisher_ = std::make_unique<StatusPublisher>(js_, id, metrics_, options_.agent_version);
        manifests_->setCluster(id);
        handler_ = std::make_unique<DeployHandler>(id, *applier_, *inventories_, *manifests_, *publisher_, metrics_,
                                                   options_.retry);
      }
      {
        std::lock_guard lock(mutex_);
        cluster_id_ = id;
      }
      api_versions_->reported(api_versions);
      registered_ = true;
      wake_.notify_all();
      log::info("registered with the hub",
                {{"cluster", id}, {"attempts", attempt}, {"api_versions", static_cast<int64_t>(api_versions.size())}});
      return true;
    }
    metrics_.counter("register_retries_total", "Failed registration attempts (retried with backoff)").Increment();
    log::warn("registration failed, retrying", {{"cluster", options_.cluster_name},
                                                {"attempt", attempt},
                                                {"retry_in_ms", static_cast<int64_t>(delay.count())},
                                                {"error", problem}});
    if (!sleepFor(delay)) {
      break;
    }
    delay = std::min(delay * 2, options_.register_backoff_max);
  }
  return false;
}

bool Agent::reregister(const std::vector<std::string>& api_versions, std::string_view why) {
  auto reply = registerOnce(api_versions);
  std::string problem = !reply.ok() ? reply.error().describe() : (!reply->accepted ? reply->message : std::string());
  if (problem.empty() && !reply->cluster_id.empty() && reply->cluster_id != clusterId()) {
    // The subjects in use cannot change under a running consumer; the next start registers afresh.
    problem = "the hub answered with another cluster id (" + reply->cluster_id + ")";
  }
  if (!problem.empty()) {
    log::warn("registering again failed, retrying",
              {{"cluster", clusterId()}, {"why", std::string(why)}, {"error", problem}});
    return false;
  }
  log::info("registered again", {{"cluster", clusterId()},
                                 {"why", std::string(why)},
                                 {"api_versions", static_cast<int64_t>(api_versions.size())}});
  return true;
}

void Agent::answerReregisterAsks() {
  if (!reregister_subscribed_) {
    auto subscribed = js_->connection()->subscribe(identity::agentReregisterSubject(clusterId()), "",
                                                   [this](bus::Message /*ask*/) { reregister_asked_ = true; });
    if (!subscribed.ok()) {
      metrics_.counter("reregister_subscribe_failures_total", "Subscriptions to the hub's asks that failed")
          .Increment();
      log::warn("cannot listen for the hub's asks to register again; retrying with the next heartbeat",
                {{"cluster", clusterId()}, {"error", subscribed.error().describe()}});
      return;
    }
    reregister_subscription_ = std::move(subscribed).value();
    reregister_subscribed_ = true;
  }
  if (!reregister_asked_.exchange(false)) {
    return;
  }
  const bool accepted = reregister(api_versions_->discover(), "the hub has no record of this cluster");
  metrics_
      .counter("reregistrations_total", "Registrations the hub asked for, by result",
               {{"result", accepted ? "accepted" : "failed"}})
      .Increment();
  if (!accepted) {
    reregister_asked_ = true;  // tried again with the next heartbeat
  }
}

void Agent::apiVersionsLoop() {
  {
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [this] { return stopping_.load() || registered_.load(); });
  }
  api_versions_->run([this] { return stopping_.load(); }, [this](milliseconds delay) { return sleepFor(delay); },
                     [this](const std::vector<std::string>& api_versions) {
                       return reregister(api_versions, "the cluster's API versions changed");
                     });
}

// ---- consumer -------------------------------------------------------------------------------------------------

service::ConsumerOptions Agent::consumerOptions(const std::string& cluster) {
  service::ConsumerOptions consumer;
  consumer.service = "agent";
  consumer.label = "deploy";
  consumer.stream = service::kDeployStream;
  // The scheduler creates the durable when the cluster registers (service::agentDeployConsumer); the agent only
  // binds it and takes its ack_wait and delivery bound from it.
  consumer.config = service::agentDeployConsumer(cluster);
  consumer.create = false;
  // Different bundles in parallel, one bundle's deploys in stream order; parked ones hold no slot.
  consumer.workers = options_.parallel_bundles;
  consumer.queue = 2;
  consumer.key = deployKey;
  consumer.fetch_timeout = options_.fetch_timeout;
  consumer.budget = options_.budget;
  consumer.ack_sync = false;
  consumer.on_handled = [this](const Outcome& outcome, double) {
    metrics_.counter("deploys_total", "Deploy events handled, by outcome", {{"outcome", outcome.result}}).Increment();
  };
  // An agent writes no KV and publishes only under its status subjects: the record goes to the scheduler there,
  // which stores it and publishes the public event.
  consumer.on_terminated = [this, cluster](const events::MessageTerminated& record) {
    auto sent = js_->publish(heartbeatSubjectFor(cluster), events::encode(record).dump(),
                             "terminated/" + record.consumer + "/" + std::to_string(record.stream_sequence));
    if (!sent.ok()) {
      log::warn("cannot report a terminated deploy to the hub", {{"error", sent.error().describe()}});
    }
  };
  return consumer;
}

bool Agent::bindConsumer() {
  std::string cluster = clusterId();
  auto options = consumerOptions(cluster);
  const std::string durable = options.config.durable;
  auto consumer = std::make_shared<service::Consumer>(
      js_, std::move(options),
      [this](const bus::Message& message, const Delivery& delivery) { return handleDeploy(message, delivery); },
      metrics_, service::TerminationReports{.status = nullptr, .public_event = false});
  {
    std::lock_guard lock(consumer_mutex_);
    consumer_ = consumer;
  }
  milliseconds delay = options_.register_backoff_min;
  while (!stopping_) {
    auto started = consumer->start();
    if (started.ok()) {
      bound_ = true;
      log::info("deploy consumer bound", {{"cluster", cluster}, {"consumer", durable}});
      return true;
    }
    const bool absent = started.error().kind == ErrorKind::kNotFound;
    metrics_
        .counter("consumer_setup_retries_total", "Failed attempts to bind the deploy consumer, by reason",
                 {{"reason", absent ? "absent" : "error"}})
        .Increment();
    log::warn(absent ? "the deploy consumer does not exist yet (the hub creates it when the cluster registers); waiting"
                     : "cannot bind the deploy consumer, retrying",
              {{"cluster", cluster},
               {"consumer", durable},
               {"retry_in_ms", static_cast<int64_t>(delay.count())},
               {"error", started.error().describe()}});
    if (!sleepFor(delay)) {
      break;
    }
    delay = std::min(delay * 2, options_.register_backoff_max);
  }
  return false;
}

void Agent::consumerLoop() {
  if (registerWithHub()) {
    bindConsumer();
  }
}

// ---- heartbeat and resync -------------------------------------------------------------------------------------

void Agent::heartbeatLoop() {
  {
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [this] { return stopping_.load() || registered_.load(); });
  }
  while (!stopping_) {
    answerReregisterAsks();
    std::string cluster = clusterId();
    events::Heartbeat heartbeat{.id = events::newEventId(),
                                .time = log::nowRfc3339(),
                                .cluster = cluster,
                                .agent_version = options_.agent_version};
    auto sent = js_->publish(heartbeatSubjectFor(cluster), events::encode(heartbeat).dump(),
                             "heartbeat/" + events::escapeToken(cluster) + "/" + heartbeat.id);
    if (sent.ok()) {
      metrics_.counter("heartbeats_total", "Heartbeats published").Increment();
      log::debug("heartbeat sent", {{"cluster", cluster}});
    } else {
      metrics_.counter("heartbeat_failures_total", "Heartbeats that could not be published").Increment();
      log::warn("heartbeat failed", {{"cluster", cluster}, {"error", sent.error().describe()}});
    }
    if (!sleepFor(options_.heartbeat_interval)) {
      return;
    }
  }
}

void Agent::resyncLoop() {
  {
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [this] { return stopping_.load() || registered_.load(); });
  }
  bool seeded = false;
  seedOnce(seeded);  // at once, not after the first interval: the watch then re-lists what the bundles hold
  while (sleepFor(options_.resync_interval)) {
    try {
      resyncOnce(seeded);
    } catch (const std::exception& e) {
      metrics_.counter("handler_exceptions_total", "Exceptions caught around the deploy handler").Increment();
      log::error("resync threw", {{"cluster", clusterId()}, {"error", std::string(e.what())}});
    }
  }
}

void Agent::seedOnce(bool& seeded) {
  if (seeded) {
    return;
  }
  // Bundles applied before this process started: re-report them once, then watch them like the others.
  auto loaded = handler_->seedFromCluster();
  if (loaded.ok()) {
    seeded = true;
  } else {
    metrics_.counter("resync_errors_total", "Health re-checks that could not read the cluster").Increment();
    log::warn("cannot list inventories", {{"cluster", clusterId()}, {"error", loaded.error().describe()}});
  }
}

void Agent::resyncOnce(bool& seeded) {
  seedOnce(seeded);
  handler_->resync();
  auto reaped = handler_->reapReleased();
  if (!reaped.ok()) {
    metrics_.counter("reap_errors_total", "Rounds of the held-object reaper that could not read the cluster")
        .Increment();
    log::warn("cannot reap held objects", {{"cluster", clusterId()}, {"error", reaped.error().describe()}});
  }
}

// ---- memory ---------------------------------------------------------------------------------------------------

namespace {

//! How long the deploys must be quiet before the freed heap is handed back: a burst of deploys reuses what the
//! previous ones freed, so trimming between them would only cost page faults.
constexpr milliseconds kTrimQuiet{1000};

//! The resident set in bytes (/proc/self/statm), 0 when unreadable.
int64_t residentBytes() {
  auto statm = readFile("/proc/self/statm");
  if (!statm.ok()) {
    return 0;
  }
  auto fields = split(*statm, ' ');
  return fields.size() > 1 ? std::stoll(fields[1]) * sysconf(_SC_PAGESIZE) : 0;
}

}  // namespace

Outcome Agent::handleDeploy(const bus::Message& message, const Delivery& delivery) {
  {
    std::lock_guard lock(mutex_);
    ++deploys_in_flight_;
  }
  struct Done {
    Agent& agent;
    ~Done() {
      {
        std::lock_guard lock(agent.mutex_);
        --agent.deploys_in_flight_;
        ++agent.deploys_handled_;
      }
      agent.wake_.notify_all();
    }
  } done{*this};
  return handler_->handle(message.data(), delivery);
}

void Agent::trimLoop() {
  // Applying a bundle parses its manifest and the API server's answers into short-lived JSON trees on several
  // threads; glibc keeps the freed pages in its arenas (free() returns only the top of the main heap), so after a
  // burst the process stays as large as at its peak although it holds far less. malloc_trim hands the free pages
  // of every arena back once the deploys have settled (bench_agent: see bench/README.md). Idle connections to the
  // API server are closed at the same moment.
  std::unique_lock lock(mutex_);
  uint64_t trimmed_after = 0;
  while (!stopping_) {
    wake_.wait(lock, [&] { return stopping_ || (deploys_in_flight_ == 0 && deploys_handled_ != trimmed_after); });
    const uint64_t handled = deploys_handled_;
    if (wake_.wait_for(lock, kTrimQuiet,
                       [&] { return stopping_ || deploys_in_flight_ > 0 || deploys_handled_ != handled; })) {
      continue;  // more deploys (or stop): wait for them to settle
    }
    trimmed_after = handled;
    lock.unlock();
    const int64_t before = residentBytes();
    // The keep-alive connections the burst left in the pool hold TLS state and buffers (~70 KiB each) while the
    // agent idles; the next deploy opens a fresh one (one handshake), the watches keep their own.
    kube_->http().closeIdle();
    malloc_trim(0);
    const int64_t after = residentBytes();
    metrics_.counter("memory_trims_total", "Times the heap freed by a burst of deploys was returned to the OS")
        .Increment();
    metrics_.counter("memory_trimmed_bytes_total", "Resident bytes returned to the OS after bursts of deploys")
        .Increment(static_cast<double>(std::max<int64_t>(0, before - after)));
    log::debug("returned the memory the deploys freed to the OS",
               {{"resident_before", before}, {"resident_after", after}});
    lock.lock();
  }
}

}  // namespace flotilla::agent
