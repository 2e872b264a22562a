// The webhook receiver (its own HTTP listener, the server's threads): a push is checked against the secrets of
// the GitRepos on the pushed repository and makes those that follow the pushed ref due at once. Each request
// goes through the steps of WebhookCall::run().
#include <algorithm>
#include <map>
#include <set>

#include "flotilla/core/log.h"
#include "flotilla/poller/credentials_store.h"
#include "flotilla/poller/webhook.h"
#include "poller_core.h"

namespace flotilla::poller {
namespace {

//! A GitRepo on the pushed repository, whatever its ref: its secret decides whether the request is genuine for
//! it; its ref decides whether it polls.
struct Candidate {
  std::string key;
  std::string display;
  std::string secret_name;
  bool wants_ref = false;
  std::string commit;
};

//! Whether the request is genuine for one webhook secret, and if not, why.
struct Verdict {
  bool ok = false;
  std::string why;
};

//! One webhook request on its way through the steps: identify, find candidates, verify, trigger, answer.
class WebhookCall {
 public:
  WebhookCall(Poller::Core& core, const http::Request& request) : core_(core), request_(request) {}

  http::Response run() {
    if (auto refused = readPush()) {
      return *refused;
    }
    findCandidates();
    if (candidates_.empty()) {
      return answerNoGitRepo();
    }
    std::vector<std::pair<std::string, std::string>> to_trigger;
    std::string first_failure;
    if (!verifyCandidates(to_trigger, first_failure)) {
      return reject(first_failure);
    }
    return answerTriggered(core_.triggerFromWebhook(to_trigger));
  }

 private:
  //! Which provider sent it and what its payload says; a response when the request is not usable.
  std::optional<http::Response> readPush() {
    const auto provider = detectProvider(request_);
    if (!provider) {
      core_.metrics.webhook("unknown", "bad_request");
      log::warn("webhook rejected: unknown provider (no recognised event or signature header)",
                {{"remote", request_.remote_address}});
      return http::Response::text(400, "unknown webhook provider: no recognised event or signature header\n");
    }
    provider_ = *provider;
    provider_name_ = std::string(providerName(provider_));
    auto push = parsePush(provider_, request_);
    if (!push.ok()) {
      core_.metrics.webhook(provider_name_, "bad_request");
      log::warn("webhook rejected: unreadable payload",
                {{"provider", provider_name_}, {"remote", request_.remote_address}, {"error", push.error().message}});
      return http::Response::text(400, push.error().message + "\n");
    }
    push_ = std::move(push).value();
    return std::nullopt;
  }

  void findCandidates() {
    std::set<std::string> pushed_keys;
    for (const auto& url : push_.repo_urls) {
      if (auto key = webhookRepoKey(url); !key.empty()) {
        pushed_keys.insert(std::move(key));
      }
    }
    std::lock_guard lock(core_.mutex);
    for (const auto& [key, entry] : core_.entries) {
      if (!entry.gitrepo || !pushed_keys.contains(webhookRepoKey(entry.gitrepo->spec.repo))) {
        continue;
      }
      const auto& spec = entry.gitrepo->spec;
      candidates_.push_back(Candidate{key, displayName(entry.id),
                                      spec.webhook_secret.empty() ? core_.options.webhook_secret : spec.webhook_secret,
                                      pushMatches(spec, push_), pushedCommitFor(spec, push_)});
    }
  }

  //! The verdict for one secret name, checked once per request.
  const Verdict& verify(const std::string& secret_name) {
    auto it = verdicts_.find(secret_name);
    if (it != verdicts_.end()) {
      return it->second;
    }
    Verdict verdict;
    if (secret_name.empty()) {
      verdict.why = "no webhook secret: set spec.webhookSecret or the poller's --webhook-secret";
    } else if (auto secret = loadWebhookSecret(core_.options.credentials_dir, secret_name); !secret.ok()) {
      verdict.why = "webhook secret: " + secret.error().message;
      core_.metrics.error("webhook", secret.error().kind);
    } else {
      verdict.ok = verifyWebhook(provider_, request_, *secret, verdict.why);
    }
    return verdicts_.emplace(secret_name, std::move(verdict)).first->second;
  }

  //! Collects the verified candidates that follow the pushed ref; false when none was verified.
  bool verifyCandidates(std::vector<std::pair<std::string, std::string>>& to_trigger, std::string& first_failure) {
    bool any_verified = false;
    for (const auto& candidate : candidates_) {
      const Verdict& verdict = verify(candidate.secret_name);
      if (!verdict.ok) {
        if (first_failure.empty()) {
          first_failure = verdict.why;
        }
        log::warn("webhook not verified for a GitRepo", {{"provider", provider_name_},
                                                         {"gitrepo", candidate.display},
                                                         {"webhook_secret", candidate.secret_name},
                                                         {"reason", verdict.why}});
        continue;
      }
      any_verified = true;
      if (candidate.wants_ref) {
        to_trigger.emplace_back(candidate.key, candidate.commit);
      }
    }
    return any_verified;
  }

