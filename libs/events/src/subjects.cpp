#include "flotilla/events/subjects.h"

#include <algorithm>

#include "flotilla/core/util.h"

namespace flotilla::events {
namespace {

bool isPlain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;  // lower-case hex is never emitted; accepting it would make two tokens mean one name
}

std::string join(std::string_view head, std::initializer_list<std::string_view> names) {
  std::string out(head);
  for (std::string_view name : names) {
    out += ".";
    out += escapeToken(name);
  }
  return out;
}

// `parts` joined with `separator` (none before the first non-empty part), each escaped when `escape`.
std::string joinParts(std::initializer_list<std::string_view> parts, char separator, bool escape) {
  std::string out;
  for (std::string_view part : parts) {
    if (!out.empty()) {
      out += separator;
    }
    out += escape ? escapeToken(part) : std::string(part);
  }
  return out;
}

// Escaped tokens joined with '.': a KV key.
std::string keyOf(std::initializer_list<std::string_view> tokens) {
  return joinParts(tokens, '.', /*escape=*/true);
}

// Raw parts joined with '/': Kubernetes names, SHAs and ids never contain '/', so the join is unambiguous.
std::string msgId(std::initializer_list<std::string_view> parts) {
  return joinParts(parts, '/', /*escape=*/false);
}

}  // namespace

