#include "flotilla/service/lease.h"

#include <algorithm>
#include <utility>

#include "flotilla/core/clock.h"
#include "flotilla/core/json.h"
#include "flotilla/core/log.h"
#include "flotilla/core/time.h"

namespace flotilla::service {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

constexpr std::string_view kErrorsHelp = "Lease reads and writes that failed (tried again next round), by op";
constexpr std::string_view kHeldHelp = "1 while this replica holds its service's lease (the active replica)";

//! A holder stops acting when it has not renewed for this much of the ttl; a standby waits for the whole ttl.
milliseconds holderMargin(milliseconds ttl) {
  return ttl * 2 / 3;
}

//! The lease's own labels (LeaseOptions::labels) with a metric's.
prometheus::Labels withLabels(prometheus::Labels base, const prometheus::Labels& more) {
  base.insert(more.begin(), more.end());
  return base;
}

struct LeaseValue {
  std::string holder;
  milliseconds ttl{0};
};

//! An unreadable value counts as held by an unknown replica with our own ttl: it is taken over once it stays put.
LeaseValue readLeaseValue(const std::string& text, milliseconds fallback_ttl) {
  auto parsed = Json::parse(text);
  if (!parsed.ok() || !parsed->isObject()) {
    return LeaseValue{.holder = "(unreadable)", .ttl = fallback_ttl};
  }
  const int64_t ttl_ms = parsed->getInt("ttlMs", fallback_ttl.count());
  return LeaseValue{.holder = parsed->getString("holder"), .ttl = milliseconds(std::max<int64_t>(ttl_ms, 1))};
}

}  // namespace

Lease::Lease(std::shared_ptr<bus::KeyValue> bucket, Metrics& metrics, LeaseOptions options)
    : bucket_(std::move(bucket)), metrics_(metrics), options_(std::move(options)) {
  metrics_.gauge("lease_held", kHeldHelp, options_.labels).Set(0);
}

Lease::~Lease() {
  stop();
}

void Lease::start(std::function<void()> on_acquired, std::function<void()> on_lost) {
  on_acquired_ = std::move(on_acquired);
  on_lost_ = std::move(on_lost);
  thread_.start([this] { loop(); });
}

void Lease::stop() {
  thread_.stop();
  if (acquired_thread_.joinable()) {
    acquired_thread_.join();
  }
}

void Lease::release() {
  stop();
  uint64_t revision = 0;
  {
    std::lock_guard lock(mutex_);
    if (!holding_) {
      return;
    }
    holding_ = false;
    revision = revision_;
  }
  metrics_.gauge("lease_held", kHeldHelp, options_.labels).Set(0);
  if (auto written = bucket_->update(options_.key, valueHeldBy(""), revision); !written.ok()) {
    log::warn("lease not released: a standby takes it over after the ttl",
              {{"key", options_.key}, {"holder", options_.holder}, {"error", written.error().describe()}});
    return;
  }
  log::info("lease released", {{"key", options_.key}, {"holder", options_.holder}});
}

bool Lease::held() const {
  std::lock_guard lock(mutex_);
  return holding_ && steady_clock::now() - renewed_at_ < holderMargin(options_.ttl);
}

std::string Lease::holder() const {
  std::lock_guard lock(mutex_);
  return seen_holder_;
}

std::string Lease::valueHeldBy(const std::string& holder) const {
  return Json::obj(
             {{"holder", holder}, {"ttlMs", options_.ttl.count()}, {"renewed", formatRfc3339(systemClock().now())}})
      .dump();
}

void Lease::loop() {
  const milliseconds period = std::max(milliseconds(10), options_.ttl / 3);
  bool acquired = false;
  while (true) {
    bool holding = false;
    {
      std::lock_guard lock(mutex_);
      holding = holding_;
    }
    const LeaseRound round = holding ? renew(steady_clock::now()) : tryAcquire(steady_clock::now());
    if (round == LeaseRound::kHeld && !acquired) {
      acquired = true;
      if (on_acquired_) {
        acquired_thread_ = std::thread(on_acquired_);
      }
    }
    if (round == LeaseRound::kLost) {
      if (on_lost_) {
        on_lost_();
      }
      return;
    }
    if (!thread_.sleepFor(period)) {
      return;
    }
  }
}

