#include "flotilla/events/payloads.h"

#include <cctype>

#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "record_codec.h"

namespace flotilla::events {
namespace {

using detail::decodeWith;
using detail::encodeWith;
using detail::kRenderErrorFields;
using detail::Reader;

bool digitsAt(std::string_view s, size_t pos, size_t count) {
  if (pos + count > s.size()) {
    return false;
  }
  for (size_t i = pos; i < pos + count; ++i) {
    if (std::isdigit(static_cast<unsigned char>(s[i])) == 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string newEventId() {
  return randomHex(16);
}

bool isRfc3339(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)
  if (!(digitsAt(s, 0, 4) && s.size() > 19 && s[4] == '-' && digitsAt(s, 5, 2) && s[7] == '-' && digitsAt(s, 8, 2) &&
        (s[10] == 'T' || s[10] == 't') && digitsAt(s, 11, 2) && s[13] == ':' && digitsAt(s, 14, 2) && s[16] == ':' &&
        digitsAt(s, 17, 2))) {
    return false;
  }
  size_t pos = 19;
  if (s[pos] == '.') {
    size_t start = ++pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos])) != 0) {
      ++pos;
    }
    if (pos == start) {
      return false;
    }
  }
  std::string_view zone = s.substr(pos);
  if (zone == "Z" || zone == "z") {
    return true;
  }
  return zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && digitsAt(zone, 1, 2) && zone[3] == ':' &&
         digitsAt(zone, 4, 2);
}

std::string apiVersionEntryProblem(std::string_view entry) {
  size_t parts = 1;
  char previous = '/';
  for (char c : entry) {
    if (c == '/') {
      if (previous == '/') {
        return "\"" + std::string(entry) + "\" has an empty part";
      }
      ++parts;
    } else if (c == ',' || std::isgraph(static_cast<unsigned char>(c)) == 0) {
      return "\"" + std::string(entry) + "\" contains a comma, a space or a control character";
    }
    previous = c;
  }
  if (previous == '/') {
    return entry.empty() ? std::string("empty entry") : "\"" + std::string(entry) + "\" has an empty part";
  }
  if (parts > 3) {
    return "\"" + std::string(entry) + "\" is not group/version or group/version/Kind";
  }
  return {};
}

namespace {

// ---- field lists: each payload's fields, named once for encode and decode ----

constexpr auto kCommitFields = [](auto& v, auto& s) {
  detail::gitRepoKeyFields(v, s);
  v.boolean("deleted", s.deleted);  // before the fields it makes optional (decoded in this order)
  v.str("repo", s.repo, !s.deleted);
  v.str("branch", s.branch);
  v.str("revision", s.revision);
  v.str("commit", s.commit, !s.deleted);
  v.str("previousCommit", s.previous_commit);
  v.strings("paths", s.paths);
  v.integer("forceSyncGeneration", s.force_sync_generation);
  v.integer("gitrepoGeneration", s.gitrepo_generation);
  v.boolean("changed", s.changed);
  v.str("sourceObject", s.source_object);
};

constexpr auto kTargetManifestFields = [](auto& v, auto& s) {
  v.str("name", s.name);
  v.object("target", s.target);
  v.str("manifestID", s.manifest_id);
  v.object("options", s.options);
};

constexpr auto kBundleFields = [](auto& v, auto& s) {
  detail::bundleSourceFields(v, s, /*commit_required=*/true);
  v.object("error", s.error, kRenderErrorFields);
  v.boolean("deleted", s.deleted);
  v.optStr("variantsObject", s.variants_object);
  // A rendered bundle names its manifest; a failed, deleted or per-cluster (variants) one does not.
  v.str("manifestID", s.manifest_id, !s.error.has_value() && !s.deleted && s.variants_object.empty());
  v.object("options", s.options);
  v.objects("customizations", s.customizations, kTargetManifestFields);
  v.str("customizationMode", s.customization_mode);
  v.validate([&](Reader& in) {
    if (!s.customization_mode.empty() && s.customization_mode != "FirstMatch" && s.customization_mode != "AllMatches") {
      in.fail(in.pathOf("customizationMode"),
              "expected FirstMatch or AllMatches, got \"" + s.customization_mode + "\"");
    }
  });
  v.array("targets", s.targets);
  v.array("dependsOn", s.depends_on);
  v.object("rolloutStrategy", s.rollout_strategy);
  v.boolean("paused", s.paused);
  v.stringMap("labels", s.labels);
  v.integer("forceSyncGeneration", s.force_sync_generation);
  v.integer("commitSequence", s.commit_sequence);
};

constexpr auto kDeployFields = [](auto& v, auto& s) {
  detail::deploymentKeyFields(v, s);
  v.boolean("delete", s.remove);
  v.str("deploymentID", s.deployment_id, !s.remove);
  v.str("manifestID", s.manifest_id, !s.remove);
  v.object("options", s.options);
  v.array("dependsOn", s.depends_on);
  v.str("commit", s.commit);
  v.integer("generation", s.generation, true);
  v.str("gitrepo", s.gitrepo);
  v.integer("commitSequence", s.commit_sequence);
  v.stringMap("labels", s.labels);
  v.strings("retiring", s.retiring);
};

constexpr auto kStatusFields = [](auto& v, auto& s) {
  detail::deploymentStatusFields(v, s, /*state_required=*/true);
  v.integer("sequence", s.sequence);
};

constexpr auto kRegisterRequestFields = [](auto& v, auto& s) {
  v.str("cluster", s.cluster, true);
  v.str("workspace", s.workspace);
  v.stringMap("labels", s.labels);
  v.str("kubernetesVersion", s.kubernetes_version);
  v.str("agentVersion", s.agent_version);
  v.strings("apiVersions", s.api_versions);
  v.validate([&](Reader& in) {
    if (s.api_versions.size() > kMaxApiVersions) {
      in.fail(in.pathOf("apiVersions"), "more than " + std::to_string(kMaxApiVersions) + " entries");
      return;
    }
    for (size_t i = 0; i < s.api_versions.size(); ++i) {
      const std::string path = yamlIndexPath(in.pathOf("apiVersions"), i);
      if (std::string problem = apiVersionEntryProblem(s.api_versions[i]); !problem.empty()) {
        in.fail(path, problem);
        return;
      }
      if (i > 0 && s.api_versions[i - 1] >= s.api_versions[i]) {
        in.fail(path, "entries must be sorted and unique (\"" + s.api_versions[i] + "\" after \"" +
                          s.api_versions[i - 1] + "\")");
        return;
      }
    }
  });
};

constexpr auto kRegisterReplyFields = [](auto& v, auto& s) {
  v.boolean("accepted", s.accepted, true);
  v.str("message", s.message);
  v.str("clusterID", s.cluster_id);
  v.validate([&](Reader& in) {
    if (s.accepted && s.cluster_id.empty()) {
      in.fail(in.pathOf("clusterID"), "required when accepted is true");
    }
  });
};

constexpr auto kHeartbeatFields = [](auto& v, auto& s) {
  v.str("cluster", s.cluster, true);
  v.str("agentVersion", s.agent_version);
};

}  // namespace

