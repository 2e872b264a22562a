#include "flotilla/events/payloads.h"

#include <array>
#include <cctype>

#include "flotilla/core/util.h"
#include "reader.h"

namespace flotilla::events {
namespace {

using detail::PayloadReader;
using detail::Reader;

// The seven bundle state names (model::BundleState; duplicated here so this library stays a leaf, and
// cross-checked by a test that links both).
constexpr std::array<std::string_view, 7> kStateNames = {"Ready",    "NotReady",    "Pending",   "OutOfSync",
                                                         "Modified", "WaitApplied", "ErrApplied"};

bool isStateName(std::string_view name) {
  for (auto state : kStateNames) {
    if (state == name) {
      return true;
    }
  }
  return false;
}

void checkState(Reader& in, std::string_view key, const std::string& state, bool allow_empty) {
  if ((allow_empty && state.empty()) || isStateName(state)) {
    return;
  }
  in.fail(in.pathOf(key), "unknown bundle state \"" + state +
                              "\" (one of Ready, NotReady, Pending, OutOfSync, Modified, WaitApplied, ErrApplied)");
}

Json header(std::string_view kind, const std::string& id, const std::string& time) {
  return Json::obj({{"apiVersion", std::string(kApiVersion)}, {"kind", std::string(kind)}, {"id", id}, {"time", time}});
}

Json stringList(const std::vector<std::string>& values) {
  Json out = Json::array();
  for (const auto& value : values) {
    out.push(value);
  }
  return out;
}

Json stringMap(const StringMap& values) {
  Json out = Json::object();
  for (const auto& [k, v] : values) {
    out[k] = v;
  }
  return out;
}

template <typename T, typename Fn>
Result<T> decodeWith(const Json& json, Fn&& fn) {
  PayloadReader reader(json, T::kKind);
  T out;
  reader.header(out.id, out.time);
  if (reader.fields().ok()) {
    fn(reader.fields(), out);
  }
  if (auto s = reader.finish(); !s.ok()) {
    return fail(s.error());
  }
  return out;
}

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

// ---- CommitEvent ----

Json encode(const CommitEvent& v) {
  Json out = header(CommitEvent::kKind, v.id, v.time);
  out["workspace"] = v.workspace;
  out["gitrepo"] = v.gitrepo;
  out["repo"] = v.repo;
  out["branch"] = v.branch;
  out["revision"] = v.revision;
  out["commit"] = v.commit;
  out["previousCommit"] = v.previous_commit;
  out["paths"] = stringList(v.paths);
  out["forceSyncGeneration"] = v.force_sync_generation;
  out["gitrepoGeneration"] = v.gitrepo_generation;
  out["changed"] = v.changed;
  out["sourceObject"] = v.source_object;
  return out;
}

template <>
Result<CommitEvent> decodePayload<CommitEvent>(const Json& json) {
  return decodeWith<CommitEvent>(json, [](Reader& in, CommitEvent& v) {
    in.str("workspace", v.workspace, true);
    in.str("gitrepo", v.gitrepo, true);
    in.str("repo", v.repo, true);
    in.str("branch", v.branch);
    in.str("revision", v.revision);
    in.str("commit", v.commit, true);
    in.str("previousCommit", v.previous_commit);
    in.strings("paths", v.paths);
    in.integer("forceSyncGeneration", v.force_sync_generation);
    in.integer("gitrepoGeneration", v.gitrepo_generation);
    in.boolean("changed", v.changed);
    in.str("sourceObject", v.source_object);
  });
}

// ---- BundleEvent ----

Json encode(const BundleEvent& v) {
  Json out = header(BundleEvent::kKind, v.id, v.time);
  out["workspace"] = v.workspace;
  out["gitrepo"] = v.gitrepo;
  out["bundle"] = v.bundle;
  out["path"] = v.path;
  out["commit"] = v.commit;
  out["manifestID"] = v.manifest_id;
  out["options"] = v.options;
  Json customizations = Json::array();
  for (const auto& c : v.customizations) {
    customizations.push(
        Json::obj({{"name", c.name}, {"target", c.target}, {"manifestID", c.manifest_id}, {"options", c.options}}));
  }
  out["customizations"] = std::move(customizations);
  out["customizationMode"] = v.customization_mode;
  out["targets"] = v.targets;
  out["dependsOn"] = v.depends_on;
  if (!v.rollout_strategy.isNull()) {
    out["rolloutStrategy"] = v.rollout_strategy;
  }
  out["paused"] = v.paused;
  out["labels"] = stringMap(v.labels);
  out["forceSyncGeneration"] = v.force_sync_generation;
  if (!v.variants_object.empty()) {
    out["variantsObject"] = v.variants_object;
  }
  out["deleted"] = v.deleted;
  if (v.error) {
    out["error"] = Json::obj({{"file", v.error->file}, {"line", v.error->line}, {"message", v.error->message}});
  }
  return out;
}

template <>
Result<BundleEvent> decodePayload<BundleEvent>(const Json& json) {
  return decodeWith<BundleEvent>(json, [](Reader& in, BundleEvent& v) {
    in.str("workspace", v.workspace, true);
    in.str("gitrepo", v.gitrepo, true);
    in.str("bundle", v.bundle, true);
    in.str("path", v.path);
    in.str("commit", v.commit, true);
    in.optObject("error", v.error, [](Reader& e, RenderError& error) {
      e.str("file", error.file);
      e.integer("line", error.line);
      e.str("message", error.message, true);
    });
    in.boolean("deleted", v.deleted);
    in.str("variantsObject", v.variants_object);
    in.str("manifestID", v.manifest_id, !v.error.has_value() && !v.deleted && v.variants_object.empty());
    in.object("options", v.options);
    in.objects("customizations", v.customizations, [](Reader& c, TargetManifest& t) {
      c.str("name", t.name);
      c.object("target", t.target);
      c.str("manifestID", t.manifest_id);
      c.object("options", t.options);
    });
    in.str("customizationMode", v.customization_mode);
    if (!v.customization_mode.empty() && v.customization_mode != "FirstMatch" && v.customization_mode != "AllMatches") {
      in.fail(in.pathOf("customizationMode"),
              "expected FirstMatch or AllMatches, got \"" + v.customization_mode + "\"");
    }
    in.array("targets", v.targets);
    in.array("dependsOn", v.depends_on);
    in.object("rolloutStrategy", v.rollout_strategy);
    in.boolean("paused", v.paused);
    in.stringMap("labels", v.labels);
    in.integer("forceSyncGeneration", v.force_sync_generation);
  });
}

// ---- DeployEvent ----

Json encode(const DeployEvent& v) {
  Json out = header(DeployEvent::kKind, v.id, v.time);
  out["cluster"] = v.cluster;
  out["workspace"] = v.workspace;
  out["bundle"] = v.bundle;
  out["delete"] = v.remove;
  out["deploymentID"] = v.deployment_id;
  out["manifestID"] = v.manifest_id;
  out["options"] = v.options;
  out["dependsOn"] = v.depends_on;
  out["commit"] = v.commit;
  out["generation"] = v.generation;
  return out;
}

template <>
Result<DeployEvent> decodePayload<DeployEvent>(const Json& json) {
  return decodeWith<DeployEvent>(json, [](Reader& in, DeployEvent& v) {
    in.str("cluster", v.cluster, true);
    in.str("workspace", v.workspace, true);
    in.str("bundle", v.bundle, true);
    in.boolean("delete", v.remove);
    in.str("deploymentID", v.deployment_id, !v.remove);
    in.str("manifestID", v.manifest_id, !v.remove);
    in.object("options", v.options);
    in.array("dependsOn", v.depends_on);
    in.str("commit", v.commit);
    in.integer("generation", v.generation, true);
  });
}

// ---- StatusEvent ----

Json encode(const StatusEvent& v) {
  Json out = header(StatusEvent::kKind, v.id, v.time);
  out["cluster"] = v.cluster;
  out["workspace"] = v.workspace;
  out["bundle"] = v.bundle;
  out["deploymentID"] = v.deployment_id;
  out["generation"] = v.generation;
  out["sequence"] = v.sequence;
  out["state"] = v.state;
  out["reason"] = v.reason;
  out["message"] = v.message;
  Json resources = Json::array();
  for (const auto& r : v.resources) {
    resources.push(Json::obj({{"apiVersion", r.api_version},
                              {"kind", r.kind},
                              {"namespace", r.ns},
                              {"name", r.name},
                              {"state", r.state},
                              {"message", r.message}}));
  }
  out["resources"] = std::move(resources);
  out["agentVersion"] = v.agent_version;
  return out;
}

template <>
Result<StatusEvent> decodePayload<StatusEvent>(const Json& json) {
  return decodeWith<StatusEvent>(json, [](Reader& in, StatusEvent& v) {
    in.str("cluster", v.cluster, true);
    in.str("workspace", v.workspace);
    in.str("bundle", v.bundle, true);
    in.str("deploymentID", v.deployment_id);
    in.integer("generation", v.generation);
    in.integer("sequence", v.sequence);
    in.str("state", v.state, true);
    checkState(in, "state", v.state, true);
    in.str("reason", v.reason);
    in.str("message", v.message);
    in.objects("resources", v.resources, [](Reader& r, ObjectResult& o) {
      r.str("apiVersion", o.api_version);
      r.str("kind", o.kind, true);
      r.str("namespace", o.ns);
      r.str("name", o.name, true);
      r.str("state", o.state);
      checkState(r, "state", o.state, true);
      r.str("message", o.message);
    });
    in.str("agentVersion", v.agent_version);
  });
}

// ---- registration and heartbeats ----

Json encode(const RegisterRequest& v) {
  Json out = header(RegisterRequest::kKind, v.id, v.time);
  out["cluster"] = v.cluster;
  out["workspace"] = v.workspace;
  out["labels"] = stringMap(v.labels);
  out["kubernetesVersion"] = v.kubernetes_version;
  out["agentVersion"] = v.agent_version;
  return out;
}

template <>
Result<RegisterRequest> decodePayload<RegisterRequest>(const Json& json) {
  return decodeWith<RegisterRequest>(json, [](Reader& in, RegisterRequest& v) {
    in.str("cluster", v.cluster, true);
    in.str("workspace", v.workspace);
    in.stringMap("labels", v.labels);
    in.str("kubernetesVersion", v.kubernetes_version);
    in.str("agentVersion", v.agent_version);
  });
}

Json encode(const RegisterReply& v) {
  Json out = header(RegisterReply::kKind, v.id, v.time);
  out["accepted"] = v.accepted;
  out["message"] = v.message;
  out["clusterID"] = v.cluster_id;
  return out;
}

template <>
Result<RegisterReply> decodePayload<RegisterReply>(const Json& json) {
  return decodeWith<RegisterReply>(json, [](Reader& in, RegisterReply& v) {
    in.boolean("accepted", v.accepted, true);
    in.str("message", v.message);
    in.str("clusterID", v.cluster_id);
    if (v.accepted && v.cluster_id.empty()) {
      in.fail(in.pathOf("clusterID"), "required when accepted is true");
    }
  });
}

Json encode(const Heartbeat& v) {
  Json out = header(Heartbeat::kKind, v.id, v.time);
  out["cluster"] = v.cluster;
  out["agentVersion"] = v.agent_version;
  return out;
}

template <>
Result<Heartbeat> decodePayload<Heartbeat>(const Json& json) {
  return decodeWith<Heartbeat>(json, [](Reader& in, Heartbeat& v) {
    in.str("cluster", v.cluster, true);
    in.str("agentVersion", v.agent_version);
  });
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
