// Manifest delivery on the hub (manifest_server.h): which manifests each cluster may read, from a watch of the
// deployments bucket, and the chunked replies on flotilla.manifest.<cluster>.
#include "flotilla/scheduler/manifest_server.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "flotilla/bus/kv_follow.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/manifest.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/service/runtime.h"
#include "invalid_record.h"

namespace flotilla::scheduler {

namespace {

constexpr std::string_view kChunkDone = "chunk complete";
//! The agents' reports in the status bucket (bd.<cluster>.<ws>.<bundle>).
constexpr std::string_view kReportFilter = "bd.>";
//! How long the watch thread waits on one watch before looking at the other.
constexpr std::chrono::milliseconds kWatchWait{250};

}  // namespace

// ---- ManifestIndex --------------------------------------------------------------------------------------------

void ManifestIndex::count(const Entry& entry, int delta) {
  std::set<std::string> manifests = {entry.current, entry.previous, entry.applied};
  manifests.erase("");
  for (const auto& manifest : manifests) {
    auto key = std::pair{entry.cluster, manifest};
    int& n = references_[key];
    n += delta;
    if (n <= 0) {
      references_.erase(key);
    }
  }
}

void ManifestIndex::put(const std::string& key, const std::string& cluster, const std::string& manifest_id,
                        int64_t generation) {
  auto found = entries_.find(key);
  if (found == entries_.end()) {
    Entry entry{.cluster = cluster,
                .current = manifest_id,
                .previous = {},
                .applied = {},
                .generation = generation,
                .recent = {manifest_id}};
    count(entry, 1);
    entries_[key] = std::move(entry);
    return;
  }
  Entry& entry = found->second;
  entry.generation = std::max(entry.generation, generation);
  if (entry.current == manifest_id || manifest_id.empty()) {
    return;  // same release (a commit followed, a delete sent) or nothing released: what the agent may read stays
  }
  count(entry, -1);
  entry.previous = entry.current;
  entry.current = manifest_id;
  count(entry, 1);
  entry.recent.push_front(manifest_id);
  if (entry.recent.size() > kRecentManifests) {
    entry.recent.pop_back();
  }
}

void ManifestIndex::applied(const std::string& key, const std::string& manifest_id) {
  auto found = entries_.find(key);
  if (found == entries_.end() || manifest_id.empty()) {
    return;
  }
  Entry& entry = found->second;
  if (std::find(entry.recent.begin(), entry.recent.end(), manifest_id) == entry.recent.end()) {
    return;  // not one the hub sent lately: a report cannot widen what the cluster may read
  }
  count(entry, -1);
  entry.applied = manifest_id;
  count(entry, 1);
}

void ManifestIndex::remove(const std::string& key) {
  auto found = entries_.find(key);
  if (found == entries_.end()) {
    return;
  }
  count(found->second, -1);
  entries_.erase(found);
}

bool ManifestIndex::supersedes(const std::string& key, int64_t generation) const {
  auto found = entries_.find(key);
  return generation > 0 && found != entries_.end() && found->second.generation > generation;
}

bool ManifestIndex::behind(const std::string& key, int64_t generation) const {
  auto found = entries_.find(key);
  return generation > 0 && (found == entries_.end() || found->second.generation < generation);
}

bool ManifestIndex::allows(const std::string& cluster, const std::string& manifest_id) const {
  return !manifest_id.empty() && references_.contains(std::pair{cluster, manifest_id});
}

// ---- ManifestServer: records ----------------------------------------------------------------------------------

ManifestServer::ManifestServer(std::shared_ptr<bus::Connection> connection, std::shared_ptr<bus::KeyValue> deployments,
                               std::shared_ptr<bus::KeyValue> status, std::shared_ptr<bus::ObjectStore> manifests,
                               Metrics& metrics, ManifestServerOptions options)
    : connection_(std::move(connection)),
      deployments_(std::move(deployments)),
      status_(std::move(status)),
      manifests_(std::move(manifests)),
      metrics_(metrics),
      options_(options) {}

ManifestServer::~ManifestServer() {
  stop();
}

Status ManifestServer::start() {
  if (!connection_ || !deployments_ || !status_ || !manifests_) {
    return fail(ErrorKind::kInvalid,
                "manifest server: the connection, the deployments and status buckets and the "
                "manifests store are required");
  }
  auto records = deployments_->watch(">");
  FLOTILLA_TRY(records);
  records_watcher_ = std::move(records).value();
  auto reports = status_->watch(kReportFilter);
  FLOTILLA_TRY(reports);
  reports_watcher_ = std::move(reports).value();
  auto initial_records = records_watcher_.initialValues(options_.load_timeout);
  FLOTILLA_TRY(initial_records);
  auto initial_reports = reports_watcher_.initialValues(options_.load_timeout);
  FLOTILLA_TRY(initial_reports);
  for (const auto& entry : *initial_records) {
    applyRecord(entry);
  }
  for (const auto& entry : *initial_reports) {
    applyReport(entry);
  }
  loaded_ = true;
  // One thread per watch, each waiting on its own: a record reaches the index as soon as it is written.
  records_thread_ = std::thread([this] { follow(records_watcher_, deployments_, ">", true); });
  reports_thread_ = std::thread([this] { follow(reports_watcher_, status_, kReportFilter, false); });
  auto subscription = connection_->subscribe(events::kManifestFilter, kManifestQueue,
                                             [this](bus::Message message) { handleRequest(message); });
  FLOTILLA_TRY(subscription);
  subscription_ = std::move(subscription).value();
  FLOTILLA_TRY(connection_->flush());
  subscribed_ = true;
  std::lock_guard lock(mutex_);
  log::info("serving manifests to agents",
            {{"subject", std::string(events::kManifestFilter)}, {"deployments", static_cast<int64_t>(index_.size())}});
  return {};
}

void ManifestServer::stop() {
  stopping_ = true;
  subscription_.unsubscribe();
  subscribed_ = false;
  for (std::thread* thread : {&records_thread_, &reports_thread_}) {
    if (thread->joinable()) {
      thread->join();
    }
  }
  records_watcher_.stop();
  reports_watcher_.stop();
}

bool ManifestServer::ready(std::string& why) const {
  return service::readyWhen(why, {{loaded_, "manifest server: deployment records not loaded yet"},
                                  {subscribed_, "manifest server: not subscribed to the manifest subjects"}});
}

void ManifestServer::follow(bus::KvWatcher& watcher, const std::shared_ptr<bus::KeyValue>& bucket,
                            std::string_view filter, bool records) {
  bus::followWatch(
      watcher, *bucket, filter, kWatchWait, [this] { return stopping_.load(); },
      [&](const std::optional<bus::KvEntry>& entry) {
        if (records) {
          expireParked();
        }
        if (!entry) {
          return;  // nothing for now (or the end of the initial values)
        }
        if (records) {
          applyRecord(*entry);
          answerParked(entry->key);
        } else {
          applyReport(*entry);
        }
      },
      [&](const Error& error) {
        metrics_.counter("manifest_watch_errors_total", "Errors of the KV watches behind manifest delivery")
            .Increment();
        log::warn("a watch behind manifest delivery failed; restarting it",
                  {{"bucket", bucket->bucket()}, {"error", error.describe()}});
        std::this_thread::sleep_for(std::chrono::seconds(1));
        return true;
      });
}

void ManifestServer::applyRecord(const bus::KvEntry& entry) {
  auto names = events::keyNames(entry.key, "", 3);
  if (!names.ok()) {
    return;  // not a deployment key
  }
  std::lock_guard lock(mutex_);
  if (entry.operation != bus::KvOperation::kPut) {
    index_.remove(entry.key);
    return;
  }
  auto record = events::parseRecord<events::DeploymentRecord>(entry.value);
  if (!record.ok()) {
    countInvalidRecord(metrics_, events::kDeploymentsBucket, entry.key, record.error());
    return;
  }
  index_.put(entry.key, (*names)[0], record->manifest_id, record->generation);
}

void ManifestServer::applyReport(const bus::KvEntry& entry) {
  if (entry.operation != bus::KvOperation::kPut || !startsWith(entry.key, "bd.")) {
    return;  // a removed report changes nothing: the record's own removal drops the entry
  }
  auto report = events::parseRecord<events::BdStatus>(entry.value);
  if (!report.ok()) {
    countInvalidRecord(metrics_, events::kStatusBucket, entry.key, report.error());
    return;
  }
  const std::string& state = report->state;
  if (report->stale || state.empty() || state == "ErrApplied" || state == "WaitApplied" || state == "Pending") {
    return;  // not applied (or about another deployment than the record's)
  }
  const std::string& id = report->deployment_id;
  std::lock_guard lock(mutex_);
  index_.applied(entry.key.substr(3), id.substr(0, id.find(':')));
}

// ---- ManifestServer: requests ---------------------------------------------------------------------------------

uint64_t ManifestServer::chunkSize() const {
  int64_t limit = connection_->maxPayload() - kChunkHeadroom;
  if (options_.max_chunk > 0) {
    limit = limit > 0 ? std::min(limit, options_.max_chunk) : options_.max_chunk;
  }
  return static_cast<uint64_t>(std::max<int64_t>(limit, 1024));
}

void ManifestServer::handleRequest(const bus::Message& message) {
  if (message.reply().empty()) {
    return;  // nobody to answer
  }
  {
    std::lock_guard lock(mutex_);
    if (parkIfEarly(message.subject(), message.data(), message.reply())) {
      return;
    }
  }
  send(std::string(message.reply()), answer(message.subject(), message.data()));
}

void ManifestServer::send(const std::string& reply_subject, const ManifestReply& reply) {
  auto sent = connection_->publish(reply_subject, reply.body, reply.headers);
  if (!sent.ok()) {
    metrics_.counter("manifest_reply_failures_total", "Manifest replies that could not be sent").Increment();
    log::warn("cannot send a manifest reply", {{"error", sent.error().describe()}});
  }
}

bool ManifestServer::parkIfEarly(std::string_view subject, std::string_view data, std::string_view reply) {
  auto tokens = events::subjectTokens(subject, events::kManifestPrefix);
  auto request = events::parseManifestRequest(data);
  if (!loaded_ || !tokens.ok() || tokens->size() != 1 || !request.ok() || request->bundle.empty() ||
      index_.allows((*tokens)[0], request->manifest_id)) {
    return false;
  }
  const std::string key = events::deploymentKey((*tokens)[0], request->workspace, request->bundle);
  if (!index_.behind(key, request->generation)) {
    return false;
  }
  if (early_count_ >= kMaxEarly) {
    metrics_.counter("manifest_early_overflows_total", "Early manifest requests answered at once: too many waiting")
        .Increment();
    log::warn("too many manifest requests wait for their deployment record; answering this one at once",
              {{"cluster", (*tokens)[0]}, {"waiting", static_cast<int64_t>(early_count_)}});
    return false;
  }
  metrics_.counter("manifest_requests_early_total", "Manifest requests that waited for their deployment record")
      .Increment();
  const auto deadline = std::chrono::steady_clock::now() + kEarlyWait;
  early_[key].push_back(EarlyRequest{
      .subject = std::string(subject), .data = std::string(data), .reply = std::string(reply), .deadline = deadline});
  early_deadlines_.emplace_back(deadline, key);
  ++early_count_;
  return true;
}

void ManifestServer::answerParked(const std::string& key) {
  std::vector<EarlyRequest> due;
  {
    std::lock_guard lock(mutex_);
    auto found = early_.find(key);
    if (found == early_.end()) {
      return;
    }
    due = std::move(found->second);
    early_.erase(found);
    early_count_ -= due.size();
  }
  for (const auto& request : due) {
    send(request.reply, answer(request.subject, request.data));
  }
}

void ManifestServer::expireParked() {
  std::vector<EarlyRequest> due;
  {
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    while (!early_deadlines_.empty() && early_deadlines_.front().first <= now) {
      auto found = early_.find(early_deadlines_.front().second);
      early_deadlines_.pop_front();
      if (found == early_.end()) {
        continue;  // answered when its record came
      }
      auto& waiting = found->second;  // in arrival order: the expired ones come first
      auto end = std::find_if(waiting.begin(), waiting.end(), [&](const EarlyRequest& r) { return r.deadline > now; });
      std::move(waiting.begin(), end, std::back_inserter(due));
      early_count_ -= static_cast<size_t>(end - waiting.begin());
      waiting.erase(waiting.begin(), end);
      if (waiting.empty()) {
        early_.erase(found);
      }
    }
  }
  for (const auto& request : due) {
    send(request.reply, answer(request.subject, request.data));  // refused as usual unless allowed meanwhile
  }
}

ManifestReply ManifestServer::refuse(std::string_view reason, const std::string& cluster,
                                     const std::string& manifest_id, const std::string& message) {
  metrics_
      .counter("manifest_requests_total", "Manifest requests of agents, by result", {{"result", std::string(reason)}})
      .Increment();
  log::warn("manifest request refused",
            {{"cluster", cluster}, {"manifest", manifest_id}, {"reason", std::string(reason)}, {"error", message}});
  return ManifestReply{.headers = {{std::string(events::kManifestErrorHeader), std::string(reason)}}, .body = message};
}

ManifestReply ManifestServer::answer(std::string_view subject, std::string_view data) {
  auto tokens = events::subjectTokens(subject, events::kManifestPrefix);
  if (!tokens.ok() || tokens->size() != 1) {
    return refuse(events::kManifestBadRequest, "", "", "not a manifest subject: " + std::string(subject));
  }
  const std::string& cluster = (*tokens)[0];
  auto request = events::parseManifestRequest(data);
  if (!request.ok()) {
    return refuse(events::kManifestBadRequest, cluster, "", request.error().describe());
  }
  const std::string& id = request->manifest_id;
  if (!loaded_) {
    return refuse(events::kManifestUnavailable, cluster, id, "the hub has not loaded its deployment records yet");
  }
  bool allowed = false;
  bool superseded = false;
  {
    std::lock_guard lock(mutex_);
    allowed = index_.allows(cluster, id);
    superseded =
        !allowed && !request->bundle.empty() &&
        index_.supersedes(events::deploymentKey(cluster, request->workspace, request->bundle), request->generation);
  }
  if (superseded) {
    return refuse(events::kManifestSuperseded, cluster, id,
                  "bundle " + request->workspace + "/" + request->bundle + " of cluster " + cluster +
                      " has a newer deployment than generation " + std::to_string(request->generation));
  }
  if (!allowed) {
    return refuse(events::kManifestNotDeployed, cluster, id,
                  "no deployment of cluster " + cluster + " references manifest " + id);
  }
  const auto offset = static_cast<uint64_t>(request->offset);
  auto chunk = readChunk(events::manifestObjectName(id), offset, chunkSize());
  if (!chunk.ok()) {
    bool missing = chunk.error().kind == ErrorKind::kNotFound;
    bool past_end = chunk.error().kind == ErrorKind::kInvalid;
    return refuse(missing    ? events::kManifestNotFound
                  : past_end ? events::kManifestBadRequest
                             : events::kManifestUnavailable,
                  cluster, id, chunk.error().describe());
  }
  auto& [info, bytes] = *chunk;
  metrics_.counter("manifest_requests_total", "Manifest requests of agents, by result", {{"result", "ok"}}).Increment();
  metrics_.counter("manifest_bytes_sent_total", "Manifest bytes sent to agents")
      .Increment(static_cast<double>(bytes.size()));
  log::debug("manifest chunk sent", {{"cluster", cluster},
                                     {"manifest", id},
                                     {"offset", request->offset},
                                     {"bytes", static_cast<int64_t>(bytes.size())},
                                     {"size", static_cast<int64_t>(info.size)}});
  return ManifestReply{.headers = {{std::string(events::kManifestSizeHeader), std::to_string(info.size)},
                                   {std::string(events::kManifestDigestHeader), info.digest},
                                   {std::string(events::kManifestOffsetHeader), std::to_string(offset)}},
                       .body = std::move(bytes)};
}

// ---- ManifestServer: the store --------------------------------------------------------------------------------

std::shared_ptr<const ManifestServer::Cached> ManifestServer::cached(const std::string& name) {
  std::lock_guard lock(cache_mutex_);
  auto found = cache_.find(name);
  if (found == cache_.end()) {
    return nullptr;
  }
  cache_order_.remove(name);
  cache_order_.push_front(name);
  return found->second;
}

void ManifestServer::remember(const std::string& name, const bus::ObjectInfo& info, std::string data) {
  std::lock_guard lock(cache_mutex_);
  if (cache_.contains(name)) {
    return;
  }
  while (!cache_order_.empty() && cache_used_ + data.size() > options_.cache_bytes) {
    auto last = cache_.find(cache_order_.back());
    cache_used_ -= last->second->data.size();
    cache_.erase(last);
    cache_order_.pop_back();
  }
  cache_used_ += data.size();
  cache_order_.push_front(name);
  cache_[name] = std::make_shared<const Cached>(Cached{.info = info, .data = std::move(data)});
}

Result<std::pair<bus::ObjectInfo, std::string>> ManifestServer::readChunk(const std::string& name, uint64_t offset,
                                                                          uint64_t max) {
  auto slice = [&](const bus::ObjectInfo& info,
                   std::string_view data) -> Result<std::pair<bus::ObjectInfo, std::string>> {
    if (offset > info.size || (offset == info.size && info.size > 0)) {
      return fail(ErrorKind::kInvalid, "offset " + std::to_string(offset) + " is past the end of the manifest (" +
                                           std::to_string(info.size) + " bytes)");
    }
    return std::pair{info, std::string(data.substr(offset, max))};
  };
  if (auto hit = cached(name)) {
    return slice(hit->info, hit->data);
  }
  auto info = manifests_->info(name);
  FLOTILLA_TRY(info);
  if (info->size <= options_.cache_bytes) {
    auto data = manifests_->get(name);
    FLOTILLA_TRY(data);
    auto out = slice(*info, *data);
    remember(name, *info, std::move(data).value());
    return out;
  }
  if (offset >= info->size) {
    return slice(*info, {});
  }
  // Larger than the cache: read up to the end of the chunk and stop there.
  const uint64_t end = std::min(info->size, offset + max);
  std::string out;
  uint64_t position = 0;
  auto streamed = manifests_->get(name, [&](std::string_view piece) -> Status {
    const uint64_t piece_end = position + piece.size();
    if (piece_end > offset && position < end) {
      const uint64_t from = std::max(offset, position);
      out.append(piece.substr(from - position, std::min(end, piece_end) - from));
    }
    position = piece_end;
    return position >= end ? Status(fail(ErrorKind::kWait, std::string(kChunkDone))) : Status();
  });
  if (out.size() != end - offset) {
    return fail(streamed.ok() ? Error{ErrorKind::kInternal, "manifest " + name + " is shorter than its meta says", ""}
                              : streamed.error());
  }
  return std::pair{*info, std::move(out)};
}

}  // namespace flotilla::scheduler
