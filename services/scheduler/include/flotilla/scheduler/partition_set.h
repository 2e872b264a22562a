// flotilla/scheduler/partition_set.h
//
// The partitions one scheduler replica holds (--partitions N with --lease-ttl; partition.h). Every ttl/3 a round:
//
//   membership  the replica writes its key clusters/member.scheduler.<id>; a replica is live while its key's
//               revision moves (by this replica's own clock, no clocks compared, as service::Lease does)
//   share       partitionsOfReplica(live replicas, id): partition p goes to the live replica of rank p mod |live|
//   leases      a partition in the share and not held: its lease (lease.scheduler.p<i>) is tried — taken when free,
//               released, this id's, or not renewed for its holder's ttl; held ones are renewed
//   hand-over   a held partition no longer in the share (a replica joined) is stopped, then its lease released, so
//               its new holder takes it at its next round; a lease found taken or not renewed in time stops its
//               partition at once (its DeployEvents are fenced before: may_publish is the lease's held()); both on
//               the partition's own thread, so a slow stop never holds up the other leases' renewals
//
// A partition runs as its own component (a Scheduler made by the factory: its own durables, its records loaded from
// KV when it starts), so taking one over is a start like any other: nothing a killed replica handled is lost (its
// unacknowledged messages are redelivered to the partition's durables) and nothing it published is sent twice (the
// records and their generations, the same Msg-Ids). A killed replica's partitions resume within about two ttls:
// one for its membership to lapse, one for the lease.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/bus/kv.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/scheduler/partition.h"
#include "flotilla/service/background_thread.h"
#include "flotilla/service/component.h"
#include "flotilla/service/lease.h"

namespace flotilla::scheduler {

struct PartitionSetOptions {
  std::string id;                        //!< this replica (--replica-id), unique among the replicas
  std::chrono::milliseconds ttl{10000};  //!< --lease-ttl: membership and partition leases
  uint32_t partitions = 2;               //!< --partitions
};

class PartitionSet {
 public:
  //! Makes the component of one partition; `may_publish` is its lease's held() (SchedulerOptions::may_publish).
  using Factory = std::function<Result<std::shared_ptr<service::Component>>(Partition partition,
                                                                            std::function<bool()> may_publish)>;

  //! `clusters` holds the member keys and the leases.
  PartitionSet(std::shared_ptr<bus::KeyValue> clusters, Metrics& metrics, PartitionSetOptions options, Factory factory);
  //! stop().
  ~PartitionSet();
  PartitionSet(const PartitionSet&) = delete;
  PartitionSet& operator=(const PartitionSet&) = delete;
  PartitionSet(PartitionSet&&) = delete;
  PartitionSet& operator=(PartitionSet&&) = delete;

  //! Runs the rounds on a background thread.
  void start();
  //! Stops the rounds and every partition, releases their leases and removes the member key (the others take the
  //! partitions at their next round). Idempotent.
  void stop();
  //! Stops the rounds and the partitions without releasing anything: what a killed replica leaves (tests).
  void abandon();

  //! One round (the loop calls it; tests may too).
  void round(std::chrono::steady_clock::time_point now);

  //! The partitions this replica holds and runs now, ascending.
  [[nodiscard]] std::vector<uint32_t> held() const;
  //! The replicas seen live at the last round (this one included), sorted.
  [[nodiscard]] std::vector<std::string> live() const;
  //! Every running partition is ready (why names the first that is not).
  bool ready(std::string& why) const;

 private:
  struct Slot {
    std::unique_ptr<service::Lease> lease;
    bool holding = false;
    std::shared_ptr<service::Component> component;  //!< set by the starter once started
    std::thread starter;  //!< makes and starts the component (a start loads KV), or stops it (stopInBackground)
    std::atomic<bool> failed{false};  //!< the starter could not make or start it
  };
  struct Member {
    uint64_t revision = 0;
    std::chrono::steady_clock::time_point since;  //!< when this replica first saw that revision
  };

  //! Ends the rounds and stops every partition (`release`: their leases too); false when already halted.
  bool halt(bool release, const char* why);
  void renewMembership();
  //! Reads the member keys: who renewed within the ttl (stale keys, silent for many ttls, are removed).
  std::vector<std::string> readMembers(std::chrono::steady_clock::time_point now);
  void acquire(uint32_t index, std::chrono::steady_clock::time_point now);
  void renew(uint32_t index, std::chrono::steady_clock::time_point now);
  //! Stops the partition's component (after its starter); `release` gives its lease up too. Waits.
  void stopPartition(uint32_t index, bool release, const char* why);
  //! The same on the slot's thread, after its last start or stop: what the rounds use.
  void stopInBackground(uint32_t index, bool release, const char* why);
  void stopComponent(uint32_t index, bool release, const char* why);
  void countHeld();

  std::shared_ptr<bus::KeyValue> clusters_;
  Metrics& metrics_;
  PartitionSetOptions options_;
  Factory factory_;
  service::BackgroundThread thread_;
  std::atomic<bool> stopped_{false};

  mutable std::mutex mutex_;  //!< guards slots_' components and the two below (rounds run on one thread)
  std::map<uint32_t, std::unique_ptr<Slot>> slots_;
  std::map<std::string, Member> members_;  //!< by member key
  std::vector<std::string> live_;
};

}  // namespace flotilla::scheduler
