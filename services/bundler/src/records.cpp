#include "flotilla/bundler/records.h"

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"

namespace flotilla::bundler {

std::string renderStatusKey(std::string_view workspace, std::string_view bundle) {
  return events::bundleRenderStatusKey(workspace, bundle);
}

std::string eventDigest(const events::BundleEvent& event) {
  events::BundleEvent copy = event;
  copy.id.clear();
  copy.time.clear();
  return sha256Hex(events::encode(copy).dump()).substr(0, 16);
}

std::string eventState(const events::BundleEvent& event) {
  if (event.deleted) {
    return "deleted";
  }
  if (event.error) {
    return "error";
  }
  return event.manifest_id.empty() ? event.variants_object : event.manifest_id;
}

std::string bundleMsgId(const events::BundleEvent& event) {
  return events::bundleMsgId(event.workspace, event.bundle, event.commit, eventState(event)) + "/" + eventDigest(event);
}

std::string rerenderMsgId(const events::BundleEvent& event, uint64_t replaced_revision) {
  return bundleMsgId(event) + "/rerender-" + std::to_string(replaced_revision);
}

void stampEvent(events::BundleEvent& event, std::optional<uint64_t> replaced_revision) {
  event.id = replaced_revision ? rerenderMsgId(event, *replaced_revision) : bundleMsgId(event);
  event.time = log::nowRfc3339();
}

HelmRelease helmReleaseOf(const events::BundleEvent& event, std::string_view renderer) {
  if (renderer != "helm") {
    return {};
  }
  const Json* pinned = event.options.at({"helm", "releaseName"});
  if (pinned != nullptr && pinned->isString() && !pinned->asString().empty()) {
    return HelmRelease{pinned->asString(), true};
  }
  return HelmRelease{event.bundle, false};
}

}  // namespace flotilla::bundler
