#include "sim_agents.h"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <optional>
#include <set>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/manifest.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/subjects.h"
#include "flotilla/identity/auth_dir.h"
#include "flotilla/identity/permissions.h"
#include "flotilla/identity/secret_file.h"

namespace flotilla::bench {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr std::string_view kAgentVersion = "simulated";
constexpr milliseconds kRegisterTimeout{60000};
//! After a pull answer other than a timeout (e.g. the durable not there yet).
constexpr milliseconds kPullRetry{1000};
//! A TLS login while thousands of others are made takes longer than the default 2 s.
constexpr milliseconds kConnectTimeout{10000};

}  // namespace

struct SimulatedAgents::Counters {
  std::atomic<uint64_t> deploys{0}, redeliveries{0}, republished{0}, applies{0}, duplicate_applies{0},
      manifest_requests{0}, manifest_refusals{0}, pulls{0}, pull_timeouts{0}, pull_other_status{0}, heartbeats{0},
      publish_failures{0};
};

namespace {

int64_t headerInt(const bus::Message& msg, std::string_view name) {
  auto value = msg.header(name);
  if (!value) {
    return -1;
  }
  try {
    return std::stoll(*value);
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

//! One simulated agent: its connection, its pull and the deploys waiting for their manifest.
struct SimulatedAgents::Agent {
  struct Pending {
    std::string ack_subject;  //!< the deploy message's reply ($JS.ACK...)
    events::DeployEvent event;
    int64_t received = 0;  //!< manifest bytes so far
  };

  std::string cluster;
  bool registered = false;  //!< connected and registered: the ticker pulls and sends heartbeats (mutex)
  std::string creds_file;
  std::string inbox;            //!< _INBOX.agent-<cluster>
  std::string pull_subject;     //!< $JS.API.CONSUMER.MSG.NEXT.FLOTILLA_DEPLOY.agent-<cluster>
  std::string pull_prefix;      //!< <inbox>.pull.
  std::string manifest_prefix;  //!< <inbox>.m.
  //! <inbox>.register: the registration's answer comes to the agent's own subscription, not to a request of
  //! libnats (whose reply subscription would start a delivery thread per connection, 10,000 threads in all).
  std::string registration_inbox;
  std::optional<std::string> registration_reply;  //!< mutex
  std::condition_variable registration_answered;
  const SimulatedAgentsOptions* options = nullptr;
  Counters* counters = nullptr;
  std::shared_ptr<bus::Connection> connection;
  bus::Subscription subscription;

  std::mutex mutex;
  uint64_t pull_id = 0;
  int pull_left = 0;  //!< messages still due on the outstanding pull; 0: none outstanding
  Clock::time_point pull_due = Clock::time_point::max();  //!< when the ticker sends the next pull
  Clock::time_point next_heartbeat;
  uint64_t next_request = 0;
  std::map<uint64_t, Pending> pending;
  std::set<std::string> applied;  //!< "<bundle>\n<deploymentID>"
  //! "<bundle>\n<deploymentID>" -> the stream sequence it first came in: another sequence is a second publish
  std::map<std::string, uint64_t> first_sequence;
  int64_t sequence = 0;

  void publish(std::string_view subject, std::string_view data, const bus::Headers& headers = {}) {
    if (!connection->publish(subject, data, headers).ok()) {
      ++counters->publish_failures;
    }
  }

  // Requires mutex.
  void sendPull() {
    pull_left = options->pull_batch;
    pull_due = Clock::time_point::max();
    const auto expires = std::chrono::duration_cast<std::chrono::nanoseconds>(options->pull_expires).count();
    const std::string body =
        R"({"batch":)" + std::to_string(options->pull_batch) + R"(,"expires":)" + std::to_string(expires) + "}";
    ++counters->pulls;
    if (!connection->publishRequest(pull_subject, pull_prefix + std::to_string(++pull_id), body).ok()) {
      ++counters->publish_failures;
      pull_left = 0;
      pull_due = Clock::now() + kPullRetry;
    }
  }

  // Requires mutex. A delivery used up one message of the pull.
  void deliveredOne() {
    if (pull_left > 0 && --pull_left == 0) {
      sendPull();
    }
  }

  void onMessage(const bus::Message& msg) {
    if (startsWith(msg.reply(), "$JS.ACK.")) {
      onDeploy(msg);
    } else if (startsWith(msg.subject(), pull_prefix)) {
      onPullStatus(msg);
    } else if (startsWith(msg.subject(), manifest_prefix)) {
      onManifest(msg);
    } else if (msg.subject() == registration_inbox) {
      std::lock_guard lock(mutex);
      registration_reply = std::string(msg.data());
      registration_answered.notify_all();
    }
  }

  void onPullStatus(const bus::Message& msg) {
    const std::string status = msg.header("Status").value_or("");
    std::lock_guard lock(mutex);
    if (msg.subject() != pull_prefix + std::to_string(pull_id) || status == "100") {
      return;  // an older pull's answer, or an idle heartbeat
    }
    pull_left = 0;
    if (status == "408") {
      ++counters->pull_timeouts;
      sendPull();
      return;
    }
    ++counters->pull_other_status;
    pull_due = Clock::now() + kPullRetry;
  }

  void onDeploy(const bus::Message& msg) {
    ++counters->deploys;
    std::string ack(msg.reply());
    auto event = events::parsePayload<events::DeployEvent>(msg.data());
    auto metadata = msg.metadata();
    std::lock_guard lock(mutex);
    deliveredOne();
    if (metadata.ok() && metadata->num_delivered > 1) {
      ++counters->redeliveries;
    } else if (metadata.ok() && event.ok()) {
      // A first delivery: the scheduler published this deploymentID to this cluster before if another stream message
      // carried it (redeliveries of one message are counted above, not here).
      auto [it, inserted] =
          first_sequence.emplace(event->bundle + "\n" + event->deployment_id, metadata->stream_sequence);
      if (!inserted && it->second != metadata->stream_sequence) {
        ++counters->republished;
      }
    }
    if (!event.ok() || event->remove) {
      publish(ack, "+ACK");  // a delete: nothing to apply here (the real agent prunes, then reports)
      return;
    }
    const uint64_t request = ++next_request;
    pending[request] = Pending{.ack_subject = std::move(ack), .event = std::move(event).value()};
    askManifest(request, 0);
  }

  // Requires mutex.
  void askManifest(uint64_t request, int64_t offset) {
    const Pending& p = pending.at(request);
    events::ManifestRequest ask{.id = events::newEventId(),
                                .time = log::nowRfc3339(),
                                .manifest_id = p.event.manifest_id,
                                .offset = offset,
                                .workspace = p.event.workspace,
                                .bundle = p.event.bundle,
                                .generation = p.event.generation};
    ++counters->manifest_requests;
    if (!connection
             ->publishRequest(events::manifestSubject(cluster), manifest_prefix + std::to_string(request),
                              events::encode(ask).dump())
             .ok()) {
      ++counters->publish_failures;
    }
  }

  void onManifest(const bus::Message& msg) {
    const std::string_view number = msg.subject().substr(manifest_prefix.size());
    uint64_t request = 0;
    std::from_chars(number.data(), number.data() + number.size(), request);
    std::lock_guard lock(mutex);
    auto it = pending.find(request);
    if (it == pending.end()) {
      return;
    }
    const int64_t size = headerInt(msg, events::kManifestSizeHeader);
    if (size < 0) {  // refused: the agent naks and retries the deploy later
      ++counters->manifest_refusals;
      publish(it->second.ack_subject, R"(-NAK {"delay":1000000000})");
      pending.erase(it);
      return;
    }
    it->second.received = headerInt(msg, events::kManifestOffsetHeader) + static_cast<int64_t>(msg.data().size());
    if (it->second.received < size) {
      askManifest(request, it->second.received);
      return;
    }
    reportApplied(it->second);
    pending.erase(it);
  }

  // Requires mutex. The deployment is "applied": Ready is reported with the agent's message id, then the deploy acked.
  void reportApplied(const Pending& p) {
    ++counters->applies;
    if (!applied.insert(p.event.bundle + "\n" + p.event.deployment_id).second) {
      ++counters->duplicate_applies;
    }
    events::StatusEvent status{.time = log::nowRfc3339(),
                               .cluster = cluster,
                               .workspace = p.event.workspace,
                               .bundle = p.event.bundle,
                               .deployment_id = p.event.deployment_id,
                               .generation = p.event.generation,
                               .sequence = ++sequence,
                               .state = "Ready",
                               .agent_version = std::string(kAgentVersion)};
    status.id = events::statusMsgId(cluster, status.bundle, status.deployment_id, status.state, status.sequence);
    publish(events::statusSubject(cluster, status.bundle), events::encode(status).dump(), {{"Nats-Msg-Id", status.id}});
    publish(p.ack_subject, "+ACK");
  }

  // Requires mutex.
  void heartbeat() {
    events::Heartbeat beat{.id = events::newEventId(),
                           .time = log::nowRfc3339(),
                           .cluster = cluster,
                           .agent_version = std::string(kAgentVersion)};
    ++counters->heartbeats;
    publish(events::statusSubject(cluster, ""), events::encode(beat).dump(),
            {{"Nats-Msg-Id", "heartbeat/" + events::escapeToken(cluster) + "/" + beat.id}});
  }
};

SimulatedAgents::SimulatedAgents(SimulatedAgentsOptions options)
    : options_(std::move(options)), counters_(std::make_unique<Counters>()) {}

SimulatedAgents::~SimulatedAgents() {
  stopping_ = true;
  if (ticker_.joinable()) {
    ticker_.join();
  }
  for (auto& agent : agents_) {
    agent->subscription.unsubscribe();
  }
  agents_.clear();
}

Result<std::unique_ptr<SimulatedAgents>> SimulatedAgents::start(const std::vector<std::string>& clusters,
                                                                SimulatedAgentsOptions options) {
  std::unique_ptr<SimulatedAgents> agents(new SimulatedAgents(std::move(options)));
  for (int i = 0; i < agents->options_.event_loops; ++i) {
    auto loop = bus::EventLoop::start();
    FLOTILLA_TRY(loop);
    agents->loops_.push_back(std::move(loop).value());
  }
  // Heartbeats start with the first registration: the first clusters must not go offline while the last connect.
  agents->ticker_ = std::thread([raw = agents.get()] { raw->tickLoop(); });
  FLOTILLA_TRY(agents->connectAll(clusters));
  return agents;
}

Status SimulatedAgents::connectAll(const std::vector<std::string>& clusters) {
  Counters& counters = *counters_;
  const auto now = Clock::now();
  {
    std::lock_guard agents_lock(agents_mutex_);  // the ticker waits until every agent exists
    for (size_t i = 0; i < clusters.size(); ++i) {
      auto agent = std::make_unique<Agent>();
      agent->cluster = clusters[i];
      agent->options = &options_;
      agent->counters = &counters;
      // Heartbeats spread over the interval, as agents started at different times send them.
      agent->next_heartbeat = now + options_.heartbeat_interval * static_cast<int64_t>(i) /
                                        static_cast<int64_t>(std::max<size_t>(clusters.size(), 1));
      agents_.push_back(std::move(agent));
    }
  }
  for (auto& agent : agents_) {
    FLOTILLA_TRY(issueCredentials(*agent));
  }
  std::atomic<size_t> next{0};
  std::mutex error_mutex;
  Status first_error;
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(std::max(options_.connect_threads, 0)));
  for (int t = 0; t < options_.connect_threads; ++t) {
    workers.emplace_back([&] {
      for (size_t i = next++; i < agents_.size(); i = next++) {
        if (auto connected = connectOne(*agents_[i]); !connected.ok()) {
          std::lock_guard lock(error_mutex);
          if (first_error.ok()) {
            first_error = connected;
          }
          next = agents_.size();
        }
      }
    });
  }
  for (auto& worker : workers) {
    worker.join();
  }
  return first_error;
}

Status SimulatedAgents::issueCredentials(Agent& agent) {
  auto role = identity::agentRole(agent.cluster);
  FLOTILLA_TRY(role);
  auto user = identity::issueFromAuthDir(options_.auth_dir, *role, std::nullopt);
  FLOTILLA_TRY(user);
  agent.creds_file = options_.work_dir + "/agent-" + events::escapeToken(agent.cluster) + ".creds";
  agent.inbox = role->inbox_prefix;
  return identity::writeSecretFile(agent.creds_file, user->creds);
}

Status SimulatedAgents::connectOne(Agent& agent) {
  const size_t index = next_loop_++;
  const bus::ConnectOptions options{.servers = options_.servers,
                                    .name = "simulated-agent-" + agent.cluster,
                                    .creds_file = agent.creds_file,
                                    .ca_file = options_.ca_file,
                                    .inbox_prefix = agent.inbox,
                                    .connect_timeout = kConnectTimeout,
                                    .ping_interval = options_.ping_interval,
                                    .global_message_delivery = true,
                                    .event_loop = loops_.empty() ? nullptr : loops_[index % loops_.size()]};
  // Like an agent, a connect that fails for a passing reason (a TLS handshake that timed out while thousands of
  // others were made) is tried again.
  auto connection = bus::Connection::connect(options);
  for (int attempt = 2; !connection.ok() && connection.error().kind == ErrorKind::kTransient && attempt <= 5;
       ++attempt) {
    std::this_thread::sleep_for(milliseconds(500));
    connection = bus::Connection::connect(options);
  }
  if (!connection.ok()) {
    return fail(connection.error().kind, "cluster " + agent.cluster + ": " + connection.error().describe());
  }
  {
    std::lock_guard lock(agent.mutex);  // the ticker reads it
    agent.connection = std::move(connection).value();
  }
  agent.pull_prefix = agent.inbox + ".pull.";
  agent.manifest_prefix = agent.inbox + ".m.";
  agent.registration_inbox = agent.inbox + ".register";
  agent.pull_subject = "$JS.API.CONSUMER.MSG.NEXT." + std::string(events::kDeployStream) + "." +
                       identity::agentConsumerName(agent.cluster);
  auto subscription =
      agent.connection->subscribe(agent.inbox + ".>", "", [&agent](bus::Message msg) { agent.onMessage(msg); });
  FLOTILLA_TRY(subscription);
  agent.subscription = std::move(subscription).value();
  FLOTILLA_TRY(agent.connection->flush());
  events::RegisterRequest request{.id = events::newEventId(),
                                  .time = log::nowRfc3339(),
                                  .cluster = agent.cluster,
                                  .labels = events::StringMap(options_.labels.begin(), options_.labels.end()),
                                  .kubernetes_version = "v1.36.3",
                                  .agent_version = std::string(kAgentVersion)};
  FLOTILLA_TRY(agent.connection->publishRequest(identity::agentRegisterSubject(agent.cluster), agent.registration_inbox,
                                                events::encode(request).dump()));
  std::string answer;
  {
    std::unique_lock lock(agent.mutex);
    if (!agent.registration_answered.wait_for(lock, kRegisterTimeout,
                                              [&] { return agent.registration_reply.has_value(); })) {
      return fail(ErrorKind::kTransient, "cluster " + agent.cluster + ": no answer to the registration in " +
                                             std::to_string(kRegisterTimeout.count()) + " ms");
    }
    answer = *agent.registration_reply;
  }
  auto reply = events::parsePayload<events::RegisterReply>(answer);
  FLOTILLA_TRY(reply);
  if (!reply->accepted) {
    return fail(ErrorKind::kPermanent, "cluster " + agent.cluster + ": registration refused: " + reply->message);
  }
  std::lock_guard lock(agent.mutex);
  agent.registered = true;
  agent.sendPull();
  return {};
}

void SimulatedAgents::tickLoop() {
  while (!stopping_) {
    std::this_thread::sleep_for(milliseconds(100));
    const auto now = Clock::now();
    std::lock_guard agents_lock(agents_mutex_);
    for (auto& agent : agents_) {
      std::lock_guard lock(agent->mutex);
      if (!agent->registered) {
        continue;
      }
      if (agent->pull_left == 0 && now >= agent->pull_due) {
        agent->sendPull();
      }
      if (now >= agent->next_heartbeat) {
        agent->heartbeat();
        agent->next_heartbeat += options_.heartbeat_interval;
      }
    }
  }
}

SimulatedCounts SimulatedAgents::counts() const {
  const Counters& c = *counters_;
  return {.deploys = c.deploys,
          .redeliveries = c.redeliveries,
          .republished = c.republished,
          .applies = c.applies,
          .duplicate_applies = c.duplicate_applies,
          .manifest_requests = c.manifest_requests,
          .manifest_refusals = c.manifest_refusals,
          .pulls = c.pulls,
          .pull_timeouts = c.pull_timeouts,
          .pull_other_status = c.pull_other_status,
          .heartbeats = c.heartbeats,
          .publish_failures = c.publish_failures};
}

}  // namespace flotilla::bench
