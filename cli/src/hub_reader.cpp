#include "flotilla/cli/hub_reader.h"

#include <cassert>
#include <optional>

#include "flotilla/core/util.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/subjects.h"
#include "flotilla/identity/jwt.h"
#include "flotilla/identity/permissions.h"
#include "flotilla/model/cluster_document.h"
#include "flotilla/model/codec.h"

namespace flotilla::cli {

HubConnection::~HubConnection() {
  if (connection) {
    connection->close();
  }
}

bus::KeyValue& HubConnection::bucket(std::string_view name) const {
  auto it = buckets.find(name);
  assert(it != buckets.end());
  return *it->second;
}

namespace {

//! The inbox prefix of the credentials' role (readonly may subscribe only under _INBOX.readonly); "" when the
//! credentials name no Flotilla role (issued by another tool: libnats' default then).
std::string inboxPrefixOf(const std::string& creds_file) {
  auto text = readFile(creds_file);
  auto owner = text.ok() ? identity::credsIdentity(*text) : Result<identity::CredsIdentity>(fail(text.error()));
  auto role = owner.ok() ? identity::roleFor(owner->role, owner->subject) : Result<identity::Role>(fail(owner.error()));
  return role.ok() ? role->inbox_prefix : std::string();
}

}  // namespace

Result<HubConnection> openHub(const ConnectSettings& settings, const std::vector<std::string>& buckets) {
  bus::ConnectOptions options = settings;
  options.servers = split(settings.url, ',');
  options.name = "flotilla-cli";
  if (options.inbox_prefix.empty() && !options.creds_file.empty()) {
    options.inbox_prefix = inboxPrefixOf(options.creds_file);
  }
  options.connect_timeout = settings.timeout;
  options.max_reconnect = 0;  // a CLI call fails fast instead of waiting for a server to come back
  HubConnection hub;
  auto connection = bus::Connection::connect(options);
  if (!connection.ok()) {
    return fail(connection.error().kind,
                "cannot connect to NATS at " + settings.url + ": " + connection.error().message,
                connection.error().where);
  }
  hub.connection = std::move(connection).value();
  auto js = bus::JetStream::create(hub.connection, bus::JetStreamOptions{.api_timeout = settings.timeout});
  FLOTILLA_TRY(js);
  hub.js = std::move(js).value();
  for (const auto& name : buckets) {
    auto kv = bus::KeyValue::open(hub.js, name);
    if (!kv.ok()) {
      if (kv.error().kind == ErrorKind::kNotFound) {
        return fail(ErrorKind::kNotFound, "the hub is not initialised: KV bucket \"" + name + "\" does not exist on " +
                                              settings.url +
                                              " (start the Flotilla services once; they create the buckets)");
      }
      return fail(kv.error().kind, "cannot open KV bucket \"" + name + "\": " + kv.error().message, kv.error().where);
    }
    hub.buckets[name] = std::move(kv).value();
  }
  return hub;
}

namespace {

//! Every current entry of a bucket. The watcher is kept by `hub` (~HubConnection says why).
Result<std::vector<bus::KvEntry>> readAll(HubConnection& hub, std::string_view bucket) {
  auto watcher = hub.bucket(bucket).watch(">");
  FLOTILLA_TRY(watcher);
  auto values = watcher->initialValues(std::chrono::seconds(30));
  hub.finished_watchers.push_back(std::move(watcher).value());
  return values;
}

void warn(Snapshot& snap, std::string_view bucket, const std::string& key, const Error& error) {
  snap.warnings.push_back("skipping " + std::string(bucket) + "/" + key + ": " + error.describe());
}

//! Decodes a Fleet resource (GitRepo, Cluster, ClusterGroup) with libs/model's strict codec and appends it to `out`.
template <typename T, typename Decode>
void appendResource(Snapshot& snap, std::string_view bucket, const bus::KvEntry& entry, Decode decode,
                    std::vector<T>& out) {
  auto json = Json::parse(entry.value);
  auto decoded = json.ok() ? decode(*json, entry.key) : Result<T>(fail(json.error()));
  if (!decoded.ok()) {
    warn(snap, bucket, entry.key, decoded.error());
    return;
  }
  out.push_back(std::move(decoded).value());
}

//! Decodes a record of the KV contract (libs/events records.h) into `out` under its key.
template <typename T>
void decodeInto(Snapshot& snap, std::string_view bucket, const bus::KvEntry& entry, std::map<std::string, T>& out) {
  auto record = events::parseRecord<T>(entry.value);
  if (!record.ok()) {
    warn(snap, bucket, entry.key, record.error());
    return;
  }
  out[entry.key] = std::move(record).value();
}

Status loadGitRepos(HubConnection& hub, Snapshot& snap) {
  auto entries = readAll(hub, events::kGitReposBucket);
  FLOTILLA_TRY(entries);
  for (const auto& entry : *entries) {
    appendResource<model::GitRepo>(
        snap, events::kGitReposBucket, entry,
        [](const Json& json, const std::string& key) { return model::decodeGitRepo(json, key); }, snap.gitrepos);
  }
  return {};
}

void loadClustersEntry(Snapshot& snap, const bus::KvEntry& entry) {
  if (startsWith(entry.key, "cluster.")) {
    appendResource<model::Cluster>(
        snap, events::kClustersBucket, entry,
        [](const Json& json, const std::string& key) { return model::decodeCluster(json, key); }, snap.clusters);
  } else if (startsWith(entry.key, "group.")) {
    appendResource<model::ClusterGroup>(
        snap, events::kClustersBucket, entry,
        [](const Json& json, const std::string& key) { return model::decodeClusterGroup(json, key); }, snap.groups);
  } else if (startsWith(entry.key, "spec.")) {
    // The key names the cluster (as the scheduler and the bundler read it).
    auto names = events::keyNames(entry.key, "spec", 1);
    std::vector<model::Cluster> specs;
    appendResource<model::Cluster>(
        snap, events::kClustersBucket, entry,
        [](const Json& json, const std::string& key) { return model::decodeClusterDocument(json, key); }, specs);
    if (names.ok() && !specs.empty()) {
      specs.front().metadata.name = (*names)[0];
      snap.cluster_specs[(*names)[0]] = std::move(specs.front());
    }
  } else if (startsWith(entry.key, "deregistered.")) {
    auto tombstone = events::parseRecord<events::ClusterDeregistration>(entry.value);
    if (!tombstone.ok()) {
      warn(snap, events::kClustersBucket, entry.key, tombstone.error());
      return;
    }
    const std::string cluster = tombstone->cluster;
    snap.deregistrations[cluster] = std::move(tombstone).value();
  } else if (startsWith(entry.key, "heartbeat.")) {
    auto names = events::keyNames(entry.key, "heartbeat", 1);
    auto heartbeat = events::parsePayload<events::Heartbeat>(entry.value);
    if (names.ok() && heartbeat.ok()) {
      snap.heartbeats[(*names)[0]] = heartbeat->time;
    }
  }
}

Status loadClusters(HubConnection& hub, Snapshot& snap) {
  auto entries = readAll(hub, events::kClustersBucket);
  FLOTILLA_TRY(entries);
  for (const auto& entry : *entries) {
    loadClustersEntry(snap, entry);
  }
  return {};
}

Status loadBundlesAndDeployments(HubConnection& hub, Snapshot& snap) {
  auto bundles = readAll(hub, events::kBundlesBucket);
  FLOTILLA_TRY(bundles);
  for (const auto& entry : *bundles) {
    decodeInto(snap, events::kBundlesBucket, entry, snap.bundles);
  }
  auto deployments = readAll(hub, events::kDeploymentsBucket);
  FLOTILLA_TRY(deployments);
  for (const auto& entry : *deployments) {
    auto record = events::parseRecord<events::DeploymentRecord>(entry.value);
    if (!record.ok()) {
      warn(snap, events::kDeploymentsBucket, entry.key, record.error());
      continue;
    }
    snap.deployments.push_back(std::move(record).value());
  }
  return {};
}

void loadStatusEntry(Snapshot& snap, const bus::KvEntry& entry) {
  constexpr std::string_view kBucket = events::kStatusBucket;
  if (startsWith(entry.key, "bd.")) {
    auto bd = events::parseRecord<events::BdStatus>(entry.value);
    if (!bd.ok()) {
      warn(snap, kBucket, entry.key, bd.error());
      return;
    }
    std::string key = events::deploymentKey(bd->cluster, bd->workspace, bd->bundle);
    snap.bd_statuses[key] = std::move(bd).value();
  } else if (startsWith(entry.key, "gitrepo.")) {
    decodeInto(snap, kBucket, entry, snap.poll_statuses);
  } else if (startsWith(entry.key, "bundle-render.")) {
    decodeInto(snap, kBucket, entry, snap.render_statuses);
  } else if (startsWith(entry.key, "summary.bundle.")) {
    decodeInto(snap, kBucket, entry, snap.bundle_summaries);
  } else if (startsWith(entry.key, "summary.gitrepo.")) {
    decodeInto(snap, kBucket, entry, snap.gitrepo_summaries);
  } else if (startsWith(entry.key, "summary.cluster.")) {
    decodeInto(snap, kBucket, entry, snap.cluster_summaries);
  }
}

}  // namespace

Result<Snapshot> loadSnapshot(HubConnection& hub) {
  Snapshot snap;
  FLOTILLA_TRY(loadGitRepos(hub, snap));
  FLOTILLA_TRY(loadClusters(hub, snap));
  FLOTILLA_TRY(loadBundlesAndDeployments(hub, snap));
  auto status = readAll(hub, events::kStatusBucket);
  FLOTILLA_TRY(status);
  for (const auto& entry : *status) {
    loadStatusEntry(snap, entry);
  }
  return snap;
}

}  // namespace flotilla::cli
