// The role tables. Each rule names the flow it serves (docs/pipeline.md "Identities and permissions"); where a rule is
// broader than the flow needs, the comment says why.
#include "flotilla/identity/permissions.h"

#include <algorithm>

#include "flotilla/core/util.h"
#include "flotilla/events/manifest.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/labels.h"

namespace flotilla::identity {

namespace {

using events::kBundleStream;
using events::kCommitStream;
using events::kDeployStream;
using events::kStatusStream;

constexpr std::string_view kApi = "$JS.API.";
constexpr std::string_view kHubInbox = "_INBOX";

std::string api(std::string_view rest) {
  return std::string(kApi) + std::string(rest);
}
std::string cat(std::string_view a, std::string_view b) {
  return std::string(a) + std::string(b);
}

//! Every stream of the topology: the five event streams, the KV buckets and the object stores.
std::vector<std::string> topologyStreams() {
  std::vector<std::string> streams = {std::string(kCommitStream), std::string(kBundleStream),
                                      std::string(kDeployStream), std::string(kStatusStream),
                                      std::string(events::kEventsStream)};
  for (auto bucket : {events::kGitReposBucket, events::kClustersBucket, events::kBundlesBucket,
                      events::kDeploymentsBucket, events::kStatusBucket}) {
    streams.push_back(cat("KV_", bucket));
  }
  for (auto bucket : {events::kSourcesBucket, events::kManifestsBucket}) {
    streams.push_back(cat("OBJ_", bucket));
  }
  return streams;
}

//! Fetch from and ack a durable pull consumer.
void consumeDurable(Permissions& p, std::string_view stream, std::string_view durable) {
  std::string path = cat(stream, ".") + std::string(durable);
  p.publish_allow.push_back(api("CONSUMER.MSG.NEXT." + path));
  p.publish_allow.push_back(api("CONSUMER.INFO." + path));
  p.publish_allow.push_back(cat("$JS.ACK.", path) + ".>");
}

//! Create or update a durable (the hub services create their own today, service::Consumer).
void createDurable(Permissions& p, std::string_view stream, std::string_view durable) {
  std::string path = cat(stream, ".") + std::string(durable);
  p.publish_allow.push_back(api("CONSUMER.CREATE." + path));
  p.publish_allow.push_back(api("CONSUMER.CREATE." + path + ".>"));
  p.publish_allow.push_back(api("CONSUMER.DURABLE.CREATE." + path));
}

//! Reads of one stream: info, message gets, direct gets.
void readStream(Permissions& p, std::string_view stream) {
  p.publish_allow.push_back(api(cat("STREAM.INFO.", stream)));
  p.publish_allow.push_back(api(cat("STREAM.MSG.GET.", stream)));
  p.publish_allow.push_back(api(cat("DIRECT.GET.", stream)));
  p.publish_allow.push_back(api(cat("DIRECT.GET.", stream) + ".>"));
}

//! Reads through ordered (ephemeral) consumers, which the client creates, deletes and answers flow control of:
//! KV watch and keys, object store get.
void readWithOrderedConsumers(Permissions& p, std::string_view stream) {
  p.publish_allow.push_back(api(cat("CONSUMER.CREATE.", stream)));
  p.publish_allow.push_back(api(cat("CONSUMER.CREATE.", stream) + ".>"));
  p.publish_allow.push_back(api(cat("CONSUMER.DELETE.", stream) + ".>"));
  p.publish_allow.push_back(cat("$JS.FC.", stream) + ".>");
}

//! The public CloudEvents of what the role does: flotilla.events.<kind>.> for each kind, and the
//! io.flotilla.message.terminated events of its durables on `streams` (flotilla.events.message.<stream>.*).
void publishEvents(Permissions& p, std::initializer_list<std::string_view> kinds,
                   std::initializer_list<std::string_view> streams) {
  for (std::string_view kind : kinds) {
    p.publish_allow.push_back(events::eventsFilter(kind));
  }
  for (std::string_view stream : streams) {
    p.publish_allow.push_back(events::eventsSubject("message", {stream}) + ".*");
  }
}

//! What every hub service needs. service::connectHub(kProvision) creates or updates the whole topology in every
//! hub service, so each may create and update every stream of it (not delete or purge them); the hub services read
//! every stream, KV bucket and object store, and receive replies under the shared _INBOX prefix: they are the
//! trusted core, kept apart from each other only in what they write.
Permissions hubService() {
  Permissions p;
  p.publish_allow = {api("INFO"), api("STREAM.NAMES"), api("STREAM.LIST"), api("CONSUMER.INFO.>")};
  readStream(p, "*");  // the hub services read every stream; one token wildcard keeps their JWTs small
  for (const auto& stream : topologyStreams()) {
    p.publish_allow.push_back(api("STREAM.CREATE." + stream));
    p.publish_allow.push_back(api("STREAM.UPDATE." + stream));
    if (startsWith(stream, "KV_") || startsWith(stream, "OBJ_")) {
      readWithOrderedConsumers(p, stream);
    }
  }
  // A consumer that gives up on a message stores a MessageTerminated record (docs/pipeline.md "Delivery policy").
  p.publish_allow.push_back(cat("$KV.", events::kStatusBucket) + ".terminated.>");
  p.publish_deny = {api("STREAM.DELETE.>"), api("CONSUMER.DELETE.FLOTILLA_COMMITS.>"),
                    api("CONSUMER.DELETE.FLOTILLA_BUNDLES.>"), api("CONSUMER.DELETE.FLOTILLA_STATUS.>")};
  p.subscribe_allow = {cat(kHubInbox, ".>")};
  return p;
}

Role hubRole(std::string name, Permissions permissions) {
  return Role{.name = std::move(name),
              .subject = {},
              .inbox_prefix = std::string(kHubInbox),
              .permissions = std::move(permissions)};
}

Status checkCluster(std::string_view cluster) {
  if (!model::isDns1123Subdomain(cluster)) {
    return fail(ErrorKind::kInvalid, "cluster name \"" + std::string(cluster) +
                                         "\" is not a Kubernetes name (lower-case letters, digits, '-' and '.', "
                                         "at most 253 characters, starting and ending with a letter or digit)");
  }
  return {};
}

}  // namespace

std::string agentRegisterSubject(std::string_view cluster) {
  return std::string(events::kRegisterSubject) + "." + events::escapeToken(cluster);
}

std::string agentReregisterSubject(std::string_view cluster) {
  return "_INBOX." + agentConsumerName(cluster) + ".reregister";
}

std::string registrationRequestSubject(std::string_view token_id) {
  return "flotilla.registration." + events::escapeToken(token_id);
}

std::string agentConsumerName(std::string_view cluster) {
  return "agent-" + events::escapeToken(cluster);
}

const std::vector<std::string_view>& roleNames() {
  static const std::vector<std::string_view> kNames = {"poller", "bundler",  "scheduler", "gateway",
                                                       "admin",  "readonly", "agent",     "registration"};
  return kNames;
}

Role pollerRole() {
  Permissions p = hubService();
  p.publish_allow.insert(p.publish_allow.end(),
                         {std::string(events::kCommitFilter), cat("$KV.", events::kStatusBucket) + ".gitrepo.>",
                          cat("$O.", events::kSourcesBucket) + ".>",
                          // an overwritten source archive's old chunks are purged by subject (libs/bus)
                          api(cat("STREAM.PURGE.OBJ_", events::kSourcesBucket))});
  publishEvents(p, {"gitrepo"}, {});  // io.flotilla.gitrepo.commit/.deleted; it has no durable
  return hubRole("poller", std::move(p));
}

Role bundlerRole() {
  Permissions p = hubService();
  std::string status = cat("$KV.", events::kStatusBucket);
  p.publish_allow.insert(
      p.publish_allow.end(),
      {std::string(events::kBundleFilter), cat("$KV.", events::kBundlesBucket) + ".>", status + ".bundle-render.>",
       status + ".bundle-claim.>", cat("$O.", events::kManifestsBucket) + ".>",
       api(cat("STREAM.PURGE.OBJ_", events::kManifestsBucket))});
  createDurable(p, kCommitStream, "bundler");
  consumeDurable(p, kCommitStream, "bundler");
  publishEvents(p, {"bundle"}, {kCommitStream});  // io.flotilla.bundle.rendered/.failed/.deleted
  return hubRole("bundler", std::move(p));
}

Role schedulerRole() {
  Permissions p = hubService();
  std::string clusters = cat("$KV.", events::kClustersBucket);
  std::string status = cat("$KV.", events::kStatusBucket);
  p.publish_allow.insert(
      p.publish_allow.end(),
      {std::string(events::kDeployFilter), clusters + ".cluster.>", clusters + ".heartbeat.>",
       clusters + ".enrollment.>",     // the registrar's records (registration tokens)
       clusters + ".lease.scheduler",  // the lease its replicas share (--lease-ttl)
       // with --partitions: each partition's lease (lease.scheduler.p<i>) and each replica's membership
       clusters + ".lease.scheduler.>", clusters + ".member.scheduler.>",
       // a finished deregistration's tombstone gets the keys of the credentials the registrar gave the cluster
       clusters + ".deregistered.>", cat("$KV.", events::kDeploymentsBucket) + ".>", status + ".bd.>",
       status + ".summary.>",
       // the hub creates (and on deregistration deletes) each cluster's agent-<cluster> durable,
       // so agents never create consumers
       api(cat("CONSUMER.CREATE.", kDeployStream) + ".>"), api(cat("CONSUMER.DURABLE.CREATE.", kDeployStream) + ".>"),
       api(cat("CONSUMER.DELETE.", kDeployStream) + ".>"),
       // asking an agent whose cluster record is gone to register again (agentReregisterSubject): the inbox token
       // is agent-<cluster>, and a NATS wildcard is a whole token, so this is every inbox's `reregister` (only
       // agents listen there, each under its own inbox)
       "_INBOX.*.reregister"});
  // Its durables on the two streams only it reads: "scheduler" and "scheduler-status", or with --partitions one pair
  // per partition ("scheduler-p<i>", "scheduler-status-p<i>"), so any durable name of these two streams.
  for (std::string_view stream : {kBundleStream, kStatusStream}) {
    createDurable(p, stream, "*");
    consumeDurable(p, stream, "*");
  }
  // Registration requests: the per-cluster subject (the shared one is gone) and the token requests; every
  // cluster's manifest requests (answered with chunks of the manifests its deployments reference).
  p.subscribe_allow.insert(p.subscribe_allow.end(), {std::string(events::kRegisterSubject) + ".>",
                                                     "flotilla.registration.>", std::string(events::kManifestFilter)});
  p.allow_responses = true;
  // The roll-ups, deployments and clusters; terminated messages of its durables and, relayed, of the agents'.
  publishEvents(p, {"bundle", "bundledeployment", "cluster"}, {kBundleStream, kStatusStream, kDeployStream});
  return hubRole("scheduler", std::move(p));
}

Role gatewayRole() {
  Permissions p = hubService();
  const std::string clusters = cat("$KV.", events::kClustersBucket);
  // The specs of the CRs it mirrors (libs/specs): GitRepos, ClusterGroups and Cluster documents; a Cluster document
  // withdraws a deregistration tombstone.
  p.publish_allow.insert(p.publish_allow.end(),
                         {cat("$KV.", events::kGitReposBucket) + ".>", clusters + ".group.>", clusters + ".spec.>",
                          clusters + ".deregistered.>", clusters + "." + std::string(events::kHubModeKey)});
  return hubRole("gateway", std::move(p));
}

Role adminRole() {
  return hubRole("admin", Permissions{.publish_allow = {">"}, .subscribe_allow = {">"}});
}

Role readonlyRole() {
  Permissions p;
  p.publish_allow = {api("INFO"), api("STREAM.NAMES"), api("STREAM.LIST"), api("STREAM.INFO.>"),
                     api("STREAM.MSG.GET.>"), api("DIRECT.GET.>"), api("CONSUMER.INFO.>"), api("CONSUMER.NAMES.>"),
                     api("CONSUMER.LIST.>"),
                     // KV watches and key listings run on ordered consumers, which the client creates; the
                     // subject cannot tell them from a named durable, so readonly may create consumers (they
                     // change no data; they are not allowed to be deleted by readonly, ephemerals expire).
                     api("CONSUMER.CREATE.>"), "$JS.FC.>"};
  // The public events are for other systems (docs/events/subscribing.md): on FLOTILLA_EVENTS alone readonly may also
  // pull from a consumer and ack, so a client such as the nats CLI, or a durable of its own, can read them. Acks
  // move only that consumer's position; the stream's messages stay as they are.
  consumeDurable(p, events::kEventsStream, "*");
  p.publish_deny = {"$KV.>",
                    "$O.>",
                    "flotilla.>",
                    api("STREAM.CREATE.>"),
                    api("STREAM.UPDATE.>"),
                    api("STREAM.DELETE.>"),
                    api("STREAM.PURGE.>"),
                    api("STREAM.MSG.DELETE.>"),
                    api("STREAM.SNAPSHOT.>"),
                    api("STREAM.RESTORE.>"),
                    api("CONSUMER.DELETE.>"),
                    api("CONSUMER.DURABLE.CREATE.>"),
                    api("ACCOUNT.>"),
                    api("META.>"),
                    api("SERVER.>")};
  // No fetch or ack on any other stream, bucket or object store.
  for (const auto& stream : topologyStreams()) {
    if (stream != events::kEventsStream) {
      p.publish_deny.push_back(api("CONSUMER.MSG.NEXT." + stream + ".>"));
      p.publish_deny.push_back(cat("$JS.ACK.", stream) + ".>");
    }
  }
  p.subscribe_allow = {"_INBOX.readonly.>"};
  return Role{.name = "readonly", .subject = {}, .inbox_prefix = "_INBOX.readonly", .permissions = std::move(p)};
}

namespace {

//! The agent's permissions for `c`, the cluster as one subject token: escaped (agentRole) or a scoped signing key's
//! template placeholder (agentTemplatePermissions).
Permissions agentPermissions(const std::string& c) {
  std::string durable = "agent-" + c;
  Permissions p;
  // Manifests come from the hub on the cluster's own subject (docs/pipeline.md "Manifest delivery"), never from the
  // shared object store, which cannot be narrowed to one cluster's objects; the replies come to the agent's inbox.
  // flotilla.register.<c>.renew: renewal of credentials a registration token gave (enrollment.h).
  std::string registration = std::string(events::kRegisterSubject) + "." + c;
  p.publish_allow = {"flotilla.status." + c + ".>", registration, registration + ".renew",
                     std::string(events::kManifestPrefix) + "." + c};
  consumeDurable(p, kDeployStream, durable);
  p.publish_deny = {"$KV.>",
                    "$O.>",
                    api("STREAM.CREATE.>"),
                    api("STREAM.UPDATE.>"),
                    api("STREAM.DELETE.>"),
                    api("STREAM.PURGE.>"),
                    api("STREAM.MSG.DELETE.>"),
                    api(cat("CONSUMER.CREATE.", kDeployStream)),
                    api(cat("CONSUMER.CREATE.", kDeployStream) + ".>"),
                    api("CONSUMER.DURABLE.CREATE.>"),
                    api(cat("CONSUMER.DELETE.", kDeployStream) + ".>")};
  p.subscribe_allow = {"_INBOX." + durable + ".>"};
  return p;
}

}  // namespace

Result<Role> agentRole(std::string_view cluster) {
  FLOTILLA_TRY(checkCluster(cluster));
  std::string inbox = "_INBOX." + agentConsumerName(cluster);
  return Role{.name = "agent",
              .subject = std::string(cluster),
              .inbox_prefix = inbox,
              .permissions = agentPermissions(events::escapeToken(cluster))};
}

Permissions agentTemplatePermissions() {
  return agentPermissions(std::string(kAgentTemplateCluster));
}

Result<Role> registrationRole(std::string_view token_id) {
  bool valid = !token_id.empty() && token_id.size() <= 63 && std::all_of(token_id.begin(), token_id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
  if (!valid) {
    return fail(ErrorKind::kInvalid, "registration token id \"" + std::string(token_id) +
                                         "\" must be 1 to 63 characters of a-z, 0-9 and '-'");
  }
  std::string inbox = "_INBOX.registration-" + std::string(token_id);
  Permissions p{.publish_allow = {registrationRequestSubject(token_id)}, .subscribe_allow = {inbox + ".>"}};
  return Role{
      .name = "registration", .subject = std::string(token_id), .inbox_prefix = inbox, .permissions = std::move(p)};
}

Result<Role> roleFor(std::string_view name, std::string_view subject) {
  if (name == "agent" || name == "registration") {
    if (subject.empty()) {
      return fail(ErrorKind::kInvalid, std::string("role ") + std::string(name) + " needs " +
                                           (name == "agent" ? "a cluster name" : "a token id"));
    }
    return name == "agent" ? agentRole(subject) : registrationRole(subject);
  }
  static const std::vector<std::pair<std::string_view, Role (*)()>> kFixed = {
      {"poller", pollerRole},   {"bundler", bundlerRole}, {"scheduler", schedulerRole},
      {"gateway", gatewayRole}, {"admin", adminRole},     {"readonly", readonlyRole}};
  for (const auto& [fixed, make] : kFixed) {
    if (name == fixed) {
      if (!subject.empty()) {
        return fail(ErrorKind::kInvalid, "role " + std::string(name) + " is not bound to a cluster or token (got \"" +
                                             std::string(subject) + "\")");
      }
      return make();
    }
  }
  return fail(ErrorKind::kInvalid,
              "unknown role \"" + std::string(name) +
                  "\" (known: poller, bundler, scheduler, gateway, admin, readonly, agent, registration)");
}

}  // namespace flotilla::identity
