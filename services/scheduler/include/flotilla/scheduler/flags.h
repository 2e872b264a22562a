// flotilla/scheduler/flags.h
//
// The scheduler's own command-line flags (besides the common ones of service::Config: --nats-url, --http-addr,
// --log-level, NATS credentials) and their translation into SchedulerOptions, kept out of main.cpp so they can
// be tested.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "flotilla/core/result.h"
#include "flotilla/scheduler/scheduler.h"
#include "flotilla/service/runtime.h"

namespace flotilla::scheduler {

//! How this process shares the work with other scheduler replicas (--lease-ttl, --replica-id).
struct ReplicaOptions {
  std::chrono::milliseconds lease_ttl{0};  //!< 0: no lease, the only replica
  std::string id;                          //!< the lease's holder id
  //! --partitions: 1 = one lease, the holder does all the work; more = the work split by GitRepo among the
  //! replicas (partition.h, partition_set.h).
  uint32_t partitions = 1;
};

//! Flag name -> help text, for service::Config::parse.
std::map<std::string, std::string> schedulerFlags();
//! SchedulerOptions from parsed flags; a malformed value is kInvalid naming the flag.
Result<SchedulerOptions> schedulerOptionsFrom(const service::Config& config);
//! ReplicaOptions from parsed flags: --lease-ttl a positive number of seconds; --replica-id only with it;
//! --partitions 1..256, above 1 only with --lease-ttl.
Result<ReplicaOptions> replicaOptionsFrom(const service::Config& config);

}  // namespace flotilla::scheduler
