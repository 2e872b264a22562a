// The partitions a scheduler replica holds (partition_set.h): membership, shares, leases, start and hand-over.
#include "flotilla/scheduler/partition_set.h"

#include <algorithm>

#include "flotilla/core/json.h"
#include "flotilla/core/log.h"

namespace flotilla::scheduler {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

//! A member key silent this many ttls is removed (replicas that went away for good: pods get new names).
constexpr int kStaleMemberTtls = 5;

}  // namespace

PartitionSet::PartitionSet(std::shared_ptr<bus::KeyValue> clusters, Metrics& metrics, PartitionSetOptions options,
                           Factory factory)
    : clusters_(std::move(clusters)), metrics_(metrics), options_(std::move(options)), factory_(std::move(factory)) {
  for (uint32_t index = 0; index < options_.partitions; ++index) {
    auto slot = std::make_unique<Slot>();
    const Partition partition{.index = index, .count = options_.partitions};
    slot->lease = std::make_unique<service::Lease>(clusters_, metrics_,
                                                   service::LeaseOptions{.key = partitionLeaseKey(index),
                                                                         .holder = options_.id,
                                                                         .ttl = options_.ttl,
                                                                         .labels = {{"partition", partition.name()}}});
    slots_.emplace(index, std::move(slot));
  }
}

PartitionSet::~PartitionSet() {
  stop();
}

void PartitionSet::start() {
  const milliseconds period = std::max(milliseconds(10), options_.ttl / 3);
  thread_.start([this, period] {
    do {
      round(steady_clock::now());
    } while (thread_.sleepFor(period));
  });
}

void PartitionSet::stop() {
  if (!halt(/*release=*/true, "stopping")) {
    return;
  }
  if (auto removed = clusters_->remove(replicaMemberKey(options_.id)); !removed.ok()) {
    log::warn("cannot remove this replica's member key; the others count it gone after the ttl",
              {{"replica", options_.id}, {"error", removed.error().describe()}});
  }
}

void PartitionSet::abandon() {
  halt(/*release=*/false, "abandoned");
}

bool PartitionSet::halt(bool release, const char* why) {
  if (stopped_.exchange(true)) {
    return false;
  }
  thread_.stop();
  for (auto& [index, slot] : slots_) {
    stopPartition(index, release, why);
  }
  return true;
}

void PartitionSet::round(steady_clock::time_point now) {
  if (stopped_) {
    return;
  }
  renewMembership();
  const std::vector<std::string> live = readMembers(now);
  const auto share = partitionsOfReplica(live, options_.id, options_.partitions);
  const std::set<uint32_t> wanted(share.begin(), share.end());
  for (uint32_t index = 0; index < options_.partitions; ++index) {
    Slot& slot = *slots_.at(index);
    if (slot.holding) {
      renew(index, now);
      if (slot.holding && (!wanted.contains(index) || slot.failed)) {
        // A replica joined (the partition is its share now), or this one could not start it: handed over.
        slot.holding = false;
        stopInBackground(index, /*release=*/true, slot.failed ? "failed to start" : "handed over");
      }
    } else if (wanted.contains(index)) {
      acquire(index, now);
    }
  }
  countHeld();
}

void PartitionSet::renewMembership() {
  Json value = Json::object();
  value["holder"] = options_.id;
  value["ttlMs"] = static_cast<int64_t>(options_.ttl.count());
  value["renewed"] = log::nowRfc3339();
  if (auto put = clusters_->put(replicaMemberKey(options_.id), value.dump()); !put.ok()) {
    metrics_
        .counter("partition_errors_total", "Partition membership reads and writes that failed (tried again)",
                 {{"op", "member-write"}})
        .Increment();
    log::warn("cannot renew this replica's membership; tried again next round",
              {{"replica", options_.id}, {"error", put.error().describe()}});
  }
}

std::vector<std::string> PartitionSet::readMembers(steady_clock::time_point now) {
  std::vector<std::string> live{options_.id};
  // One read of every member key with its value and revision (a watch's initial values).
  auto watcher = clusters_->watch(kReplicaMemberFilter, {.ignore_deletes = true});
  auto entries =
      watcher.ok() ? watcher->initialValues(options_.ttl) : Result<std::vector<bus::KvEntry>>(fail(watcher.error()));
  if (watcher.ok()) {
    watcher->stop();
  }
  if (!entries.ok()) {
    metrics_
        .counter("partition_errors_total", "Partition membership reads and writes that failed (tried again)",
                 {{"op", "member-read"}})
        .Increment();
    log::warn("cannot read the replicas' member keys; keeping the last view", {{"error", entries.error().describe()}});
    std::lock_guard lock(mutex_);
    return live_.empty() ? live : live_;
  }
  const std::string own_key = replicaMemberKey(options_.id);
  std::map<std::string, Member> seen;
  for (const auto& entry : *entries) {
    const std::string& key = entry.key;
    if (key == own_key || entry.operation != bus::KvOperation::kPut) {
      continue;
    }
    Member member{.revision = entry.revision, .since = now};
    if (auto known = members_.find(key); known != members_.end() && known->second.revision == member.revision) {
      member.since = known->second.since;  // not renewed since
    }
    if (now - member.since > kStaleMemberTtls * options_.ttl) {
      (void)clusters_->remove(key);  // gone for good; best effort (another replica may remove it first)
      continue;
    }
    seen[key] = member;
    if (now - member.since < options_.ttl) {
      auto parsed = Json::parse(entry.value);
      const std::string holder = parsed.ok() && parsed->isObject() ? parsed->getString("holder") : std::string();
      if (!holder.empty()) {
        live.push_back(holder);
      }
    }
  }
  members_ = std::move(seen);
  std::sort(live.begin(), live.end());
  live.erase(std::unique(live.begin(), live.end()), live.end());
  std::lock_guard lock(mutex_);
  if (live != live_) {
    log::info("scheduler replicas changed", {{"replica", options_.id},
                                             {"live", static_cast<int64_t>(live.size())},
                                             {"was", static_cast<int64_t>(live_.size())}});
  }
  live_ = live;
  return live;
}