std::string escapeToken(std::string_view name) {
  if (name.empty()) {
    return "=";
  }
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(name.size());
  for (unsigned char c : name) {
    if (isPlain(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('=');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

Result<std::string> unescapeToken(std::string_view token) {
  if (token == "=") {
    return std::string();
  }
  if (token.empty()) {
    return fail(ErrorKind::kInvalid, "empty subject token");
  }
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size(); ++i) {
    char c = token[i];
    if (c == '=') {
      bool complete = i + 2 < token.size();
      int hi = complete ? hexValue(token[i + 1]) : -1;
      int lo = complete ? hexValue(token[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return fail(ErrorKind::kInvalid, "malformed escape in token \"" + std::string(token) + "\"");
      }
      auto byte = static_cast<unsigned char>(hi * 16 + lo);
      if (isPlain(byte)) {
        return fail(ErrorKind::kInvalid, "needless escape in token \"" + std::string(token) + "\"");
      }
      out.push_back(static_cast<char>(byte));
      i += 2;
    } else if (isPlain(static_cast<unsigned char>(c))) {
      out.push_back(c);
    } else {
      return fail(ErrorKind::kInvalid,
                  "character '" + std::string(1, c) + "' is not allowed in token \"" + std::string(token) + "\"");
    }
  }
  return out;
}

std::string commitSubject(std::string_view workspace, std::string_view gitrepo) {
  return join("flotilla.commit", {workspace, gitrepo});
}
std::string bundleSubject(std::string_view workspace, std::string_view bundle) {
  return join("flotilla.bundle", {workspace, bundle});
}
std::string deploySubject(std::string_view cluster) {
  return join("flotilla.deploy", {cluster});
}
std::string statusSubject(std::string_view cluster, std::string_view bundle) {
  return join("flotilla.status", {cluster, bundle});
}
std::string eventsSubject(std::string_view kind, std::initializer_list<std::string_view> parts) {
  std::string out = join("flotilla.events", {kind});
  for (std::string_view part : parts) {
    out += ".";
    out += escapeToken(part);
  }
  return out;
}

std::string commitFilter(std::string_view workspace) {
  return join("flotilla.commit", {workspace}) + ".>";
}
std::string statusFilter(std::string_view cluster) {
  return join("flotilla.status", {cluster}) + ".>";
}
std::string eventsFilter(std::string_view kind) {
  return join("flotilla.events", {kind}) + ".>";
}

Result<std::vector<std::string>> subjectTokens(std::string_view subject, std::string_view prefix) {
  std::string head = std::string(prefix) + ".";
  if (subject.substr(0, head.size()) != head || subject.size() == head.size()) {
    return fail(ErrorKind::kInvalid, "subject \"" + std::string(subject) + "\" is not under " + std::string(prefix));
  }
  std::vector<std::string> out;
  std::string_view rest = subject.substr(head.size());
  while (true) {
    size_t dot = rest.find('.');
    auto token = unescapeToken(rest.substr(0, dot));
    if (!token.ok()) {
      return fail(token.error());
    }
    out.push_back(std::move(token).value());
    if (dot == std::string_view::npos) {
      break;
    }
    rest.remove_prefix(dot + 1);
  }
  return out;
}

std::string gitRepoKey(std::string_view workspace, std::string_view gitrepo) {
  return keyOf({workspace, gitrepo});
}
std::string clusterKey(std::string_view cluster) {
  return keyOf({"cluster", cluster});
}
std::string clusterGroupKey(std::string_view workspace, std::string_view group) {
  return keyOf({"group", workspace, group});
}
std::string heartbeatKey(std::string_view cluster) {
  return keyOf({"heartbeat", cluster});
}
std::string clusterSpecKey(std::string_view cluster) {
  return keyOf({"spec", cluster});
}
std::string clusterDeregisteredKey(std::string_view cluster) {
  return keyOf({"deregistered", cluster});
}
std::string clusterEnrollmentKey(std::string_view cluster) {
  return keyOf({"enrollment", cluster});
}
std::string bundleKey(std::string_view workspace, std::string_view bundle) {
  return keyOf({workspace, bundle});
}
std::string deploymentKey(std::string_view cluster, std::string_view workspace, std::string_view bundle) {
  return keyOf({cluster, workspace, bundle});
}
std::string gitRepoStatusKey(std::string_view workspace, std::string_view gitrepo) {
  return keyOf({"gitrepo", workspace, gitrepo});
}
std::string bundleRenderStatusKey(std::string_view workspace, std::string_view bundle) {
  return keyOf({"bundle-render", workspace, bundle});
}
std::string bundleClaimKey(std::string_view workspace, std::string_view bundle, std::string_view gitrepo) {
  return keyOf({"bundle-claim", workspace, bundle, gitrepo});
}
std::string bundleDeploymentStatusKey(std::string_view cluster, std::string_view workspace, std::string_view bundle) {
  return keyOf({"bd", cluster, workspace, bundle});
}
std::string gitRepoSummaryKey(std::string_view workspace, std::string_view gitrepo) {
  return keyOf({"summary", "gitrepo", workspace, gitrepo});
}
std::string bundleSummaryKey(std::string_view workspace, std::string_view bundle) {
  return keyOf({"summary", "bundle", workspace, bundle});
}
std::string clusterSummaryKey(std::string_view cluster) {
  return keyOf({"summary", "cluster", cluster});
}
std::string keyFilter(std::initializer_list<std::string_view> leading_tokens) {
  return keyOf(leading_tokens) + ".>";
}

Result<std::vector<std::string>> keyNames(std::string_view key, std::string_view prefix, size_t count) {
  std::vector<std::string> tokens = split(key, '.');
  std::vector<std::string> want = prefix.empty() ? std::vector<std::string>{} : split(prefix, '.');
  auto bad = [&](const std::string& why) {
    return fail(ErrorKind::kInvalid, "key \"" + std::string(key) + "\" " + why);
  };
  if (tokens.size() != want.size() + count) {
    return bad("does not have the shape " + (prefix.empty() ? std::string() : std::string(prefix) + ".") + "<" +
               std::to_string(count) + " names>");
  }
  if (!std::equal(want.begin(), want.end(), tokens.begin())) {
    return bad("does not start with " + std::string(prefix));
  }
  std::vector<std::string> names;
  for (size_t i = want.size(); i < tokens.size(); ++i) {
    auto name = unescapeToken(tokens[i]);
    if (!name.ok()) {
      return bad(": " + name.error().message);
    }
    names.push_back(std::move(name).value());
  }
  return names;
}

std::string sourceObjectName(std::string_view sha256_hex) {
  return std::string(sha256_hex);
}
std::string manifestObjectName(std::string_view manifest_id) {
  return std::string(manifest_id);
}

std::string commitMsgId(std::string_view workspace, std::string_view gitrepo, std::string_view commit,
                        int64_t force_sync_generation) {
  return msgId({"commit", workspace, gitrepo, commit, std::to_string(force_sync_generation)});
}
std::string commitDeletedMsgId(std::string_view workspace, std::string_view gitrepo, uint64_t delete_revision) {
  return msgId({"commit", workspace, gitrepo, "deleted", std::to_string(delete_revision)});
}
std::string bundleMsgId(std::string_view workspace, std::string_view bundle, std::string_view commit,
                        std::string_view outcome) {
  return msgId({"bundle", workspace, bundle, commit, outcome});
}
std::string deployMsgId(std::string_view cluster, std::string_view bundle, std::string_view deployment_or_deleted,
                        int64_t generation) {
  return msgId({"deploy", cluster, bundle, deployment_or_deleted, std::to_string(generation)});
}
std::string statusMsgId(std::string_view cluster, std::string_view bundle, std::string_view deployment_id,
                        std::string_view state, int64_t sequence) {
  return msgId({"status", cluster, bundle, deployment_id, state, std::to_string(sequence)});
}

}  // namespace flotilla::events
