// flotilla/poller/poll_status.h
//
// The poller's record for one GitRepo in the `status` KV bucket (key "gitrepo.<ws>.<name>", docs/pipeline.md):
// what it last saw and published, and how polling goes. The poller is the only writer of these keys; the CLI
// and the scheduler read them. The record is also the poller's memory across restarts: `commit`,
// `forceSyncGeneration`, `specHash` say what was last published, so a new instance does not publish it again.
// It never holds a credential.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla::poller {

struct PollStatus {
  std::string workspace;
  std::string gitrepo;
  std::string repo;                   //!< the URL polled (redacted)
  std::string commit;                 //!< last commit published in a CommitEvent
  std::string polling_commit;         //!< last commit the remote advertised for the wanted ref
  std::string source_object;          //!< `sources` object of the last published commit
  bool changed = false;               //!< the last published event's `changed`
  int64_t force_sync_generation = 0;  //!< spec.forceSyncGeneration the last event was published for
  std::string spec_hash;              //!< sourceSpecHash the last event was published for
  int64_t observed_generation = 0;    //!< metadata.generation of the spec last seen
  std::string last_poll_time;         //!< RFC 3339: last ls-remote that answered
  std::string last_publish_time;      //!< RFC 3339: last CommitEvent published
  std::string last_error;             //!< "" when the last attempt succeeded
  std::string last_error_kind;        //!< ErrorKind name ("transient", "invalid", ...)
  std::string last_error_time;        //!< RFC 3339
  std::string next_poll_time;         //!< RFC 3339: the next timed poll or retry ("" when none is planned)
  int64_t failures = 0;               //!< consecutive failed attempts (drives the backoff)
  std::string webhook_commit;         //!< commit the last accepted webhook announced for the followed ref
  std::string last_webhook_time;      //!< RFC 3339: last accepted webhook that triggered a sync

  bool operator==(const PollStatus&) const = default;
};

//! The JSON record (lowerCamelCase keys: workspace, gitrepo, repo, commit, pollingCommit, sourceObject, changed,
//! forceSyncGeneration, specHash, observedGeneration, lastPollTime, lastPublishTime, lastError, lastErrorKind,
//! lastErrorTime, nextPollTime, failures, webhookCommit, lastWebhookTime).
Json encode(const PollStatus& status);
//! Lenient decode (missing fields keep their defaults, so older records still load); kInvalid if not a JSON
//! object.
Result<PollStatus> decodePollStatus(std::string_view json);

}  // namespace flotilla::poller
