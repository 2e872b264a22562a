#include "flotilla/cli/hub_reader.h"

#include <cassert>

#include "flotilla/core/util.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"
#include "flotilla/scheduler/keys.h"

namespace flotilla::cli {

bus::KeyValue& HubConnection::bucket(std::string_view name) const {
  auto it = buckets.find(name);
  assert(it != buckets.end());
  return *it->second;
}

Result<HubConnection> openHub(const ConnectSettings& settings, const std::vector<std::string>& buckets) {
  bus::ConnectOptions options;
  options.servers = split(settings.url, ',');
  options.name = "flotilla-cli";
  options.creds_file = settings.creds_file;
  options.user = settings.user;
  options.password = settings.password;
  options.ca_file = settings.ca_file;
  options.cert_file = settings.cert_file;
  options.key_file = settings.key_file;
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

Result<std::vector<bus::KvEntry>> readAll(bus::KeyValue& kv, std::string_view pattern = ">") {
  auto watcher = kv.watch(pattern);
  FLOTILLA_TRY(watcher);
  auto values = watcher->initialValues(std::chrono::seconds(30));
  watcher->stop();
  return values;
}

}  // namespace

Result<Snapshot> loadSnapshot(const HubConnection& hub) {
  Snapshot snap;
  auto warn = [&](std::string_view bucket, const std::string& key, const std::string& message) {
    snap.warnings.push_back("skipping " + std::string(bucket) + "/" + key + ": " + message);
  };

  auto gitrepos = readAll(hub.bucket(events::kGitReposBucket));
  FLOTILLA_TRY(gitrepos);
  for (const auto& entry : *gitrepos) {
    auto json = Json::parse(entry.value);
    auto decoded = json.ok() ? model::decodeGitRepo(*json, entry.key) : Result<model::GitRepo>(fail(json.error()));
    if (!decoded.ok()) {
      warn(events::kGitReposBucket, entry.key, decoded.error().describe());
      continue;
    }
    snap.gitrepos.push_back(std::move(decoded).value());
  }

  auto clusters = readAll(hub.bucket(events::kClustersBucket));
  FLOTILLA_TRY(clusters);
  for (const auto& entry : *clusters) {
    if (startsWith(entry.key, "cluster.")) {
      auto cluster = scheduler::decodeClusterRecord(entry.value);
      if (!cluster.ok()) {
        warn(events::kClustersBucket, entry.key, cluster.error().describe());
        continue;
      }
      snap.clusters.push_back(std::move(cluster).value());
    } else if (startsWith(entry.key, "group.")) {
      auto json = Json::parse(entry.value);
      auto group =
          json.ok() ? model::decodeClusterGroup(*json, entry.key) : Result<model::ClusterGroup>(fail(json.error()));
      if (!group.ok()) {
        warn(events::kClustersBucket, entry.key, group.error().describe());
        continue;
      }
      snap.groups.push_back(std::move(group).value());
    } else if (startsWith(entry.key, "heartbeat.")) {
      auto names = scheduler::keyNames(entry.key, "heartbeat", 1);
      auto json = Json::parse(entry.value);
      if (names.ok() && json.ok()) {
        snap.heartbeats[(*names)[0]] = json->getString("time");
      }
    }
  }

  auto bundles = readAll(hub.bucket(events::kBundlesBucket));
  FLOTILLA_TRY(bundles);
  for (const auto& entry : *bundles) {
    auto json = Json::parse(entry.value);
    if (!json.ok()) {
      warn(events::kBundlesBucket, entry.key, json.error().describe());
      continue;
    }
    snap.bundles[entry.key] = std::move(json).value();
  }

  auto deployments = readAll(hub.bucket(events::kDeploymentsBucket));
  FLOTILLA_TRY(deployments);
  for (const auto& entry : *deployments) {
    auto record = scheduler::decodeDeploymentRecord(entry.value);
    if (!record.ok()) {
      warn(events::kDeploymentsBucket, entry.key, record.error().describe());
      continue;
    }
    snap.deployments.push_back(std::move(record).value());
  }

  auto status = readAll(hub.bucket(events::kStatusBucket));
  FLOTILLA_TRY(status);
  for (const auto& entry : *status) {
    auto json = Json::parse(entry.value);
    if (!json.ok()) {
      warn(events::kStatusBucket, entry.key, json.error().describe());
      continue;
    }
    if (startsWith(entry.key, "bd.")) {
      auto bd = scheduler::decodeBdStatus(entry.value);
      if (bd.ok()) {
        snap.bd_statuses[scheduler::deploymentRecordKey(bd->cluster, bd->workspace, bd->bundle)] = *bd;
      }
    }
    snap.status[entry.key] = std::move(json).value();
  }
  return snap;
}

}  // namespace flotilla::cli
