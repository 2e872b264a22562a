#include "flotilla/poller/webhook.h"

#include <algorithm>
#include <optional>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "flotilla/core/ascii.h"
#include "flotilla/core/json.h"
#include "flotilla/core/util.h"
#include "flotilla/poller/gitrepo.h"

namespace flotilla::poller {
namespace {

//! What tells the providers apart: the header naming the event (empty: the event is in the body) and the
//! header carrying the HMAC-SHA256 of the body (empty: not signed that way), with or without "sha256=".
struct ProviderTraits {
  WebhookProvider provider;
  std::string_view name;
  std::string_view event_header;
  std::string_view signature_header;
  bool signature_prefixed;
};

// In WebhookProvider order.
constexpr ProviderTraits kProviders[] = {
    {WebhookProvider::kGitHub, "github", "x-github-event", "X-Hub-Signature-256", true},
    {WebhookProvider::kGitLab, "gitlab", "x-gitlab-event", "", false},
    {WebhookProvider::kGitea, "gitea", "x-gitea-event", "X-Gitea-Signature", false},
    {WebhookProvider::kGogs, "gogs", "x-gogs-event", "X-Gogs-Signature", false},
    {WebhookProvider::kBitbucketCloud, "bitbucket", "x-event-key", "X-Hub-Signature", true},
    {WebhookProvider::kBitbucketServer, "bitbucket-server", "x-event-key", "X-Hub-Signature", true},
    {WebhookProvider::kAzureDevOps, "azure-devops", "", "", false},
    {WebhookProvider::kGeneric, "generic", "", "X-Flotilla-Signature", true},
};

static_assert(
    [] {
      for (size_t i = 0; i < std::size(kProviders); ++i) {
        if (static_cast<size_t>(kProviders[i].provider) != i) {
          return false;
        }
      }
      return true;
    }(),
    "kProviders must list the providers in WebhookProvider order");

const ProviderTraits& traitsOf(WebhookProvider provider) {
  return kProviders[static_cast<size_t>(provider)];
}

//! A pushed commit sha, "" for the all-zero sha providers send for a deleted ref.
std::string commitOrEmpty(std::string sha) {
  return std::all_of(sha.begin(), sha.end(), [](char c) { return c == '0'; }) ? std::string() : sha;
}

Status missingField(WebhookProvider provider, std::string_view field, std::string_view what = "missing") {
  return fail(ErrorKind::kInvalid,
              std::string(providerName(provider)) + " payload: " + std::string(field) + ": " + std::string(what),
              "webhook");
}

//! The list at `path`; kInvalid naming `field` when it is missing or not a list.
Result<const Json*> listAt(WebhookProvider provider, const Json& root, std::initializer_list<std::string_view> path,
                           std::string_view field) {
  const Json* list = root.at(path);
  if (list == nullptr || !list->isArray()) {
    return fail(missingField(provider, field, "missing or not a list").error());
  }
  return list;
}

bool hasHeaderWithPrefix(const http::Request& request, std::string_view prefix) {
  return std::any_of(request.headers.begin(), request.headers.end(),
                     [&](const auto& header) { return startsWith(header.first, prefix); });
}

//! The provider's value in the secret: its own key, else "token".
const std::string* secretValue(const WebhookSecret& secret, std::string_view key) {
  auto it = secret.find(std::string(key));
  if (it == secret.end() || it->second.empty()) {
    it = secret.find("token");
  }
  return it == secret.end() || it->second.empty() ? nullptr : &it->second;
}

//! Checks a header carrying hex HMAC-SHA256 of the body, with an optional "sha256=" prefix.
bool checkHmac(const http::Request& request, std::string_view header, bool prefixed, const std::string& key,
               std::string& why) {
  std::string value = trim(request.header(header));
  if (value.empty()) {
    why = "missing " + std::string(header) + " header";
    return false;
  }
  if (prefixed) {
    if (!startsWith(value, "sha256=")) {
      why = std::string(header) + " is not of the form sha256=<hex>";
      return false;
    }
    value = value.substr(7);
  }
  if (!constantTimeEquals(toLowerAscii(value), hmacSha256Hex(key, request.body))) {
    why = std::string(header) + " does not match the body signed with the webhook secret";
    return false;
  }
  return true;
}

//! Checks a header carrying the secret itself (GitLab).
bool checkToken(const http::Request& request, std::string_view header, const std::string& key, std::string& why) {
  const std::string token = request.header(header);
  if (token.empty()) {
    why = "missing " + std::string(header) + " header";
    return false;
  }
  if (!constantTimeEquals(token, key)) {
    why = std::string(header) + " does not match the webhook secret";
    return false;
  }
  return true;
}

//! Checks Authorization: Basic against the secret's azure-username/azure-password (Azure DevOps).
bool checkBasicAuth(const http::Request& request, const WebhookSecret& secret, std::string& why) {
  auto user = secret.find("azure-username");
  auto password = secret.find("azure-password");
  if (user == secret.end() || password == secret.end()) {
    why = "the webhook secret has no azure-username/azure-password";
    return false;
  }
  const std::string header = trim(request.header("authorization"));
  if (!startsWith(toLowerAscii(header), "basic ")) {
    why = "missing Authorization: Basic header";
    return false;
  }
  auto decoded = base64Decode(trim(header.substr(6)));
  if (!decoded.ok() || !constantTimeEquals(*decoded, user->second + ":" + password->second)) {
    why = "Authorization does not match azure-username/azure-password";
    return false;
  }
  return true;
}

Result<Json> parseBody(WebhookProvider provider, const http::Request& request) {
  auto json = Json::parse(request.body);
  if (!json.ok() || !json->isObject()) {
    return fail(ErrorKind::kInvalid, std::string(providerName(provider)) + " payload: not a JSON object", "webhook");
  }
  return json;
}

std::string stringAt(const Json& root, std::initializer_list<std::string_view> path) {
  const Json* value = root.at(path);
  return value != nullptr && value->isString() ? value->asString() : std::string();
}

void addUrl(PushEvent& push, std::string url) {
  if (!url.empty() && std::find(push.repo_urls.begin(), push.repo_urls.end(), url) == push.repo_urls.end()) {
    push.repo_urls.push_back(std::move(url));
  }
}

Status requireUrls(WebhookProvider provider, const PushEvent& push, std::string_view field) {
  return push.repo_urls.empty() ? missingField(provider, field) : Status();
}

//! Adds to `push` the ref `ref_of(element)` of each element of the list of pushed refs at `path` (nullopt: not a
//! ref); kInvalid naming `url_field` when no repository URL was found, naming `field` when the list is missing.
template <typename RefOf>
Status addPushedRefs(WebhookProvider provider, PushEvent& push, std::string_view url_field, const Json& root,
                     std::initializer_list<std::string_view> path, std::string_view field, RefOf ref_of) {
  FLOTILLA_TRY(requireUrls(provider, push, url_field));
  auto list = listAt(provider, root, path, field);
  FLOTILLA_TRY(list);
  for (const Json& element : (*list)->asArray()) {
    if (std::optional<PushRef> ref = ref_of(element)) {
      push.refs.push_back(std::move(*ref));
    }
  }
  return {};
}

std::string stripRefsHeads(std::string_view ref) {
  return startsWith(ref, "refs/heads/") ? std::string(ref.substr(11)) : std::string(ref);
}

//! GitHub, Gitea and Gogs send the same push shape.
Result<PushEvent> parseGitHubLike(WebhookProvider provider, const Json& root, std::string event) {
  PushEvent push;
  push.event = std::move(event);
  push.is_push = push.event == "push";
  for (const char* field : {"clone_url", "ssh_url", "html_url", "git_url", "url", "svn_url"}) {
    addUrl(push, stringAt(root, {"repository", field}));
  }
  push.default_branch = stringAt(root, {"repository", "default_branch"});
  if (!push.is_push) {
    return push;
  }
  FLOTILLA_TRY(requireUrls(provider, push, "repository.clone_url"));
  const std::string ref = root.getString("ref");
  if (ref.empty()) {
    return fail(missingField(provider, "ref").error());
  }
  push.refs.push_back(PushRef{ref, commitOrEmpty(root.getString("after"))});
  return push;
}

Result<PushEvent> parseGitLab(const Json& root, std::string event) {
  PushEvent push;
  push.event = std::move(event);
  const std::string kind = root.getString("object_kind", root.getString("event_name"));
  push.is_push = kind == "push" || kind == "tag_push";
  for (const char* field : {"git_http_url", "git_ssh_url", "web_url", "http_url", "ssh_url"}) {
    addUrl(push, stringAt(root, {"project", field}));
  }
  for (const char* field : {"git_http_url", "git_ssh_url", "url", "homepage"}) {
    addUrl(push, stringAt(root, {"repository", field}));
  }
  push.default_branch = stringAt(root, {"project", "default_branch"});
  if (!push.is_push) {
    return push;
  }
  FLOTILLA_TRY(requireUrls(WebhookProvider::kGitLab, push, "project.git_http_url"));
  const std::string ref = root.getString("ref");
  if (ref.empty()) {
    return fail(missingField(WebhookProvider::kGitLab, "ref").error());
  }
  push.refs.push_back(PushRef{ref, commitOrEmpty(root.getString("checkout_sha", root.getString("after")))});
  return push;
}

Result<PushEvent> parseBitbucketCloud(const Json& root, std::string event) {
  PushEvent push;
  push.event = std::move(event);
  push.is_push = push.event == "repo:push";
  addUrl(push, stringAt(root, {"repository", "links", "html", "href"}));
  const std::string full_name = stringAt(root, {"repository", "full_name"});
  if (!full_name.empty()) {
    addUrl(push, "https://bitbucket.org/" + full_name);
    addUrl(push, "git@bitbucket.org:" + full_name);
  }
  if (!push.is_push) {
    return push;
  }
  auto ref_of = [](const Json& change) -> std::optional<PushRef> {
    const Json* side = change.find("new");
    std::string commit;
    if (side != nullptr && side->isObject()) {
      commit = stringAt(*side, {"target", "hash"});
    } else {
      side = change.find("old");  // a deletion
    }
    if (side == nullptr || !side->isObject()) {
      return std::nullopt;
    }
    const std::string type = side->getString("type");
    const std::string name = side->getString("name");
    if (name.empty()) {
      return std::nullopt;
    }
    return PushRef{(type == "tag" ? "refs/tags/" : "refs/heads/") + name, commit};
  };
  FLOTILLA_TRY(addPushedRefs(WebhookProvider::kBitbucketCloud, push, "repository.links.html.href", root,
                             {"push", "changes"}, "push.changes", ref_of));
  return push;
}

Result<PushEvent> parseBitbucketServer(const Json& root, std::string event) {
  PushEvent push;
  push.event = std::move(event);
  push.is_push = push.event == "repo:refs_changed";
  if (const Json* clones = root.at({"repository", "links", "clone"}); clones != nullptr && clones->isArray()) {
    for (const Json& clone : clones->asArray()) {
      addUrl(push, clone.getString("href"));
    }
  }
  if (const Json* self = root.at({"repository", "links", "self"}); self != nullptr && self->isArray()) {
    for (const Json& link : self->asArray()) {
      // ".../projects/PRJ/repos/app/browse": the web page, not a clone URL; only useful when nothing else is there.
      std::string href = link.getString("href");
      if (endsWith(href, "/browse")) {
        href.resize(href.size() - 7);
      }
      addUrl(push, href);
    }
  }
  if (!push.is_push) {
    return push;
  }
  auto ref_of = [](const Json& change) -> std::optional<PushRef> {
    std::string ref = stringAt(change, {"ref", "id"});
    if (ref.empty()) {
      ref = change.getString("refId");
    }
    if (ref.empty()) {
      return std::nullopt;
    }
    std::string commit = change.getString("type") == "DELETE" ? std::string() : change.getString("toHash");
    return PushRef{ref, commit};
  };
  FLOTILLA_TRY(addPushedRefs(WebhookProvider::kBitbucketServer, push, "repository.links.clone", root, {"changes"},
                             "changes", ref_of));
  return push;
}

Result<PushEvent> parseAzure(const Json& root) {
  PushEvent push;
  push.event = root.getString("eventType");
  push.is_push = push.event == "git.push";
  for (const char* field : {"remoteUrl", "sshUrl", "webUrl", "url"}) {
    addUrl(push, stringAt(root, {"resource", "repository", field}));
  }
  push.default_branch = stripRefsHeads(stringAt(root, {"resource", "repository", "defaultBranch"}));
  if (!push.is_push) {
    return push;
  }
  auto ref_of = [](const Json& update) -> std::optional<PushRef> {
    const std::string ref = update.getString("name");
    if (ref.empty()) {
      return std::nullopt;
    }
    return PushRef{ref, commitOrEmpty(update.getString("newObjectId"))};
  };
  FLOTILLA_TRY(addPushedRefs(WebhookProvider::kAzureDevOps, push, "resource.repository.remoteUrl", root,
                             {"resource", "refUpdates"}, "resource.refUpdates", ref_of));
  return push;
}

Result<PushEvent> parseGeneric(const Json& root) {
  PushEvent push;
  push.event = "push";
  push.is_push = true;
  addUrl(push, root.getString("repo"));
  if (const Json* repos = root.find("repos"); repos != nullptr && repos->isArray()) {
    for (const Json& url : repos->asArray()) {
      if (url.isString()) {
        addUrl(push, url.asString());
      }
    }
  }
  FLOTILLA_TRY(requireUrls(WebhookProvider::kGeneric, push, "repo"));
  std::string ref = root.getString("ref");
  if (ref.empty() && !root.getString("branch").empty()) {
    ref = "refs/heads/" + root.getString("branch");
  }
  if (ref.empty() && !root.getString("tag").empty()) {
    ref = "refs/tags/" + root.getString("tag");
  }
  if (ref.empty()) {
    return fail(missingField(WebhookProvider::kGeneric, "ref (or branch or tag)").error());
  }
  if (!startsWith(ref, "refs/")) {
    ref = "refs/heads/" + ref;
  }
  push.refs.push_back(PushRef{ref, root.getString("commit")});
  push.default_branch = root.getString("defaultBranch");
  return push;
}

//! The ref of `push` that `spec` follows, or nullptr.
const PushRef* matchingRef(const model::GitRepoSpec& spec, const PushEvent& push) {
  for (const PushRef& pushed : push.refs) {
    if (!spec.revision.empty()) {
      if (pushed.ref == spec.revision || pushed.ref == "refs/tags/" + spec.revision ||
          pushed.ref == "refs/heads/" + spec.revision) {
        return &pushed;
      }
      continue;
    }
    if (!startsWith(pushed.ref, "refs/heads/")) {
      continue;
    }
    const std::string branch = pushed.ref.substr(11);
    if (!spec.branch.empty() ? branch == spec.branch : (push.default_branch.empty() || branch == push.default_branch)) {
      return &pushed;
    }
  }
  return nullptr;
}

}  // namespace

std::string_view providerName(WebhookProvider provider) {
  return traitsOf(provider).name;
}

std::optional<WebhookProvider> detectProvider(const http::Request& request) {
  // Order matters: Gitea also sends Gogs and GitHub headers, Gogs also GitHub's.
  constexpr std::pair<std::string_view, WebhookProvider> kByHeader[] = {
      {"x-flotilla-signature", WebhookProvider::kGeneric},
      {"x-gitea-event", WebhookProvider::kGitea},
      {"x-gogs-event", WebhookProvider::kGogs},
      {"x-github-event", WebhookProvider::kGitHub},
      {"x-gitlab-event", WebhookProvider::kGitLab},
      {"x-gitlab-token", WebhookProvider::kGitLab}};
  for (const auto& [header, provider] : kByHeader) {
    if (!request.header(header).empty()) {
      return provider;
    }
  }
  if (const std::string key = request.header("x-event-key"); !key.empty()) {
    return !request.header("x-hook-uuid").empty() || key == "repo:push" ? WebhookProvider::kBitbucketCloud
                                                                        : WebhookProvider::kBitbucketServer;
  }
  if (hasHeaderWithPrefix(request, "x-vss-")) {
    return WebhookProvider::kAzureDevOps;
  }
  return std::nullopt;
}

bool verifyWebhook(WebhookProvider provider, const http::Request& request, const WebhookSecret& secret,
                   std::string& why) {
  const std::string name(providerName(provider));
  if (provider == WebhookProvider::kAzureDevOps) {
    return checkBasicAuth(request, secret, why);
  }
  const std::string* key = secretValue(secret, name);
  if (key == nullptr) {
    why = "the webhook secret has neither a \"" + name + "\" nor a \"token\" key";
    return false;
  }
  if (provider == WebhookProvider::kGitLab) {
    return checkToken(request, "X-Gitlab-Token", *key, why);
  }
  const ProviderTraits& traits = traitsOf(provider);
  if (provider == WebhookProvider::kGitea && request.header("x-gitea-signature").empty() &&
      !request.header("x-hub-signature-256").empty()) {
    return checkHmac(request, "X-Hub-Signature-256", true, *key, why);  // Gitea also signs GitHub's way
  }
  return checkHmac(request, traits.signature_header, traits.signature_prefixed, *key, why);
}

Result<PushEvent> parsePush(WebhookProvider provider, const http::Request& request) {
  auto parsed = parseBody(provider, request);
  if (!parsed.ok()) {
    return fail(parsed.error());
  }
  const Json& root = *parsed;
  std::string event =
      traitsOf(provider).event_header.empty() ? std::string() : request.header(traitsOf(provider).event_header);
  switch (provider) {
    case WebhookProvider::kGitHub:
    case WebhookProvider::kGitea:
    case WebhookProvider::kGogs:
      return parseGitHubLike(provider, root, std::move(event));
    case WebhookProvider::kGitLab:
      return parseGitLab(root, std::move(event));
    case WebhookProvider::kBitbucketCloud:
      return parseBitbucketCloud(root, std::move(event));
    case WebhookProvider::kBitbucketServer:
      return parseBitbucketServer(root, std::move(event));
    case WebhookProvider::kAzureDevOps:
      return parseAzure(root);
    case WebhookProvider::kGeneric:
      return parseGeneric(root);
  }
  return fail(ErrorKind::kInvalid, "unsupported provider", "webhook");
}

std::string webhookRepoKey(std::string_view url) {
  std::string text = trim(url);
  std::string host;
  std::string path;
  if (auto scheme_end = text.find("://"); scheme_end != std::string::npos) {
    std::string rest = text.substr(scheme_end + 3);
    auto slash = rest.find('/');
    std::string authority = rest.substr(0, slash);
    path = slash == std::string::npos ? std::string() : rest.substr(slash);
    if (auto at = authority.rfind('@'); at != std::string::npos) {
      authority = authority.substr(at + 1);
    }
    if (startsWith(authority, "[")) {
      host = authority.substr(0, authority.find(']') + 1);
    } else {
      host = authority.substr(0, authority.find(':'));
    }
  } else {
    // scp-like user@host:path
    auto colon = text.find(':');
    if (colon == std::string::npos) {
      return {};
    }
    host = text.substr(0, colon);
    if (auto at = host.rfind('@'); at != std::string::npos) {
      host = host.substr(at + 1);
    }
    path = text.substr(colon + 1);
  }
  if (auto cut = path.find_first_of("?#"); cut != std::string::npos) {
    path.resize(cut);
  }
  while (!path.empty() && path.back() == '/') {
    path.pop_back();
  }
  if (endsWith(path, ".git")) {
    path.resize(path.size() - 4);
  }
  while (!path.empty() && path.front() == '/') {
    path.erase(0, 1);
  }
  if (host.empty()) {
    return {};
  }
  return toLowerAscii(host + "/" + path);
}

bool pushMatches(const model::GitRepoSpec& spec, const PushEvent& push) {
  if (!push.is_push) {
    return false;
  }
  const std::string key = webhookRepoKey(spec.repo);
  if (key.empty()) {
    return false;
  }
  const bool same_repo = std::any_of(push.repo_urls.begin(), push.repo_urls.end(),
                                     [&](const std::string& url) { return webhookRepoKey(url) == key; });
  return same_repo && matchingRef(spec, push) != nullptr;
}

std::string pushedCommitFor(const model::GitRepoSpec& spec, const PushEvent& push) {
  const PushRef* ref = matchingRef(spec, push);
  return ref == nullptr ? std::string() : ref->commit;
}

std::string hmacSha256Hex(std::string_view key, std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), digest, &length);
  // The digest as raw bytes, then hex: the same encoding as sha256Hex (libs/core).
  const std::string raw(reinterpret_cast<const char*>(digest), length);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(raw.size() * 2, '0');
  for (size_t i = 0; i < raw.size(); ++i) {
    const auto byte = static_cast<unsigned char>(raw[i]);
    out[2 * i] = kHex[byte >> 4];
    out[2 * i + 1] = kHex[byte & 0xf];
  }
  return out;
}

bool constantTimeEquals(std::string_view a, std::string_view b) {
  const std::string da = sha256Raw(a);
  const std::string db = sha256Raw(b);
  return CRYPTO_memcmp(da.data(), db.data(), da.size()) == 0;
}

}  // namespace flotilla::poller
