// Watch: a resumable pull-style watch on one collection.
#include <algorithm>

#include "client_internal.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/kube/client.h"

namespace flotilla::kube {

using Clock = std::chrono::steady_clock;
using detail::appendQuery;

Watch::Watch(KubeClient* client, std::string collection_path, std::string api_version, std::string kind,
             WatchOptions options)
    : client_(client),
      collection_path_(std::move(collection_path)),
      api_version_(std::move(api_version)),
      kind_(std::move(kind)),
      options_(std::move(options)),
      resource_version_(options_.resource_version) {}

Watch::~Watch() = default;

std::string Watch::target() const {
  std::string target = collection_path_;
  appendQuery(target, "watch", "true");
  if (!resource_version_.empty()) {
    appendQuery(target, "resourceVersion", resource_version_);
  }
  if (options_.bookmarks) {
    appendQuery(target, "allowWatchBookmarks", "true");
  }
  if (!options_.label_selector.empty()) {
    appendQuery(target, "labelSelector", options_.label_selector);
  }
  if (!options_.field_selector.empty()) {
    appendQuery(target, "fieldSelector", options_.field_selector);
  }
  appendQuery(target, "timeoutSeconds", std::to_string(options_.server_timeout.count()));
  return target;
}

Status Watch::open(Clock::time_point deadline) {
  std::string target_text = target();
  auto stream = client_->openStream(HttpRequest{.target = target_text, .headers = {{"Accept", "application/json"}}});
  FLOTILLA_TRY(stream);
  client_->metrics_
      ->counter("kube_requests_total", "requests to kube-apiserver by verb and HTTP status",
                {{"verb", "WATCH"}, {"code", std::to_string((*stream)->status())}})
      .Increment();
  if ((*stream)->status() != 200) {
    // An error answer is short; read it whole for its Status object.
    std::string body;
    while (!(*stream)->done() && Clock::now() < deadline) {
      auto piece = (*stream)->read(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
      FLOTILLA_TRY(piece);
      body += *piece;
    }
    return fail(apiError((*stream)->status(), body, "WATCH " + target_text));
  }
  if (opened_once_) {
    ++reconnects_;
    client_->metrics_->counter("kube_watch_reconnects_total", "watch requests re-established after they ended")
        .Increment();
  }
  opened_once_ = true;
  stream_ = std::move(*stream);
  buffer_.clear();
  return okStatus();
}

Status Watch::parseLines() {
  size_t start = 0;
  size_t newline = 0;
  while ((newline = buffer_.find('\n', start)) != std::string::npos) {
    std::string_view line(buffer_.data() + start, newline - start);
    start = newline + 1;
    if (trim(line).empty()) {
      continue;
    }
    auto event = Json::parse(line);
    if (!event.ok()) {
      buffer_.erase(0, start);
      stream_.reset();
      return fail(ErrorKind::kTransient, "unreadable watch event: " + event.error().message, "WATCH " + kind_);
    }
    std::string type = event->getString("type");
    Json object;
    if (Json* o = event->find("object"); o != nullptr) {
      object = std::move(*o);
    }
    if (type == "ERROR") {
      buffer_.erase(0, start);
      stream_.reset();
      return fail(statusError(object, "WATCH " + collection_path_));
    }
    auto event_type = detail::watchEventTypeFromName(type);
    if (!event_type) {
      log::warn("kube watch event of unknown type skipped", {{"type", type}, {"kind", kind_}});
      continue;
    }
    if (const Json* rv = object.at({"metadata", "resourceVersion"}); rv != nullptr && rv->isString()) {
      resource_version_ = rv->asString();
    }
    ready_.push_back(WatchEvent{*event_type, std::move(object)});
  }
  buffer_.erase(0, start);
  return okStatus();
}

Result<bool> Watch::readSome(Clock::time_point deadline) {
  if (!stream_) {
    // First use after an error, or the server ended the previous request: resume from the last version.
    FLOTILLA_TRY(open(std::max(deadline, Clock::now() + std::chrono::seconds(5))));
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) {
    return false;
  }
  auto piece = stream_->read(left);
  if (!piece.ok()) {
    stream_.reset();
    return fail(piece.error());
  }
  buffer_ += *piece;
  FLOTILLA_TRY(parseLines());
  if (stream_ && stream_->done()) {
    log::debug("kube watch ended by the server; resuming", {{"kind", kind_}, {"resourceVersion", resource_version_}});
    stream_.reset();
    return !ready_.empty() || Clock::now() < deadline;
  }
  return true;
}

Result<std::optional<WatchEvent>> Watch::next(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (ready_.empty()) {
    auto more = readSome(deadline);
    FLOTILLA_TRY(more);
    if (!*more) {
      return std::optional<WatchEvent>();
    }
  }
  std::optional<WatchEvent> event(std::move(ready_.front()));
  ready_.pop_front();
  return event;
}

}  // namespace flotilla::kube
