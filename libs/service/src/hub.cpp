#include "flotilla/service/hub.h"

#include <algorithm>
#include <limits>
#include <thread>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"

namespace flotilla::service {
namespace {

//! A cap the NATS server cannot reserve is a configuration error, not something to retry.
Error capNotReserved(Error error) {
  if (error.kind == ErrorKind::kStoreFull) {
    error.kind = ErrorKind::kInvalid;
    error.message +=
        " (nats-server reserves each store's cap when it creates the store, up to its max_file_store: "
        "lower --store-max-bytes / --store-limits, or give NATS more storage)";
  }
  return error;
}

}  // namespace

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
  options.inbox_prefix = config.get("nats-inbox-prefix");
  return options;
}

StoreLimits StoreLimits::fromBudget(int64_t budget) {
  StoreLimits limits;
  for (const auto& [store, share] : kStoreShares) {
    limits.max_bytes[store] = std::max(kMinStoreBytes, budget / 1000 * share);
  }
  return limits;
}

int64_t StoreLimits::of(std::string_view store) const {
  auto found = max_bytes.find(std::string(store));
  return found == max_bytes.end() ? -1 : found->second;
}

std::map<std::string, std::string> storeFlags() {
  return {
      {"store-max-bytes",
       "size budget of all the hub's streams, KV buckets and object stores, split by fixed shares (docs/pipeline.md "
       "\"Size caps\"); e.g. 16GiB (default 4GiB). Give every hub service the same value"},
      {"store-replicas",
       "copies of every stream, KV bucket and object store: 1 (default) on one nats-server, 3 (or 5) on a "
       "JetStream cluster, so losing a node loses nothing. Give every hub service the same value"},
      {"store-limits",
       "per-store caps overriding the budget's share: store=size,... e.g. sources=4GiB,FLOTILLA_EVENTS=1GiB"},
  };
}

namespace {

//! The factor of a size unit: 1 for none or B; K, M, G, T (B optional) are powers of 1000, Ki, Mi, Gi, Ti (B
//! optional) powers of 1024; 0 for anything else.
int64_t unitFactor(std::string_view unit) {
  if (unit.empty() || unit == "B") {
    return 1;
  }
  constexpr std::string_view kPrefixes = "KMGT";
  const size_t power = kPrefixes.find(unit.front());
  if (power == std::string_view::npos) {
    return 0;
  }
  std::string_view rest = unit.substr(1);
  const bool binary = rest.starts_with('i');
  if (binary) {
    rest.remove_prefix(1);
  }
  if (!rest.empty() && rest != "B") {
    return 0;
  }
  int64_t factor = 1;
  for (size_t i = 0; i <= power; ++i) {
    factor *= binary ? 1024 : 1000;
  }
  return factor;
}

}  // namespace

Result<int64_t> parseByteSize(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    ++digits;
  }
  if (digits == 0 || digits > 15) {
    return fail(ErrorKind::kInvalid, "\"" + std::string(text) + "\" is not a size like 512MiB or 16GiB");
  }
  const int64_t number = std::stoll(std::string(text.substr(0, digits)));
  const int64_t factor = unitFactor(text.substr(digits));
  if (factor != 0 && number <= std::numeric_limits<int64_t>::max() / factor) {
    return number * factor;
  }
  return fail(ErrorKind::kInvalid, "\"" + std::string(text) + "\" is not a size like 512MiB or 16GiB");
}

