// Writing the Bundle and BundleDeployment views (views.h): server-side apply of the object (labels, spec) when it
// changed, a merge patch of its status subresource, a delete once its facts are gone. Every request spends a token.
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/kube/errors.h"
#include "gateway_core.h"

namespace flotilla::gateway {
namespace {

//! A view key's parts: kind, namespace and name of the CR, and the id of its facts.
struct ViewTarget {
  std::string kind;
  std::string plural;
  std::string ns;
  std::string name;
  std::string id;
};

ViewTarget targetOf(const std::string& key) {
  const std::string id = key.substr(key.find('|') + 1);
  const std::vector<std::string> parts = split(id, '/');
  if (key.starts_with(kBundleWrite)) {
    return {.kind = "Bundle", .plural = "bundles", .ns = parts.at(0), .name = parts.at(1), .id = id};
  }
  return {.kind = "BundleDeployment",
          .plural = "bundledeployments",
          .ns = parts.at(1),
          .name = bundleDeploymentName(parts.at(0), parts.at(2)),
          .id = id};
}

std::string objectPath(const ViewTarget& target) {
  return "/apis/fleet.cattle.io/v1alpha1/namespaces/" + kube::urlEncode(target.ns) + "/" + target.plural + "/" +
         kube::urlEncode(target.name);
}

}  // namespace

void Gateway::Core::writeView(const std::string& key, TokenBucket& bucket, std::map<std::string, View>& written) {
  const ViewTarget target = targetOf(key);
  std::optional<View> view;
  {
    std::lock_guard lock(mutex);
    if (target.kind == "Bundle") {
      if (auto found = bundles.find(target.id); found != bundles.end()) {
        view = bundleView(found->second);
      }
    } else if (auto found = deployments.find(target.id); found != deployments.end()) {
      view = bundleDeploymentView(found->second);
    }
  }
  auto last = written.find(key);
  Status sent;
  if (!view) {
    // Deleted even when this process never wrote it: a view of a bundle that went while no gateway ran.
    if (!spendToken(bucket)) {
      return;
    }
    sent = kube->remove("fleet.cattle.io/v1alpha1", target.kind, target.ns, target.name);
    if (sent.ok() || sent.error().kind == ErrorKind::kNotFound) {
      metrics.view(target.kind, "deleted");
      written.erase(key);
      return;
    }
  } else if (last != written.end() && last->second == *view) {
    metrics.view(target.kind, "unchanged");
    return;
  } else {
    if (last == written.end() || last->second.object != view->object) {
      if (!spendToken(bucket)) {
        return;
      }
      auto applied = kube->apply(view->object, {.field_manager = "flotilla-gateway", .force = true});
      sent = applied.ok() ? Status{} : Status(fail(applied.error()));
    }
    if (sent.ok() && spendToken(bucket)) {
      auto patched = kube->request("PATCH", objectPath(target) + "/status",
                                   Json::obj({{"status", view->status}}).dump(), "application/merge-patch+json");
      sent = patched.ok() ? Status{} : Status(fail(patched.error()));
    }
    if (sent.ok()) {
      metrics.view(target.kind, "written");
      written[key] = std::move(*view);
      return;
    }
  }
  if (stopping) {
    return;
  }
  metrics.view(target.kind, "failed");
  log::warn("cannot write a view; trying again",
            {{"kind", target.kind}, {"name", target.ns + "/" + target.name}, {"error", sent.error().describe()}});
  written.erase(key);
  sleepFor(options.retry_base);
  queueWrite(key);
}

}  // namespace flotilla::gateway