LeaseRound Lease::tryAcquire(steady_clock::time_point now) {
  auto found = bucket_->find(options_.key);
  if (!found.ok()) {
    metrics_.counter("lease_errors_total", kErrorsHelp, withLabels(options_.labels, {{"op", "read"}})).Increment();
    log::warn("lease not readable; trying again", {{"key", options_.key}, {"error", found.error().describe()}});
    return LeaseRound::kError;
  }
  if (!*found) {
    return takeOver(0, false, now, "free");
  }
  const bus::KvEntry& entry = **found;
  const LeaseValue current = readLeaseValue(entry.value, options_.ttl);
  if (current.holder.empty()) {
    return takeOver(entry.revision, true, now, "released");
  }
  if (current.holder == options_.holder) {
    return takeOver(entry.revision, true, now, "own");
  }
  {
    std::lock_guard lock(mutex_);
    if (entry.revision != seen_revision_ || current.holder != seen_holder_) {
      seen_revision_ = entry.revision;
      seen_holder_ = current.holder;
      seen_since_ = now;
      return LeaseRound::kWaiting;
    }
    if (now - seen_since_ < current.ttl) {
      return LeaseRound::kWaiting;
    }
  }
  log::warn("lease holder stopped renewing; taking over",
            {{"key", options_.key}, {"previous", current.holder}, {"holder", options_.holder}});
  return takeOver(entry.revision, true, now, "expired");
}

LeaseRound Lease::takeOver(uint64_t expected_revision, bool exists, steady_clock::time_point now, const char* how) {
  auto written = exists ? bucket_->update(options_.key, valueHeldBy(options_.holder), expected_revision)
                        : bucket_->create(options_.key, valueHeldBy(options_.holder));
  if (!written.ok()) {
    if (written.error().kind == ErrorKind::kConflict) {
      log::debug("lease taken by another replica first", {{"key", options_.key}, {"holder", options_.holder}});
      return LeaseRound::kWaiting;
    }
    metrics_.counter("lease_errors_total", kErrorsHelp, withLabels(options_.labels, {{"op", "acquire"}})).Increment();
    log::warn("lease not written; trying again", {{"key", options_.key}, {"error", written.error().describe()}});
    return LeaseRound::kError;
  }
  std::string previous;
  {
    std::lock_guard lock(mutex_);
    previous = seen_holder_;
    holding_ = true;
    revision_ = *written;
    renewed_at_ = now;
    seen_holder_ = options_.holder;
  }
  metrics_
      .counter("lease_acquired_total", "Leases this replica acquired, by how: free, released, own, expired",
               withLabels(options_.labels, {{"how", how}}))
      .Increment();
  metrics_.gauge("lease_held", kHeldHelp, options_.labels).Set(1);
  log::info("lease acquired",
            {{"key", options_.key}, {"holder", options_.holder}, {"how", how}, {"previous", previous}});
  return LeaseRound::kHeld;
}

LeaseRound Lease::renew(steady_clock::time_point now) {
  uint64_t revision = 0;
  steady_clock::time_point renewed_at;
  {
    std::lock_guard lock(mutex_);
    revision = revision_;
    renewed_at = renewed_at_;
  }
  auto written = bucket_->update(options_.key, valueHeldBy(options_.holder), revision);
  if (written.ok()) {
    std::lock_guard lock(mutex_);
    revision_ = *written;
    renewed_at_ = now;
    return LeaseRound::kHeld;
  }
  if (written.error().kind == ErrorKind::kConflict) {
    return lose("taken", written.error().describe());
  }
  metrics_.counter("lease_errors_total", kErrorsHelp, withLabels(options_.labels, {{"op", "renew"}})).Increment();
  if (now - renewed_at >= holderMargin(options_.ttl)) {
    return lose("unrenewed", written.error().describe());
  }
  log::warn("lease not renewed; trying again", {{"key", options_.key}, {"error", written.error().describe()}});
  return LeaseRound::kError;
}

LeaseRound Lease::lose(const char* reason, const std::string& detail) {
  {
    std::lock_guard lock(mutex_);
    holding_ = false;
  }
  metrics_
      .counter("lease_lost_total", "Leases this replica lost, by reason: taken, unrenewed",
               withLabels(options_.labels, {{"reason", reason}}))
      .Increment();
  metrics_.gauge("lease_held", kHeldHelp, options_.labels).Set(0);
  log::error("lease lost: this replica stops acting as the holder",
             {{"key", options_.key}, {"holder", options_.holder}, {"reason", reason}, {"error", detail}});
  return LeaseRound::kLost;
}

}  // namespace flotilla::service
