#include "flotilla/poller/poll_status.h"

namespace flotilla::poller {

Json encode(const PollStatus& s) {
  return Json::obj({
      {"workspace", s.workspace},
      {"gitrepo", s.gitrepo},
      {"repo", s.repo},
      {"commit", s.commit},
      {"pollingCommit", s.polling_commit},
      {"sourceObject", s.source_object},
      {"changed", s.changed},
      {"forceSyncGeneration", s.force_sync_generation},
      {"specHash", s.spec_hash},
      {"observedGeneration", s.observed_generation},
      {"lastPollTime", s.last_poll_time},
      {"lastPublishTime", s.last_publish_time},
      {"lastError", s.last_error},
      {"lastErrorKind", s.last_error_kind},
      {"lastErrorTime", s.last_error_time},
      {"nextPollTime", s.next_poll_time},
      {"failures", s.failures},
      {"webhookCommit", s.webhook_commit},
      {"lastWebhookTime", s.last_webhook_time},
  });
}

Result<PollStatus> decodePollStatus(std::string_view json) {
  auto parsed = Json::parse(json);
  if (!parsed.ok()) {
    return fail(parsed.error());
  }
  if (!parsed->isObject()) {
    return fail(ErrorKind::kInvalid, "poll status is not a JSON object", "decodePollStatus");
  }
  const Json& j = *parsed;
  PollStatus s;
  s.workspace = j.getString("workspace");
  s.gitrepo = j.getString("gitrepo");
  s.repo = j.getString("repo");
  s.commit = j.getString("commit");
  s.polling_commit = j.getString("pollingCommit");
  s.source_object = j.getString("sourceObject");
  s.changed = j.getBool("changed");
  s.force_sync_generation = j.getInt("forceSyncGeneration");
  s.spec_hash = j.getString("specHash");
  s.observed_generation = j.getInt("observedGeneration");
  s.last_poll_time = j.getString("lastPollTime");
  s.last_publish_time = j.getString("lastPublishTime");
  s.last_error = j.getString("lastError");
  s.last_error_kind = j.getString("lastErrorKind");
  s.last_error_time = j.getString("lastErrorTime");
  s.next_poll_time = j.getString("nextPollTime");
  s.failures = j.getInt("failures");
  s.webhook_commit = j.getString("webhookCommit");
  s.last_webhook_time = j.getString("lastWebhookTime");
  return s;
}

}  // namespace flotilla::poller
