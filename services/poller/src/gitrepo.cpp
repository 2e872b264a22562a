#include "flotilla/poller/gitrepo.h"

#include <algorithm>
#include <cctype>

#include <fnmatch.h>

#include "flotilla/core/ascii.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"

namespace flotilla::poller {
namespace {

std::string normalizePattern(std::string_view pattern) {
  std::string out = trim(pattern);
  while (startsWith(out, "./")) {
    out.erase(0, 2);
  }
  while (!out.empty() && out.front() == '/') {
    out.erase(0, 1);
  }
  while (!out.empty() && out.back() == '/') {
    out.pop_back();
  }
  return out == "." ? std::string() : out;
}

bool globMatches(const std::string& pattern, const std::string& candidate) {
  return fnmatch(pattern.c_str(), candidate.c_str(), FNM_PATHNAME) == 0;
}

}  // namespace

Result<GitRepoId> parseGitRepoKey(std::string_view key) {
  auto tokens = split(key, '.');
  if (tokens.size() != 2) {
    return fail(ErrorKind::kInvalid, "gitrepos key \"" + std::string(key) + "\" is not <workspace>.<name>");
  }
  auto workspace = events::unescapeToken(tokens[0]);
  auto name = events::unescapeToken(tokens[1]);
  if (!workspace.ok() || !name.ok()) {
    return fail(ErrorKind::kInvalid, "gitrepos key \"" + std::string(key) + "\" has a malformed escape");
  }
  return GitRepoId{std::move(workspace).value(), std::move(name).value()};
}

std::string pollStatusKey(std::string_view workspace, std::string_view name) {
  return events::gitRepoStatusKey(workspace, name);
}

std::string normalizeRepoUrl(std::string_view url) {
  std::string text = trim(url);
  while (!text.empty() && text.back() == '/') {
    text.pop_back();
  }
  if (endsWith(text, ".git")) {
    text.resize(text.size() - 4);
  }
  auto scheme_end = text.find("://");
  if (scheme_end == std::string::npos) {
    // scp-like "user@host:path": only the host is case-insensitive.
    auto colon = text.find(':');
    auto at = text.find('@');
    size_t host_start = (at != std::string::npos && at < colon) ? at + 1 : 0;
    if (colon != std::string::npos) {
      return text.substr(0, host_start) + toLowerAscii(text.substr(host_start, colon - host_start)) +
             text.substr(colon);
    }
    return text;
  }
  std::string scheme = toLowerAscii(text.substr(0, scheme_end));
  std::string rest = text.substr(scheme_end + 3);
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? std::string() : rest.substr(slash);
  auto at = authority.rfind('@');
  std::string user = at == std::string::npos ? std::string() : authority.substr(0, at + 1);
  std::string host = toLowerAscii(at == std::string::npos ? authority : authority.substr(at + 1));
  const std::pair<const char*, const char*> defaults[] = {
      {"https", ":443"}, {"http", ":80"}, {"ssh", ":22"}, {"git", ":9418"}};
  for (const auto& [s, port] : defaults) {
    if (scheme == s && endsWith(host, port)) {
      host.resize(host.size() - std::string_view(port).size());
    }
  }
  return scheme + "://" + user + host + path;
}

std::string mirrorId(std::string_view url) {
  return sha256Hex(normalizeRepoUrl(url));
}

PathSelector::PathSelector(const std::vector<std::string>& patterns) {
  for (const auto& pattern : patterns) {
    std::string normalized = normalizePattern(pattern);
    if (normalized.empty()) {
      all_ = true;
    } else if (std::find(patterns_.begin(), patterns_.end(), normalized) == patterns_.end()) {
      patterns_.push_back(std::move(normalized));
    }
  }
  if (patterns.empty()) {
    all_ = true;
  }
  if (all_) {
    patterns_.clear();
  }
}

PathSelector PathSelector::forSpec(const model::GitRepoSpec& spec) {
  if (spec.paths.empty() && spec.bundles.empty()) {
    return PathSelector(std::vector<std::string>{});
  }
  std::vector<std::string> patterns = spec.paths;
  for (const auto& bundle : spec.bundles) {
    patterns.push_back(bundle.base.empty() ? "." : bundle.base);
    if (!bundle.options.empty()) {
      patterns.push_back(bundle.options);
    }
  }
  return PathSelector(patterns);
}

bool PathSelector::selects(std::string_view path) const {
  if (all_) {
    return true;
  }
  // The file is selected when it, or one of the directories above it, matches a pattern.
  std::string candidate(path);
  for (const auto& pattern : patterns_) {
    size_t end = 0;
    while (true) {
      end = candidate.find('/', end);
      const std::string prefix = end == std::string::npos ? candidate : candidate.substr(0, end);
      if (globMatches(pattern, prefix)) {
        return true;
      }
      if (end == std::string::npos) {
        break;
      }
      ++end;
    }
  }
  return false;
}

bool looksLikeSha(std::string_view text) {
  return text.size() >= 4 && text.size() <= 40 &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
}

Result<WantedCommit> wantedCommit(const model::GitRepoSpec& spec, const git::RemoteHeads& heads,
                                  std::string_view display_url) {
  const std::string url(display_url);
  if (!spec.revision.empty()) {
    const std::string& rev = spec.revision;
    for (const std::string& name : {"refs/tags/" + rev, rev, "refs/heads/" + rev}) {
      if (const git::RemoteRef* ref = heads.find(name); ref != nullptr && startsWith(name, "refs/")) {
        const bool tag = startsWith(name, "refs/tags/");
        return WantedCommit{name, ref->commit(), false, (tag ? "tag " : "ref ") + rev};
      }
    }
    if (looksLikeSha(rev)) {
      std::string lowered = toLowerAscii(rev);
      return WantedCommit{lowered, lowered.size() == 40 ? lowered : std::string(), true,
                          "commit " + lowered.substr(0, 12)};
    }
    return fail(ErrorKind::kNotFound, "revision \"" + rev + "\" is neither a tag, a ref nor a commit sha in " + url);
  }
  if (!spec.branch.empty()) {
    auto commit = heads.branch(spec.branch);
    if (!commit) {
      return fail(ErrorKind::kNotFound, "branch \"" + spec.branch + "\" not found in " + url);
    }
    return WantedCommit{"refs/heads/" + spec.branch, *commit, false, "branch " + spec.branch};
  }
  if (!heads.default_branch.empty()) {
    if (auto commit = heads.branch(heads.default_branch)) {
      return WantedCommit{"refs/heads/" + heads.default_branch, *commit, false,
                          "branch " + heads.default_branch + " (default)"};
    }
  }
  if (!heads.head_oid.empty()) {
    return WantedCommit{"HEAD", heads.head_oid, false, "HEAD"};
  }
  return fail(ErrorKind::kNotFound, "repository " + url + " has no default branch (is it empty?); set spec.branch");
}

std::string sourceSpecHash(const model::GitRepo& gitrepo) {
  Json encoded = model::encode(gitrepo);
  Json spec = encoded.find("spec") != nullptr ? *encoded.find("spec") : Json::object();
  for (const char* field :
       {"forceSyncGeneration", "pollingInterval", "disablePolling", "webhookSecret", "clientSecretName", "caBundle",
        "insecureSkipTLSVerify", "imageScanInterval", "imageScanCommit"}) {
    spec.erase(field);
  }
  const Json* labels = encoded.at({"metadata", "labels"});
  Json shaped = Json::obj({{"spec", spec}, {"labels", labels != nullptr ? *labels : Json::object()}});
  // A GitRepo deleted and created again under the same name (a new uid) publishes its commit anew: with the old
  // hash its first CommitEvent would repeat the last Msg-Id of the deleted one and JetStream would drop it.
  if (!gitrepo.metadata.uid.empty()) {
    shaped["uid"] = gitrepo.metadata.uid;
  }
  return sha256Hex(shaped.dump());
}

std::string commitMsgId(std::string_view workspace, std::string_view name, std::string_view commit,
                        int64_t force_sync_generation, std::string_view spec_hash) {
  return events::commitMsgId(workspace, name, commit, force_sync_generation) + "/" +
         std::string(spec_hash.substr(0, 12));
}

}  // namespace flotilla::poller
