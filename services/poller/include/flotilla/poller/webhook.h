// flotilla/poller/webhook.h
//
// Git host push webhooks, as pure functions: which provider sent a request (by its headers), whether its
// signature or token is right for a webhook secret, what the payload says (repository URLs in every form the
// provider sends — clone https, ssh, html — and the refs that moved), and which GitRepo specs a push concerns.
// The poller's HTTP receiver (webhook_receiver.cpp) wires these to the scheduler. Signatures are compared in constant
// time; no secret value ever appears in a returned message.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/http/server.h"
#include "flotilla/model/resources.h"

namespace flotilla::poller {

enum class WebhookProvider {
  kGitHub,
  kGitLab,
  kGitea,
  kGogs,
  kBitbucketCloud,
  kBitbucketServer,
  kAzureDevOps,
  kGeneric
};

//! "github", "gitlab", "gitea", "gogs", "bitbucket", "bitbucket-server", "azure-devops", "generic": the metric
//! label and the key of the provider's value in a webhook secret.
std::string_view providerName(WebhookProvider provider);

//! The provider, from the request headers (first match wins; Gitea also sends X-Gogs-Event and X-GitHub-Event):
//!   X-Flotilla-Signature -> generic; X-Gitea-Event -> gitea; X-Gogs-Event -> gogs; X-GitHub-Event -> github;
//!   X-Gitlab-Event or X-Gitlab-Token -> gitlab; X-Event-Key with X-Hook-UUID or "repo:push" -> bitbucket
//!   (Cloud), other X-Event-Key -> bitbucket-server; any X-Vss-ActivityId header -> azure-devops.
//! nullopt when none matches.
std::optional<WebhookProvider> detectProvider(const http::Request& request);

//! The values of one webhook secret (credentials store; see webhookSecretKeys).
using WebhookSecret = std::map<std::string, std::string>;

//! Keys a webhook secret may hold: one per provider (providerName), "token" (used by every provider that has
//! no key of its own), and "azure-username"/"azure-password" (Azure DevOps basic auth).
inline constexpr std::string_view kWebhookSecretKeys[] = {"github",         "gitlab",           "gitea",   "gogs",
                                                          "bitbucket",      "bitbucket-server", "generic", "token",
                                                          "azure-username", "azure-password"};

//! Checks the request's signature or token against `secret`:
//!   github: X-Hub-Signature-256 = "sha256=" + hex HMAC-SHA256(body);  gitlab: X-Gitlab-Token = the secret;
//!   gitea: X-Gitea-Signature = hex HMAC-SHA256 (X-Hub-Signature-256 accepted too); gogs: X-Gogs-Signature = hex
//!   HMAC-SHA256; bitbucket and bitbucket-server: X-Hub-Signature = "sha256=" + hex HMAC-SHA256;
//!   azure-devops: Authorization: Basic with azure-username/azure-password; generic: X-Flotilla-Signature =
//!   "sha256=" + hex HMAC-SHA256.
//! On failure `why` says what was wrong (missing header, mismatch, no key for this provider) without any value.
bool verifyWebhook(WebhookProvider provider, const http::Request& request, const WebhookSecret& secret,
                   std::string& why);

//! One ref a push moved. `commit` is the new tip ("" for a deletion or when the payload does not say).
struct PushRef {
  std::string ref;  //!< "refs/heads/main", "refs/tags/v1"
  std::string commit;
};

//! What a webhook payload says.
struct PushEvent {
  std::string event;     //!< the provider's event name ("push", "Push Hook", "repo:push", "git.push", ...)
  bool is_push = false;  //!< false for pings and other events: acknowledged, nothing is synced
  std::vector<std::string> repo_urls;  //!< every URL form of the repository in the payload
  std::vector<PushRef> refs;
  std::string default_branch;  //!< the repository's default branch when the payload names it
};

//! Parses the payload (JSON). kInvalid naming the missing or mistyped field, e.g. "github payload:
//! repository.clone_url: missing".
//! Generic payload: {"repo": "<url>" (or "repos": [...]), "ref": "refs/heads/main" | "branch": "main" |
//! "tag": "v1", "commit": "<sha>" (optional)}.
Result<PushEvent> parsePush(WebhookProvider provider, const http::Request& request);

//! The form in which webhook URLs and GitRepo URLs are compared: host (lower-case, no user, no port) + "/" +
//! path (lower-case, no trailing "/" or ".git"), so "https://GitHub.com/Org/App.git", "git@github.com:org/app" and
//! "ssh://git@github.com:22/org/app" are one repository. "" when no host can be found.
std::string webhookRepoKey(std::string_view url);

//! Whether a push concerns a GitRepo: its repo URL matches one of the payload's (webhookRepoKey) and
//!   - `revision` set: a pushed ref equals it, refs/tags/<revision> or refs/heads/<revision> (a commit sha
//!     revision never moves, so never matches);
//!   - else `branch` set: refs/heads/<branch> was pushed;
//!   - else (the remote's default branch): a branch was pushed that is the payload's default branch, or any
//!     branch when the payload does not name the default (ls-remote then decides; an extra poll is cheap).
bool pushMatches(const model::GitRepoSpec& spec, const PushEvent& push);

//! The pushed commit for the ref a GitRepo follows ("" when unknown), for status.webhookCommit.
std::string pushedCommitFor(const model::GitRepoSpec& spec, const PushEvent& push);

//! Hex HMAC-SHA256 of `data` with `key` (lower case): what the HMAC providers sign.
std::string hmacSha256Hex(std::string_view key, std::string_view data);

//! Constant-time equality of two strings (compares SHA-256 digests, so the length leaks nothing either).
bool constantTimeEquals(std::string_view a, std::string_view b);

}  // namespace flotilla::poller