  http::Response reject(const std::string& why) {
    core_.metrics.webhook(provider_name_, "unauthorized");
    log::warn("webhook rejected: bad signature or token",
              {{"provider", provider_name_}, {"remote", request_.remote_address}, {"reason", why}});
    return http::Response::text(401, "webhook rejected: " + why + "\n");
  }

  //! No GitRepo uses the repository: still checked against the poller-wide secret when there is one.
  http::Response answerNoGitRepo() {
    if (!core_.options.webhook_secret.empty()) {
      const Verdict& verdict = verify(core_.options.webhook_secret);
      if (!verdict.ok) {
        return reject(verdict.why);
      }
    }
    core_.metrics.webhook(provider_name_, "ignored");
    log::info("webhook ignored: no GitRepo uses the repository",
              {{"provider", provider_name_}, {"event", push_.event}, {"remote", request_.remote_address}});
    return http::Response::text(200, "no GitRepo uses this repository\n");
  }

  http::Response answerTriggered(const std::vector<std::string>& triggered) {
    if (triggered.empty()) {
      core_.metrics.webhook(provider_name_, "ignored");
      log::info("webhook verified; no GitRepo follows the pushed refs",
                {{"provider", provider_name_}, {"event", push_.event}});
      return http::Response::text(200, "no GitRepo follows the pushed refs\n");
    }
    core_.metrics.webhook(provider_name_, "accepted");
    Json names = Json::array();
    for (const auto& name : triggered) {
      names.push(name);
    }
    log::info(
        "webhook accepted; polling",
        {{"provider", provider_name_}, {"event", push_.event}, {"gitrepos", static_cast<int64_t>(triggered.size())}});
    return http::Response::json(202, Json::obj({{"triggered", names}}).dump() + "\n");
  }

  Poller::Core& core_;
  const http::Request& request_;
  WebhookProvider provider_ = WebhookProvider::kGeneric;
  std::string provider_name_;
  PushEvent push_;
  std::vector<Candidate> candidates_;
  std::map<std::string, Verdict> verdicts_;  //!< by secret name
};

}  // namespace

//! Makes GitRepos due `webhook_coalesce` from now (or right after their running sync) and records the pushed
//! commit. Returns the display names of those triggered.
std::vector<std::string> Poller::Core::triggerFromWebhook(
    const std::vector<std::pair<std::string, std::string>>& key_commits) {
  std::vector<std::string> triggered;
  std::lock_guard lock(mutex);
  const int64_t now = nowEpochMillis();
  for (const auto& [key, commit] : key_commits) {
    auto it = entries.find(key);
    if (it == entries.end() || !it->second.gitrepo) {
      continue;
    }
    RepoEntry& e = it->second;
    if (!commit.empty()) {
      e.status.webhook_commit = commit;
    }
    e.status.last_webhook_time = formatEpochMillis(now);
    if (e.running_job != 0) {
      e.webhook_pending = true;
    } else {
      e.due_ms = std::min(e.due_ms, now + options.webhook_coalesce.count());
      e.webhook_due = true;
      e.status.next_poll_time = timeOrEmpty(e.due_ms);
    }
    enqueueStatus(e);
    triggered.push_back(displayName(e.id));
  }
  wake.notify_all();
  return triggered;
}

http::Response Poller::Core::handleWebhook(const http::Request& request) {
  return WebhookCall(*this, request).run();
}

Status Poller::Core::startWebhookServer() {
  http::ServerOptions server_options;
  server_options.address = options.webhook_address;
  server_options.port = options.webhook_port;
  server_options.max_body_bytes = options.webhook_max_body;
  server_options.on_body_too_large = [this](const http::Request& request) {
    const auto provider = detectProvider(request);
    const std::string name = provider ? std::string(providerName(*provider)) : "unknown";
    metrics.webhook(name, "too_large");
    log::warn("webhook rejected: payload too large",
              {{"provider", name}, {"remote", request.remote_address}, {"limit", options.webhook_max_body}});
  };
  std::map<std::string, http::Handler> routes;
  for (const char* path : {"/", "/webhook"}) {
    routes[http::routeKey("POST", path)] = [this](const http::Request& request) { return handleWebhook(request); };
  }
  auto server = http::Server::start(server_options, std::move(routes));
  if (!server.ok()) {
    return fail(server.error());
  }
  webhook_server = std::move(server).value();
  log::info("webhook receiver listening",
            {{"address", options.webhook_address}, {"port", static_cast<int64_t>(webhook_server->port())}});
  return {};
}

}  // namespace flotilla::poller