Json encode(const CommitEvent& value) {
  return encodeWith(value, kCommitFields);
}
Json encode(const BundleEvent& value) {
  return encodeWith(value, kBundleFields);
}
Json encode(const DeployEvent& value) {
  return encodeWith(value, kDeployFields);
}
Json encode(const StatusEvent& value) {
  return encodeWith(value, kStatusFields);
}
Json encode(const RegisterRequest& value) {
  return encodeWith(value, kRegisterRequestFields);
}
Json encode(const RegisterReply& value) {
  return encodeWith(value, kRegisterReplyFields);
}
Json encode(const Heartbeat& value) {
  return encodeWith(value, kHeartbeatFields);
}

template <>
Result<CommitEvent> decodePayload<CommitEvent>(const Json& json) {
  return decodeWith<CommitEvent>(json, kCommitFields);
}
template <>
Result<BundleEvent> decodePayload<BundleEvent>(const Json& json) {
  return decodeWith<BundleEvent>(json, kBundleFields);
}
template <>
Result<DeployEvent> decodePayload<DeployEvent>(const Json& json) {
  return decodeWith<DeployEvent>(json, kDeployFields);
}
template <>
Result<StatusEvent> decodePayload<StatusEvent>(const Json& json) {
  return decodeWith<StatusEvent>(json, kStatusFields);
}
template <>
Result<RegisterRequest> decodePayload<RegisterRequest>(const Json& json) {
  return decodeWith<RegisterRequest>(json, kRegisterRequestFields);
}
template <>
Result<RegisterReply> decodePayload<RegisterReply>(const Json& json) {
  return decodeWith<RegisterReply>(json, kRegisterReplyFields);
}
template <>
Result<Heartbeat> decodePayload<Heartbeat>(const Json& json) {
  return decodeWith<Heartbeat>(json, kHeartbeatFields);
}

Result<std::string> payloadKind(const Json& json) {
  if (!json.isObject()) {
    return fail(ErrorKind::kInvalid, "payload: expected a JSON object");
  }
  if (json.getString("apiVersion") != kApiVersion) {
    return fail(ErrorKind::kInvalid, "payload: unsupported apiVersion \"" + json.getString("apiVersion") +
                                         "\" (expected " + std::string(kApiVersion) + ")");
  }
  std::string kind = json.getString("kind");
  if (kind.empty()) {
    return fail(ErrorKind::kInvalid, "payload: kind is missing");
  }
  return kind;
}

}  // namespace flotilla::events
