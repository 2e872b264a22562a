// ManifestSource (manifest_source.h): manifests from the hub, chunk by chunk, verified, with retries.
#include "flotilla/agent/manifest_source.h"

#include <algorithm>
#include <charconv>
#include <thread>

#include "flotilla/bus/object_store.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/manifest.h"
#include "flotilla/events/payloads.h"

namespace flotilla::agent {

namespace {

//! Reserved up front at most (a manifest larger than this grows as its chunks arrive).
constexpr uint64_t kMaxReserve = uint64_t{64} << 20;

Result<uint64_t> numberHeader(const bus::Message& reply, std::string_view name) {
  const std::string text = reply.header(name).value_or("");
  const char* end = text.data() + text.size();
  uint64_t out = 0;
  auto parsed = std::from_chars(text.data(), end, out);
  if (text.empty() || parsed.ec != std::errc() || parsed.ptr != end) {
    return fail(ErrorKind::kInternal, "manifest reply: header " + std::string(name) + " is missing or not a number");
  }
  return out;
}

//! A refusal's error kind and message (manifest_source.h, "Failures").
Error refusal(std::string_view reason, std::string_view message, const std::string& manifest_id) {
  std::string text =
      "the hub refused manifest " + manifest_id + " (" + std::string(reason) + "): " + std::string(message);
  if (reason == events::kManifestNotFound) {
    return Error{ErrorKind::kNotFound, text, "manifests"};
  }
  if (reason == events::kManifestSuperseded) {
    return Error{ErrorKind::kConflict, text, "manifests"};
  }
  if (reason == events::kManifestNotDeployed || reason == events::kManifestUnavailable) {
    return Error{ErrorKind::kTransient, text, "manifests"};
  }
  return Error{ErrorKind::kInternal, text, "manifests"};
}

}  // namespace

ManifestSource::ManifestSource(std::shared_ptr<bus::Connection> connection, std::string cluster, Metrics& metrics,
                               ManifestSourceOptions options)
    : connection_(std::move(connection)), metrics_(metrics), options_(options), cluster_(std::move(cluster)) {}

void ManifestSource::setCluster(std::string cluster) {
  std::lock_guard lock(mutex_);
  cluster_ = std::move(cluster);
}

std::string ManifestSource::cluster() const {
  std::lock_guard lock(mutex_);
  return cluster_;
}

Result<std::string> ManifestSource::fetch(const std::string& cluster, const std::string& manifest_id,
                                          const ManifestFor& deploy) {
  const std::string subject = events::manifestSubject(cluster);
  std::string data;
  std::string digest;
  uint64_t size = 0;
  uint64_t offset = 0;
  do {
    events::ManifestRequest request{.id = events::newEventId(),
                                    .time = log::nowRfc3339(),
                                    .manifest_id = manifest_id,
                                    .offset = static_cast<int64_t>(offset),
                                    .workspace = deploy.workspace,
                                    .bundle = deploy.bundle,
                                    .generation = deploy.generation};
    auto reply = connection_->request(subject, events::encode(request).dump(), options_.request_timeout);
    FLOTILLA_TRY(reply);
    if (auto reason = reply->header(events::kManifestErrorHeader)) {
      return fail(refusal(*reason, reply->data(), manifest_id));
    }
    auto chunk_size = numberHeader(*reply, events::kManifestSizeHeader);
    FLOTILLA_TRY(chunk_size);
    auto chunk_offset = numberHeader(*reply, events::kManifestOffsetHeader);
    FLOTILLA_TRY(chunk_offset);
    std::string chunk_digest = reply->header(events::kManifestDigestHeader).value_or("");
    if (offset == 0) {
      size = *chunk_size;
      digest = chunk_digest;
      data.reserve(std::min(size, kMaxReserve));
    } else if (*chunk_size != size || chunk_digest != digest) {
      return fail(ErrorKind::kTransient, "manifest " + manifest_id + " changed during the transfer", "manifests");
    }
    if (*chunk_offset != offset || (reply->data().empty() && offset < size) || reply->data().size() > size - offset) {
      return fail(ErrorKind::kInternal, "manifest reply: chunk at offset " + std::to_string(*chunk_offset) + " with " +
                                            std::to_string(reply->data().size()) + " bytes does not continue " +
                                            std::to_string(offset) + " of " + std::to_string(size));
    }
    data.append(reply->data());
    offset += reply->data().size();
  } while (offset < size);
  if (bus::objectDigest(sha256Raw(data)) != digest) {
    return fail(ErrorKind::kTransient, "manifest " + manifest_id + ": the received bytes do not match the digest",
                "manifests");
  }
  return data;
}

Result<std::string> ManifestSource::get(std::string_view manifest_id, bool retry, const ManifestFor& deploy) {
  const std::string id(manifest_id);
  const int attempts = retry ? std::max(1, options_.attempts) : 1;
  std::chrono::milliseconds delay = options_.backoff_min;
  Error last;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    const std::string name = cluster();
    auto fetched = fetch(name, id, deploy);
    if (fetched.ok()) {
      metrics_.counter("manifest_fetches_total", "Manifests fetched from the hub, by result", {{"result", "ok"}})
          .Increment();
      metrics_.counter("manifest_bytes_received_total", "Manifest bytes received from the hub")
          .Increment(static_cast<double>(fetched->size()));
      return fetched;
    }
    last = fetched.error();
    if (last.kind == ErrorKind::kConflict) {
      // Not a failure: the deploy asking is stale (deploy_apply.cpp skips it), a newer one is on its way.
      metrics_
          .counter("manifest_fetches_total", "Manifests fetched from the hub, by result", {{"result", "superseded"}})
          .Increment();
      return fail(last);
    }
    if (last.kind != ErrorKind::kTransient) {
      metrics_.counter("manifest_fetches_total", "Manifests fetched from the hub, by result", {{"result", "failed"}})
          .Increment();
      log::warn("cannot get a manifest from the hub",
                {{"cluster", name}, {"manifest", id}, {"error", last.describe()}});
      return fail(last);
    }
    if (attempt < attempts) {
      metrics_.counter("manifest_fetch_retries_total", "Manifest fetches retried after a transient failure")
          .Increment();
      log::warn("manifest fetch failed, retrying", {{"cluster", name},
                                                    {"manifest", id},
                                                    {"attempt", attempt},
                                                    {"retry_in_ms", static_cast<int64_t>(delay.count())},
                                                    {"error", last.describe()}});
      std::this_thread::sleep_for(delay);
      delay = std::min(delay * 2, options_.backoff_max);
    }
  }
  metrics_.counter("manifest_fetches_total", "Manifests fetched from the hub, by result", {{"result", "failed"}})
      .Increment();
  log::warn("cannot get a manifest from the hub; the deploy is retried later",
            {{"cluster", cluster()}, {"manifest", id}, {"error", last.describe()}});
  return fail(
      ErrorKind::kTransient,
      "cannot get manifest " + id + " from the hub after " + std::to_string(attempts) + " attempts: " + last.message,
      last.where);
}

}  // namespace flotilla::agent