Result<StoreLimits> storeLimitsFrom(const Config& config) {
  int64_t budget = kDefaultStoreBudget;
  if (const std::string text = config.get("store-max-bytes"); !text.empty()) {
    auto parsed = parseByteSize(text);
    if (!parsed.ok()) {
      return fail(ErrorKind::kInvalid, "--store-max-bytes: " + parsed.error().message);
    }
    budget = *parsed;
  }
  StoreLimits limits = StoreLimits::fromBudget(budget);
  if (const std::string text = config.get("store-replicas"); !text.empty()) {
    if (text != "1" && text != "3" && text != "5") {
      return fail(ErrorKind::kInvalid, "--store-replicas: \"" + text +
                                           "\" is not 1, 3 or 5 (an odd count up to 5, as JetStream needs a majority)");
    }
    limits.replicas = std::stoi(text);
  }
  for (const std::string& item : split(config.get("store-limits"), ',')) {
    if (item.empty()) {
      continue;
    }
    const size_t eq = item.find('=');
    const std::string store = item.substr(0, eq);
    if (eq == std::string::npos || limits.max_bytes.count(store) == 0) {
      std::string message = "--store-limits: \"" + item + "\" is not store=size with a store of: ";
      for (size_t i = 0; i < std::size(kStoreShares); ++i) {
        message += i == 0 ? "" : ", ";
        message += kStoreShares[i].first;
      }
      return fail(ErrorKind::kInvalid, std::move(message));
    }
    auto parsed = parseByteSize(item.substr(eq + 1));
    if (!parsed.ok()) {
      return fail(ErrorKind::kInvalid, "--store-limits: " + store + ": " + parsed.error().message);
    }
    limits.max_bytes[store] = *parsed;
  }
  for (const auto& [store, bytes] : limits.max_bytes) {
    if (bytes < kMinStoreBytes) {
      return fail(ErrorKind::kInvalid, "store " + store + " would get " + std::to_string(bytes) +
                                           " bytes; each store needs at least " + std::to_string(kMinStoreBytes) +
                                           " (--store-max-bytes / --store-limits)");
    }
  }
  return limits;
}

Status ensureTopology(bus::JetStream& js, const StoreLimits& limits) {
  auto stream = [&](const char* name, const char* subjects, std::chrono::milliseconds max_age,
                    std::chrono::milliseconds dedup) -> Status {
    bus::StreamConfig config;
    config.name = name;
    config.subjects = {subjects};
    config.max_age = max_age;
    config.duplicate_window = dedup;
    config.max_bytes = limits.of(name);
    config.replicas = limits.replicas;
    // Work streams refuse new messages when full (the producer waits; nothing unhandled is dropped). The public
    // event stream is a history, and the status stream is mostly heartbeats the scheduler consumed moments after
    // they arrived: there the oldest messages go, so a full stream never stops heartbeats and reports.
    config.discard_new = std::string_view(name) != kEventsStream && std::string_view(name) != kStatusStream;
    if (std::string_view(name) == kDeployStream) {
      config.max_consumers = kMaxDeployConsumers;  // one durable per registered cluster
    }
    auto info = js.ensureStream(config);
    if (!info.ok()) {
      return fail(capNotReserved(info.error()));
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

Status openBuckets(Hub& hub, HubAccess access, const StoreLimits& limits) {
  auto kv = [&](const char* bucket, int history, std::shared_ptr<bus::KeyValue>& out) -> Status {
    auto opened = access == HubAccess::kProvision
                      ? bus::KeyValue::ensure(hub.js, bus::KvConfig{.bucket = bucket,
                                                                    .history = history,
                                                                    .max_bytes = limits.of(bucket),
                                                                    .replicas = limits.replicas})
                      : bus::KeyValue::open(hub.js, bucket);
    if (!opened.ok()) {
      return fail(capNotReserved(opened.error()));
    }
    out = std::move(opened).value();
    return {};
  };
  auto objects = [&](const char* bucket, std::shared_ptr<bus::ObjectStore>& out) -> Status {
    auto opened = bus::ObjectStore::open(hub.js, bucket, access == HubAccess::kProvision, bus::StorageType::kFile,
                                         limits.of(bucket), limits.replicas);
    if (!opened.ok()) {
      return fail(capNotReserved(opened.error()));
    }
    out = std::move(opened).value();
    return {};
  };
  if (access == HubAccess::kAgent) {
    return {};  // an agent reads no bucket: its manifests come by request from the hub (docs/pipeline.md)
  }
  FLOTILLA_TRY(objects(kManifestsObjects, hub.manifests));
  FLOTILLA_TRY(ensureTopology(*hub.js, limits));
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
                       std::chrono::milliseconds deadline, const StoreLimits& limits) {
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
        opened = openBuckets(hub, access, limits);
      }
    } else {
      opened = fail(connection.error());
    }
    if (opened.ok()) {
      return hub;
    }
    // On a JetStream cluster a store another hub service has just created can answer "not found" for a moment
    // (its assignment is still reaching the node we asked): provisioning tries again instead of giving up.
    const bool racing_creation = access == HubAccess::kProvision && opened.error().kind == ErrorKind::kNotFound;
    if ((!opened.error().retryable() && !racing_creation) || std::chrono::steady_clock::now() + delay > give_up) {
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
