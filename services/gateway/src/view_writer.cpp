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
  return fleetPath(target.ns, target.plural, target.name);
}

}  // namespace

void Gateway::Core::writeView(const std::string& key, WriterState& writer) {
  TokenBucket& bucket = writer.bucket;
  std::map<std::string, View>& written = writer.views;
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
      writer.retries.succeeded(key);
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
      writer.retries.succeeded(key);
      written[key] = std::move(*view);
      return;
    }
  }
  if (stopping) {
    return;
  }
  metrics.view(target.kind, "failed");
  written.erase(key);
  retryLater(key, writer, sent.error());
}

namespace {

//! The write key of a view as listed from the API server, from its labels; "" when it lacks them.
std::string viewKeyOf(const Json& view) {
  const Json* labels = view.at({"metadata", "labels"});
  const auto label = [&](const char* name) { return labels != nullptr ? labels->getString(name) : std::string(); };
  if (view.getString("kind") == "Bundle") {
    const Json* ns = view.at({"metadata", "namespace"});
    const Json* name = view.at({"metadata", "name"});
    return ns != nullptr && name != nullptr ? writeKey(kBundleWrite, ns->asString() + "/" + name->asString()) : "";
  }
  const std::string cluster = label("fleet.cattle.io/cluster");
  const std::string ws = label("fleet.cattle.io/bundle-namespace");
  const std::string bundle = label("fleet.cattle.io/bundle-name");
  if (cluster.empty() || ws.empty() || bundle.empty()) {
    return {};
  }
  return writeKey(kDeploymentWrite, cluster + "/" + ws + "/" + bundle);
}

}  // namespace

void Gateway::Core::sweepViews(WriterState& writer) {
  // Every record watch has delivered what KV holds, so a view with no facts is one whose records went while no
  // gateway ran: its write key is queued, and writeView deletes it (spending the write budget).
  std::vector<std::string> stale;
  for (const char* kind : {"Bundle", "BundleDeployment"}) {
    auto views = kube->list(kFleetApiVersion, kind, "");
    if (!views.ok()) {
      metrics.viewSweep("failed");
      retryLater(std::string(kViewSweep), writer, views.error());
      return;
    }
    std::lock_guard lock(mutex);
    for (const auto& view : views->items) {
      const std::string key = viewKeyOf(view);
      if (key.empty()) {
        const Json* meta = view.find("metadata");
        log::warn("a BundleDeployment view without Fleet's labels is left alone",
                  {{"name", meta != nullptr ? meta->getString("namespace") + "/" + meta->getString("name") : ""}});
        continue;
      }
      const std::string id = key.substr(key.find('|') + 1);
      if (key.starts_with(kBundleWrite) ? !bundles.count(id) : !deployments.count(id)) {
        stale.push_back(key);
      }
    }
  }
  metrics.viewSweep("done");
  writer.retries.succeeded(std::string(kViewSweep));
  log::info("views swept", {{"stale", std::to_string(stale.size())}});
  for (const auto& key : stale) {
    queueWrite(key);
  }
}

}  // namespace flotilla::gateway
