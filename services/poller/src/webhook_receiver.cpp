// The webhook receiver (its own HTTP listener, the server's threads): a push is checked against the webhook
// secrets in use BEFORE its body is parsed, then makes the GitRepos on the pushed repository whose own secret
// verified it and that follow the pushed ref due at once. Each request goes through the steps of WebhookCall::run().
// Replies never name a GitRepo, a secret or a workspace, and a verified push gets the same reply whether or not a
// GitRepo uses its repository, so the endpoint tells an outsider nothing about the configuration.
#include <algorithm>
#include <map>
#include <set>

#include "flotilla/core/log.h"
#include "flotilla/poller/credentials_store.h"
#include "flotilla/poller/webhook.h"
#include "poller_core.h"

namespace flotilla::poller {
namespace {

//! The one reply of a verified request (pushes, pings, unknown repositories alike) and of a refused one.
constexpr const char* kAccepted = "accepted\n";
constexpr const char* kRejected = "webhook rejected: signature, token or credentials not valid\n";

//! A webhook secret as GitRepos name it: "<workspace>/<name>" (the poller-wide one included).
std::string secretKey(const std::string& workspace, const std::string& name) {
  return workspace + "/" + name;
}

//! A GitRepo on the pushed repository, whatever its ref: its secret decides whether the request is genuine for
//! it; its ref decides whether it polls.
struct Candidate {
  std::string key;
  std::string display;
  std::string secret_key;  //!< "" = none configured
  bool wants_ref = false;
  std::string commit;
};

//! One webhook request on its way through the steps: identify, verify, parse, find candidates, trigger, answer.
class WebhookCall {
 public:
  WebhookCall(Poller::Core& core, const http::Request& request) : core_(core), request_(request) {}

  http::Response run() {
    const auto provider = detectProvider(request_);
    if (!provider) {
      core_.metrics.webhook("unknown", "bad_request");
      log::warn("webhook rejected: unknown provider (no recognised event or signature header)",
                {{"remote", request_.remote_address}});
      return http::Response::text(400, "unknown webhook provider: no recognised event or signature header\n");
    }
    provider_ = *provider;
    provider_name_ = std::string(providerName(provider_));
    // The signature first: an unverified body is never parsed.
    if (!verifyAgainstSecretsInUse()) {
      return reject();
    }
    auto push = parsePush(provider_, request_);
    if (!push.ok()) {
      core_.metrics.webhook(provider_name_, "bad_request");
      log::warn("webhook rejected: unreadable payload",
                {{"provider", provider_name_}, {"remote", request_.remote_address}, {"error", push.error().message}});
      return http::Response::text(400, push.error().message + "\n");
    }
    push_ = std::move(push).value();
    findCandidates();
    return answer(core_.triggerFromWebhook(verifiedCandidates()));
  }

 private:
  //! Every distinct secret a GitRepo names (its workspace's spec.webhookSecret, or --webhook-secret), by key.
  std::map<std::string, ScopedSecretName> secretsInUse() {
    std::map<std::string, ScopedSecretName> in_use;
    const auto poller_wide = splitWebhookSecretName(core_.options.webhook_secret);
    if (poller_wide) {
      in_use.emplace(secretKey(poller_wide->workspace, poller_wide->name), *poller_wide);
    }
    std::lock_guard lock(core_.mutex);
    for (const auto& [key, entry] : core_.entries) {
      if (entry.gitrepo && !entry.gitrepo->spec.webhook_secret.empty()) {
        ScopedSecretName scoped{entry.gitrepo->metadata.ns, entry.gitrepo->spec.webhook_secret};
        in_use.emplace(secretKey(scoped.workspace, scoped.name), std::move(scoped));
      }
    }
    return in_use;
  }

