#include "flotilla/events/cloudevents.h"

#include <algorithm>
#include <cctype>

#include "flotilla/core/ascii.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "reader.h"

namespace flotilla::events {
namespace {

bool isExtensionName(std::string_view name) {
  return !name.empty() && name.size() <= 20 &&
         std::all_of(name.begin(), name.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); });
}

}  // namespace

std::string cloudEventType(std::string_view object, std::string_view what) {
  return std::string(kCloudEventTypePrefix) + toLowerAscii(object) + "." + toLowerAscii(what);
}

Json encode(const CloudEvent& value) {
  Json out = Json::obj({{"specversion", std::string(kCloudEventsSpecVersion)},
                        {"type", value.type},
                        {"source", value.source},
                        {"id", value.id},
                        {"datacontenttype", "application/json"},
                        {"data", value.data}});
  if (!value.time.empty()) {
    out["time"] = value.time;
  }
  if (!value.subject.empty()) {
    out["subject"] = value.subject;
  }
  return out;
}

Result<CloudEvent> decodeCloudEvent(const Json& json) {
  std::vector<std::string> problems;
  detail::Reader in(json, "CloudEvent", problems);
  CloudEvent out;
  std::string spec_version;
  std::string content_type;
  in.str("specversion", spec_version, true);
  if (!spec_version.empty() && spec_version != kCloudEventsSpecVersion) {
    in.fail(in.pathOf("specversion"), "unsupported specversion \"" + spec_version + "\" (expected 1.0)");
  }
  in.str("type", out.type, true);
  in.str("source", out.source, true);
  in.str("id", out.id, true);
  in.str("time", out.time);
  if (!out.time.empty() && !isRfc3339(out.time)) {
    in.fail(in.pathOf("time"), "expected an RFC 3339 time, got \"" + out.time + "\"");
  }
  in.str("subject", out.subject);
  in.str("datacontenttype", content_type);
  if (!content_type.empty() && content_type != "application/json") {
    in.fail(in.pathOf("datacontenttype"), "expected application/json, got \"" + content_type + "\"");
  }
  in.any("data", out.data);
  if (json.isObject()) {
    for (const auto& [key, value] : json.asObject()) {
      if (key == "specversion" || key == "type" || key == "source" || key == "id" || key == "time" ||
          key == "subject" || key == "datacontenttype" || key == "data") {
        continue;
      }
      if (!isExtensionName(key)) {
        in.fail(in.pathOf(key), "not a CloudEvents attribute (extension names are lower-case alphanumeric)");
      } else if (!value.isString() && !value.isInt() && !value.isBool()) {
        in.fail(in.pathOf(key), "an extension attribute must be a string, integer or boolean");
      }
    }
  }
  if (!problems.empty()) {
    std::string message;
    for (const auto& p : problems) {
      message += (message.empty() ? "" : "; ") + p;
    }
    return fail(ErrorKind::kInvalid, message, "decode CloudEvent");
  }
  return out;
}

CloudEvent toCloudEvent(std::string type, std::string source, std::string subject, Json data, std::string id,
                        std::string time) {
  return CloudEvent{std::move(type),
                    std::move(source),
                    id.empty() ? newEventId() : std::move(id),
                    time.empty() ? log::nowRfc3339() : std::move(time),
                    std::move(subject),
                    std::move(data)};
}

namespace {

std::string digest16(const Json& data) {
  return sha256Hex(data.dump()).substr(0, 16);
}

}  // namespace

std::string bundleStateEventId(std::string_view workspace, std::string_view bundle, std::string_view state,
                               uint64_t replaced_revision, const Json& data) {
  return "summary/bundle/" + std::string(workspace) + "/" + std::string(bundle) + "/" + std::string(state) + "/" +
         std::to_string(replaced_revision) + "/" + digest16(data);
}

std::string clusterEventId(std::string_view workspace, std::string_view cluster, std::string_view what,
                           const Json& data) {
  return "cluster/" + std::string(workspace) + "/" + std::string(cluster) + "/" + std::string(what) + "/" +
         digest16(data);
}

CloudEvent toCloudEvent(const CommitEvent& event, std::string_view source) {
  return toCloudEvent(cloudEventType("gitrepo", event.deleted ? "deleted" : "commit"), std::string(source),
                      event.workspace + "/" + event.gitrepo, encode(event), event.id, event.time);
}

CloudEvent toCloudEvent(const BundleEvent& event, std::string_view source) {
  return toCloudEvent(cloudEventType("bundle", event.deleted ? "deleted" : (event.error ? "failed" : "rendered")),
                      std::string(source), event.workspace + "/" + event.bundle, encode(event), event.id, event.time);
}

CloudEvent toCloudEvent(const DeployEvent& event, std::string_view source) {
  return toCloudEvent(cloudEventType("bundledeployment", event.remove ? "deleted" : "scheduled"), std::string(source),
                      event.cluster + "/" + event.bundle, encode(event), event.id, event.time);
}

CloudEvent toCloudEvent(const StatusEvent& event, std::string_view source) {
  return toCloudEvent(cloudEventType("bundledeployment", event.state), std::string(source),
                      event.cluster + "/" + event.bundle, encode(event), event.id, event.time);
}

}  // namespace flotilla::events
