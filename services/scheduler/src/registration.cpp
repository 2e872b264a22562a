// Registration: flotilla.register.<cluster> requests (request/reply, queue group "scheduler") -> the cluster is
// the subject's (the server's permissions bind it to the agent's credentials; a body naming another is refused),
// validate, refuse a deregistered name, create the agent's deploy durable, write clusters/cluster.<name>, reply,
// announce, and re-target the cluster.
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/labels.h"
#include "flotilla/scheduler/scheduler.h"

namespace flotilla::scheduler {

namespace {

//! Why a registration cannot be accepted ("" when it can).
std::string registrationProblem(const events::RegisterRequest& request, const std::string& workspace) {
  if (!model::isDns1123Label(request.cluster)) {
    return "cluster name \"" + request.cluster +
           "\" is not a DNS-1123 label (lower-case a-z, 0-9 and '-', at "
           "most 63 characters, alphanumeric at both ends)";
  }
  if (!model::isDns1123Label(workspace)) {
    return "workspace \"" + workspace + "\" is not a DNS-1123 label";
  }
  if (auto labels = model::validateLabels(request.labels, "labels"); !labels.ok()) {
    return labels.error().message;
  }
  return {};
}

//! The cluster record after this registration (`cluster` is the current one, or a fresh one when new): of the
//! reported labels only those `policy` allows target (metadata.labels); all of them are kept in status.agent.
void applyRegistration(model::Cluster& cluster, const events::RegisterRequest& request, const std::string& workspace,
                       const std::string& now, const AgentLabelPolicy& policy, std::vector<std::string>& left_out) {
  model::Labels reported(request.labels.begin(), request.labels.end());
  cluster.metadata.ns = workspace;
  cluster.metadata.labels = policy.filter(reported, left_out);
  cluster.status.agent = model::AgentStatus{.last_seen = now,
                                            .version = request.agent_version,
                                            .kubernetes_version = request.kubernetes_version,
                                            .api_versions = request.api_versions,
                                            .labels = std::move(reported)};
  model::Condition registered{.type = "Registered",
                              .status = "True",
                              .reason = "AgentRegistered",
                              .message = "agent " + request.agent_version + " registered",
                              .last_update_time = now,
                              .last_transition_time = cluster.metadata.creation_timestamp};
  cluster.status.conditions = {registered};
}

}  // namespace

Status Scheduler::subscribeRegistrations() {
  auto connection = hub_.connection;
  auto subscription =
      connection->subscribe(std::string(events::kRegisterSubject) + ".*", kRegisterQueue,
                            [this, connection](bus::Message message) { answerRegistration(*connection, message); });
  FLOTILLA_TRY(subscription);
  register_subscription_ = std::move(subscription).value();
  // Make sure the server knows the subscription before anyone relies on it (readiness says so).
  FLOTILLA_TRY(connection->flush());
  subscribed_ = true;
  return {};
}

void Scheduler::answerRegistration(bus::Connection& connection, const bus::Message& message) {
  events::RegisterReply reply = handleRegisterOn(message.subject(), message.data());
  if (!message.reply().empty()) {
    auto sent = connection.publish(message.reply(), events::encode(reply).dump());
    if (!sent.ok()) {
      log::warn("cannot answer a registration", {{"error", sent.error().describe()}});
    }
  }
}

events::RegisterReply Scheduler::handleRegisterOn(std::string_view subject, std::string_view data) {
  auto refuse = [&](const char* result, const std::string& problem, const std::string& cluster) {
    metrics_.counter("registrations_total", "Registration requests by result", {{"result", result}}).Increment();
    log::warn(std::string(result) == "impersonation" ? "registration refused: it names another cluster than its subject"
                                                     : "rejecting an unreadable registration",
              {{"subject", std::string(subject)}, {"cluster", cluster}, {"error", problem}});
    return events::RegisterReply{
        .id = events::newEventId(), .time = log::nowRfc3339(), .accepted = false, .message = problem};
  };
  auto tokens = events::subjectTokens(subject, events::kRegisterSubject);
  if (!tokens.ok() || tokens->size() != 1) {
    return refuse("invalid", tokens.ok() ? "expected flotilla.register.<cluster>" : tokens.error().describe(), "");
  }
  const std::string& cluster = tokens->front();
  auto request = events::parsePayload<events::RegisterRequest>(data);
  if (!request.ok()) {
    return refuse("invalid", request.error().describe(), cluster);
  }
  if (request->cluster != cluster) {
    // The subject is bound to the agent's credentials by the server; the body is whatever the agent wrote.
    return refuse("impersonation",
                  "the registration on " + std::string(subject) + " names cluster \"" + request->cluster +
                      "\"; an agent registers only its own cluster (the one of its credentials)",
                  cluster);
  }
  return handleRegister(*request);
}

events::RegisterReply Scheduler::handleRegister(const events::RegisterRequest& request) {
  events::RegisterReply reply{.id = events::newEventId(), .time = log::nowRfc3339()};
  std::string workspace = request.workspace.empty() ? std::string(model::kDefaultNamespace) : request.workspace;
  auto count = [&](const char* result) {
    metrics_.counter("registrations_total", "Registration requests by result", {{"result", result}}).Increment();
  };
  // A registration not accepted: counted by `result`, logged as `what` with `error`, answered with `error` after
  // `reply_prefix`.
  auto refused = [&](const char* result, const char* what, const std::string& error,
                     std::string_view reply_prefix = {}) {
    count(result);
    log::warn(what, {{"cluster", request.cluster}, {"error", error}});
    reply.message = std::string(reply_prefix) + error;
    return reply;
  };
  if (std::string problem = registrationProblem(request, workspace); !problem.empty()) {
    return refused("rejected", "registration rejected", problem);
  }
  auto refusal = deregisteredRefusal(request.cluster);
  if (!refusal.ok()) {
    return refused("error", "cannot check a registration",
                   "the hub cannot check the cluster's registration right now: " + refusal.error().describe());
  }
  if (!refusal->empty()) {
    return refused("deregistered", "registration refused: the cluster was deregistered", *refusal);
  }
  // Before the reply: the agent binds its durable once accepted, and never creates it.
  auto durable = ensureAgentConsumer(request.cluster);
  if (!durable.ok()) {
    return refused("error", "cannot create the cluster's deploy consumer; the agent will retry",
                   durable.error().describe(), "the hub cannot create the deploy consumer right now: ");
  }
  auto stored = storeRegistration(request, workspace);
  if (!stored.ok()) {
    return refused("error", "cannot store a registration; the agent will retry", stored.error().describe(),
                   "the hub cannot store the registration right now: ");
  }
  count(stored->created                ? "new"
        : stored->targeting_changed    ? "updated"
        : stored->api_versions_changed ? "api-versions"
                                       : "unchanged");
  announceRegistration(request, workspace, *stored);
  // Always: a re-registration refreshes the cluster summary (versions, last seen) even when nothing moves.
  enqueueReconcile(request.cluster);
  reply.accepted = true;
  reply.cluster_id = request.cluster;
  reply.message = stored->created ? "registered" : "registration updated";
  return reply;
}

Status Scheduler::ensureAgentConsumer(const std::string& cluster) {
  auto created = hub_.js->ensureConsumer(
      service::kDeployStream,
      service::agentDeployConsumer(cluster, options_.agent_ack_wait, options_.agent_max_deliveries));
  FLOTILLA_TRY(created);
  return {};
}

Status Scheduler::deleteAgentConsumer(const std::string& cluster) {
  const std::string durable = service::agentDeployConsumer(cluster).durable;
  auto deleted = hub_.js->deleteConsumer(service::kDeployStream, durable);
  if (!deleted.ok() && deleted.error().kind != ErrorKind::kNotFound) {
    return deleted;
  }
  if (deleted.ok()) {
    metrics_.counter("agent_consumers_deleted_total", "Deploy consumers of deregistered clusters deleted").Increment();
    log::info("deploy consumer of a deregistered cluster deleted", {{"cluster", cluster}, {"consumer", durable}});
  }
  return {};
}

Result<Scheduler::Registration> Scheduler::storeRegistration(const events::RegisterRequest& request,
                                                             const std::string& workspace) {
  std::string now = log::nowRfc3339();
  std::lock_guard lock(mutex_);
  Registration out;
  // The record is what the agent reported; the admin's document is overlaid on it in memory (refreshCluster).
  auto existing = registrations_.find(request.cluster);
  if (existing != registrations_.end()) {
    out.cluster = existing->second;
    out.api_versions_changed = existing->second.status.agent.api_versions != request.api_versions;
  } else {
    out.created = true;
    out.cluster.metadata.name = request.cluster;
    out.cluster.metadata.creation_timestamp = now;
  }
  applyRegistration(out.cluster, request, workspace, now, options_.agent_labels, out.labels_left_out);
  auto put = hub_.clusters->put(events::clusterKey(request.cluster), model::encode(out.cluster).dump());
  FLOTILLA_TRY(put);
  registrations_[request.cluster] = out.cluster;
  markAlive(request.cluster);
  out.targeting_changed = refreshCluster(request.cluster) || out.created;
  return out;
}

void Scheduler::announceRegistration(const events::RegisterRequest& request, const std::string& workspace,
                                     const Registration& registration) {
  log::info(
      registration.created ? "cluster registered" : "cluster re-registered",
      {{"cluster", request.cluster},
       {"workspace", workspace},
       {"labels", model::formatSelector(model::LabelSelector{.match_labels = registration.cluster.metadata.labels})},
       {"kubernetes_version", request.kubernetes_version},
       {"api_versions", static_cast<int64_t>(request.api_versions.size())},
       {"api_versions_changed", registration.api_versions_changed},
       {"agent_version", request.agent_version}});
  if (!registration.labels_left_out.empty()) {
    // Not an error: the admin decides targeting on the hub. Said once per registration, so an agent's operator
    // who set --labels finds out why they do not target.
    metrics_
        .counter("agent_labels_left_out_total",
                 "Labels an agent reported that do not target because --agent-labels does not allow their key")
        .Increment(static_cast<double>(registration.labels_left_out.size()));
    log::warn(
        "agent labels left out of targeting: --agent-labels does not allow their keys (set targeting labels "
        "in the cluster's Cluster document, or allow the keys)",
        {{"cluster", request.cluster},
         {"keys", join(registration.labels_left_out, ",")},
         {"agent_labels", options_.agent_labels.describe()}});
  }
  if (!registration.created && !registration.targeting_changed && !registration.api_versions_changed) {
    return;
  }
  const std::string what = registration.created ? "registered" : "updated";
  Json data = events::encode(request);
  std::string id = events::clusterEventId(workspace, request.cluster, what, data);
  publishPublic(events::toCloudEvent(events::cloudEventType("cluster", what), std::string(kEventSource),
                                     workspace + "/" + request.cluster, std::move(data), std::move(id)),
                "cluster", {workspace, request.cluster});
}

}  // namespace flotilla::scheduler
