#include "flotilla/service/hub.h"

#include <thread>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"

namespace flotilla::service {

using std::chrono::hours;
using std::chrono::minutes;

bus::ConnectOptions connectOptionsFrom(const Config& config, const std::string& client_name) {
  bus::ConnectOptions options;
  options.servers = split(config.get("nats-url", "nats://127.0.0.1:4222"), ',');
  options.name = client_name;
  options.creds_file = config.get("nats-creds");
  options.user = config.get("nats-user");
  options.password = config.get("nats-password");
  options.ca_file = config.get("nats-ca");
  options.cert_file = config.get("nats-cert");
  options.key_file = config.get("nats-key");
  return options;
}

Status ensureTopology(bus::JetStream& js) {
  auto stream = [&](const char* name, const char* subjects, std::chrono::milliseconds max_age,
                    std::chrono::milliseconds dedup) -> Status {
    bus::StreamConfig config;
    config.name = name;
    config.subjects = {subjects};
    config.max_age = max_age;
    config.duplicate_window = dedup;
    auto info = js.ensureStream(config);
    if (!info.ok()) {
      return fail(info.error());
    }
    return {};
  };
  FLOTILLA_TRY(stream(kCommitsStream, events::kCommitFilter.data(), hours(24 * 7), minutes(10)));
  FLOTILLA_TRY(stream(kBundlesStream, events::kBundleFilter.data(), hours(24 * 7), minutes(10)));
  FLOTILLA_TRY(stream(kDeployStream, events::kDeployFilter.data(), hours(24 * 7), minutes(10)));
  FLOTILLA_TRY(stream(kStatusStream, events::kStatusFilter.data(), hours(24), minutes(2)));
  FLOTILLA_TRY(stream(kEventsStream, events::kEventsFilter.data(), hours(24 * 7), minutes(2)));
  return {};
}

namespace {

Status openBuckets(Hub& hub, HubAccess access) {
  auto kv = [&](const char* bucket, int history, std::shared_ptr<bus::KeyValue>& out) -> Status {
    auto opened = access == HubAccess::kProvision
                      ? bus::KeyValue::ensure(hub.js, bus::KvConfig{.bucket = bucket, .history = history})
                      : bus::KeyValue::open(hub.js, bucket);
    if (!opened.ok()) {
      return fail(opened.error());
    }
    out = std::move(opened).value();
    return {};
  };
  auto objects = [&](const char* bucket, std::shared_ptr<bus::ObjectStore>& out) -> Status {
    auto opened = bus::ObjectStore::open(hub.js, bucket, access == HubAccess::kProvision);
    if (!opened.ok()) {
      return fail(opened.error());
    }
    out = std::move(opened).value();
    return {};
  };
  FLOTILLA_TRY(objects(kManifestsObjects, hub.manifests));
  if (access == HubAccess::kAgent) {
    return {};
  }
  FLOTILLA_TRY(ensureTopology(*hub.js));
  FLOTILLA_TRY(kv(kGitReposBucket, 5, hub.gitrepos));
  FLOTILLA_TRY(kv(kClustersBucket, 1, hub.clusters));
  FLOTILLA_TRY(kv(kBundlesBucket, 5, hub.bundles));
  FLOTILLA_TRY(kv(kDeploymentsBucket, 1, hub.deployments));
  FLOTILLA_TRY(kv(kStatusBucket, 1, hub.status));
  FLOTILLA_TRY(objects(kSourcesObjects, hub.sources));
  return {};
}

}  // namespace

Result<Hub> connectHub(const bus::ConnectOptions& options, HubAccess access, Metrics* metrics,
                       std::chrono::milliseconds deadline) {
  auto give_up = std::chrono::steady_clock::now() + deadline;
  std::chrono::milliseconds delay(200);
  while (true) {
    Hub hub;
    auto connection = bus::Connection::connect(options);
    Status opened;
    if (connection.ok()) {
      hub.connection = std::move(connection).value();
      auto js = bus::JetStream::create(hub.connection);
      opened = js.ok() ? Status() : Status(fail(js.error()));
      if (opened.ok()) {
        hub.js = std::move(js).value();
        opened = openBuckets(hub, access);
      }
    } else {
      opened = fail(connection.error());
    }
    if (opened.ok()) {
      return hub;
    }
    if (!opened.error().retryable() || std::chrono::steady_clock::now() + delay > give_up) {
      return fail(opened.error());
    }
    log::warn("hub not reachable yet, retrying",
              {{"error", opened.error().describe()}, {"retry_in_ms", static_cast<int64_t>(delay.count())}});
    if (metrics != nullptr) {
      metrics->counter("hub_connect_retries_total", "Failed attempts to connect to the hub at start-up").Increment();
    }
    std::this_thread::sleep_for(delay);
    delay = std::min<std::chrono::milliseconds>(delay * 2, std::chrono::seconds(5));
  }
}

}  // namespace flotilla::service