  //! Checks the request against each secret in use (one HMAC of the capped body per secret); true when one
  //! verified it. Unreadable secrets are logged and counted, never named in the reply.
  bool verifyAgainstSecretsInUse() {
    for (const auto& [key, scoped] : secretsInUse()) {
      auto secret = loadWebhookSecret(core_.options.credentials_dir, scoped.workspace, scoped.name);
      if (!secret.ok()) {
        core_.metrics.error("webhook", secret.error().kind);
        log::warn("webhook secret unusable", {{"webhook_secret", key}, {"error", secret.error().message}});
        continue;
      }
      std::string why;
      if (verifyWebhook(provider_, request_, *secret, why)) {
        verified_.insert(key);
      } else if (first_failure_.empty()) {
        first_failure_ = why;
      }
    }
    return !verified_.empty();
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
      std::string secret_key;
      if (!spec.webhook_secret.empty()) {
        secret_key = secretKey(entry.gitrepo->metadata.ns, spec.webhook_secret);
      } else if (auto poller_wide = splitWebhookSecretName(core_.options.webhook_secret)) {
        secret_key = secretKey(poller_wide->workspace, poller_wide->name);
      }
      candidates_.push_back(
          Candidate{key, displayName(entry.id), secret_key, pushMatches(spec, push_), pushedCommitFor(spec, push_)});
    }
  }

  //! The candidates whose own secret verified the request and that follow the pushed ref. A push signed with
  //! one workspace's secret never triggers a GitRepo of another.
  std::vector<std::pair<std::string, std::string>> verifiedCandidates() {
    std::vector<std::pair<std::string, std::string>> to_trigger;
    for (const auto& candidate : candidates_) {
      if (!verified_.contains(candidate.secret_key)) {
        core_.metrics.webhook(provider_name_, "not_verified_for_gitrepo");
        log::warn("webhook not verified for a GitRepo on the pushed repository",
                  {{"provider", provider_name_},
                   {"gitrepo", candidate.display},
                   {"webhook_secret", candidate.secret_key.empty() ? "(none configured)" : candidate.secret_key}});
        continue;
      }
      if (candidate.wants_ref) {
        to_trigger.emplace_back(candidate.key, candidate.commit);
      }
    }
    return to_trigger;
  }

  http::Response reject() {
    core_.metrics.webhook(provider_name_, "unauthorized");
    log::warn("webhook rejected: bad signature or token",
              {{"provider", provider_name_},
               {"remote", request_.remote_address},
               {"reason", first_failure_.empty() ? "no usable webhook secret is configured" : first_failure_}});
    return http::Response::text(401, kRejected);
  }

  http::Response answer(const std::vector<std::string>& triggered) {
    if (triggered.empty()) {
      core_.metrics.webhook(provider_name_, "ignored");
      log::info("webhook verified; no GitRepo follows the pushed repository and refs",
                {{"provider", provider_name_}, {"event", push_.event}, {"remote", request_.remote_address}});
    } else {
      core_.metrics.webhook(provider_name_, "accepted");
      log::info(
          "webhook accepted; polling",
          {{"provider", provider_name_}, {"event", push_.event}, {"gitrepos", static_cast<int64_t>(triggered.size())}});
    }
    return http::Response::text(202, kAccepted);
  }

  Poller::Core& core_;
  const http::Request& request_;
  WebhookProvider provider_ = WebhookProvider::kGeneric;
  std::string provider_name_;
  PushEvent push_;
  std::vector<Candidate> candidates_;
  std::set<std::string> verified_;  //!< secret keys that verified the request
  std::string first_failure_;
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
    if (e.webhook_received_ms == 0) {
      e.webhook_received_ms = now;  // the push the next sync answers, for its stage latency
    }
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
  server_options.max_connections = options.webhook_max_connections;
  server_options.rate_per_second = options.webhook_rate;
  server_options.rate_burst = options.webhook_burst;
  server_options.on_refused = [this](const std::string& remote, int status) {
    metrics.webhook("unknown", status == 503 ? "too_many_connections" : "rate_limited");
    log::warn(status == 503 ? "webhook refused: too many connections" : "webhook refused: source over its rate",
              {{"remote", remote},
               {"max_connections", static_cast<int64_t>(options.webhook_max_connections)},
               {"rate_per_second", options.webhook_rate}});
  };
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