void PartitionSet::acquire(uint32_t index, steady_clock::time_point now) {
  Slot& slot = *slots_.at(index);
  if (slot.starter.joinable()) {
    slot.starter.join();  // the last start or stop of this slot is over (it is not holding)
  }
  if (slot.lease->tryAcquire(now) != service::LeaseRound::kHeld) {
    return;
  }
  slot.holding = true;
  slot.failed = false;
  const Partition partition{.index = index, .count = options_.partitions};
  log::info("scheduler partition held: starting it", {{"partition", partition.name()}, {"replica", options_.id}});
  // Started on its own thread: loading a partition's records must not hold up the other leases' renewals.
  slot.starter = std::thread([this, &slot, partition] {
    auto* lease = slot.lease.get();
    auto made = factory_(partition, [lease] { return lease->held(); });
    Status started = made.ok() ? (*made)->start() : Status(fail(made.error()));
    if (!started.ok()) {
      metrics_.counter("partition_starts_total", "Partitions this replica started, by result", {{"result", "failed"}})
          .Increment();
      log::error("cannot start a scheduler partition; handing it over",
                 {{"partition", partition.name()}, {"error", started.error().describe()}});
      if (made.ok()) {
        (*made)->stop();
      }
      slot.failed = true;
      return;
    }
    metrics_.counter("partition_starts_total", "Partitions this replica started, by result", {{"result", "started"}})
        .Increment();
    std::lock_guard lock(mutex_);
    slot.component = std::move(made).value();
  });
}

void PartitionSet::renew(uint32_t index, steady_clock::time_point now) {
  Slot& slot = *slots_.at(index);
  if (slot.lease->renew(now) != service::LeaseRound::kLost) {
    return;
  }
  // Taken, or not renewed in time: its DeployEvents are already fenced (held() is false); the component goes.
  slot.holding = false;
  stopInBackground(index, /*release=*/false, "lease lost");
}

void PartitionSet::stopPartition(uint32_t index, bool release, const char* why) {
  Slot& slot = *slots_.at(index);
  if (slot.starter.joinable()) {
    slot.starter.join();
  }
  stopComponent(index, release, why);
  slot.holding = false;
}

void PartitionSet::stopInBackground(uint32_t index, bool release, const char* why) {
  Slot& slot = *slots_.at(index);
  // After the slot's last start or stop; the rounds go on renewing the other leases meanwhile (a partition's stop
  // waits for the message in hand, and must not cost this replica its other partitions).
  slot.starter = std::thread([this, index, release, why, previous = std::move(slot.starter)]() mutable {
    if (previous.joinable()) {
      previous.join();
    }
    stopComponent(index, release, why);
  });
}

void PartitionSet::stopComponent(uint32_t index, bool release, const char* why) {
  Slot& slot = *slots_.at(index);
  std::shared_ptr<service::Component> component;
  {
    std::lock_guard lock(mutex_);
    component = std::move(slot.component);
  }
  if (component) {
    component->stop();
    const Partition partition{.index = index, .count = options_.partitions};
    metrics_.counter("partition_stops_total", "Partitions this replica stopped, by why", {{"why", why}}).Increment();
    log::info("scheduler partition stopped", {{"partition", partition.name()}, {"replica", options_.id}, {"why", why}});
  }
  if (release) {
    slot.lease->release();
  }
}

void PartitionSet::countHeld() {
  metrics_.gauge("partitions_held", "Scheduler partitions this replica holds and runs")
      .Set(static_cast<double>(held().size()));
}

std::vector<uint32_t> PartitionSet::held() const {
  std::lock_guard lock(mutex_);
  std::vector<uint32_t> out;
  for (const auto& [index, slot] : slots_) {
    if (slot->component) {
      out.push_back(index);
    }
  }
  return out;
}

std::vector<std::string> PartitionSet::live() const {
  std::lock_guard lock(mutex_);
  return live_;
}

bool PartitionSet::ready(std::string& why) const {
  std::lock_guard lock(mutex_);
  for (const auto& [index, slot] : slots_) {
    if (slot->component && !slot->component->ready(why)) {
      why.insert(0, "partition p" + std::to_string(index) + ": ");
      return false;
    }
  }
  return true;
}

}  // namespace flotilla::scheduler
