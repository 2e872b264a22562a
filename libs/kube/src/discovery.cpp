// Discovery: the REST mapping of apiVersion + kind, from aggregated discovery when the server offers it.
#include "client_internal.h"
#include "flotilla/core/log.h"
#include "flotilla/kube/client.h"

namespace flotilla::kube {
namespace {

using detail::groupVersionPath;

// Aggregated discovery (one request for every group) when the server has it, the classic documents otherwise.
constexpr const char* kDiscoveryAccept =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

std::string mappingKey(std::string_view group, std::string_view version, std::string_view kind) {
  return std::string(group) + "/" + std::string(version) + "/" + std::string(kind);
}

//! "v1" for the core group, "group/version" otherwise (Helm's .Capabilities.APIVersions spelling).
std::string groupVersion(const std::string& group, const std::string& version) {
  return group.empty() ? version : group + "/" + version;
}

}  // namespace

void KubeClient::addLegacyResourcesLocked(const Json& resource_list, const std::string& group,
                                          const std::string& version) {
  const Json* resources = resource_list.find("resources");
  if (resources == nullptr || !resources->isArray()) {
    return;
  }
  const std::string gv_prefix = groupVersion(group, version) + "/";
  served_.insert(groupVersion(group, version));
  for (const auto& r : resources->asArray()) {
    std::string name = r.getString("name");
    std::string kind = r.getString("kind");
    if (!kind.empty()) {
      served_.insert(gv_prefix + kind);  // subresources too ("deployments/scale" -> apps/v1/Scale), as Helm lists them
    }
    if (name.empty() || kind.empty() || name.find('/') != std::string::npos) {
      continue;  // subresources ("deployments/status") share the kind of their parent
    }
    mappings_.try_emplace(
        mappingKey(group, version, kind),
        ResourceMapping{
            .group = group, .version = version, .resource = name, .kind = kind, .namespaced = r.getBool("namespaced")});
  }
}

void KubeClient::addServedLocked(const std::string& group_version, const Json& resources) {
  served_.insert(group_version);
  auto add_kind = [&](const Json& entry) {
    const Json* kind = entry.at({"responseKind", "kind"});
    if (kind != nullptr && kind->isString() && !kind->asString().empty()) {
      served_.insert(group_version + "/" + kind->asString());
    }
  };
  for (const auto& r : resources.asArray()) {
    add_kind(r);
    const Json* subresources = r.find("subresources");
    for (size_t i = 0; subresources != nullptr && subresources->isArray() && i < subresources->size(); ++i) {
      add_kind(subresources->asArray()[i]);
    }
  }
}

void KubeClient::addAggregatedLocked(const Json& discovery_list) {
  const Json* items = discovery_list.find("items");
  if (items == nullptr || !items->isArray()) {
    return;
  }
  for (const auto& item : items->asArray()) {
    const Json* name = item.at({"metadata", "name"});
    std::string group = name != nullptr && name->isString() ? name->asString() : std::string();
    const Json* versions = item.find("versions");
    if (versions == nullptr || !versions->isArray()) {
      continue;
    }
    for (const auto& v : versions->asArray()) {
      std::string version = v.getString("version");
      const Json* resources = v.find("resources");
      if (version.empty() || resources == nullptr || !resources->isArray()) {
        continue;
      }
      addServedLocked(groupVersion(group, version), *resources);
      for (const auto& r : resources->asArray()) {
        const Json* kind = r.at({"responseKind", "kind"});
        std::string resource = r.getString("resource");
        if (kind == nullptr || !kind->isString() || kind->asString().empty() || resource.empty()) {
          continue;
        }
        mappings_.try_emplace(mappingKey(group, version, kind->asString()),
                              ResourceMapping{.group = group,
                                              .version = version,
                                              .resource = resource,
                                              .kind = kind->asString(),
                                              .namespaced = r.getString("scope") == "Namespaced"});
      }
    }
  }
}

Status KubeClient::loadGroupVersionLocked(const std::string& group, const std::string& version) {
  auto list = requestJson("GET", groupVersionPath(group, version));
  FLOTILLA_TRY(list);
  addLegacyResourcesLocked(*list, group, version);
  return okStatus();
}

Status KubeClient::loadDiscoveryLocked() {
  mappings_.clear();
  served_.clear();
  for (const char* root : {"/api", "/apis"}) {
    auto json = sendForJson(HttpRequest{.target = config_.base_path + root, .headers = {{"Accept", kDiscoveryAccept}}});
    FLOTILLA_TRY(json);
    if (json->getString("kind") == "APIGroupDiscoveryList") {
      addAggregatedLocked(*json);
      continue;
    }
    // Classic discovery: /api lists core versions, /apis lists groups; each group-version has its own document.
    if (const Json* versions = json->find("versions"); versions != nullptr && versions->isArray()) {
      for (const auto& v : versions->asArray()) {
        if (v.isString()) {
          FLOTILLA_TRY(loadGroupVersionLocked("", v.asString()));
        }
      }
    }
    if (const Json* groups = json->find("groups"); groups != nullptr && groups->isArray()) {
      for (const auto& g : groups->asArray()) {
        const Json* gvs = g.find("versions");
        for (size_t i = 0; gvs != nullptr && gvs->isArray() && i < gvs->size(); ++i) {
          FLOTILLA_TRY(loadGroupVersionLocked(g.getString("name"), gvs->asArray()[i].getString("version")));
        }
      }
    }
  }
  discovery_loaded_ = true;
  return okStatus();
}

Status KubeClient::refreshDiscovery() {
  std::lock_guard lock(discovery_mutex_);
  discovery_loaded_ = false;
  return loadDiscoveryLocked();
}

Result<std::vector<std::string>> KubeClient::servedApiVersions() {
  std::lock_guard lock(discovery_mutex_);
  discovery_loaded_ = false;
  FLOTILLA_TRY(loadDiscoveryLocked());
  return std::vector<std::string>(served_.begin(), served_.end());
}

Result<ResourceMapping> KubeClient::mapping(std::string_view api_version, std::string_view kind) {
  auto gv = splitApiVersion(api_version);
  FLOTILLA_TRY(gv);
  if (kind.empty()) {
    return fail(ErrorKind::kInvalid, "kind is empty");
  }
  const auto& [group, version] = *gv;
  std::string key = mappingKey(group, version, kind);
  std::lock_guard lock(discovery_mutex_);
  if (!discovery_loaded_) {
    FLOTILLA_TRY(loadDiscoveryLocked());
  }
  if (auto it = mappings_.find(key); it != mappings_.end()) {
    return it->second;
  }
  // A miss may be a kind that appeared after discovery was loaded (a CRD just established): ask its
  // group-version once before giving up.
  log::info("kube kind not in discovery cache; refreshing its group-version",
            {{"apiVersion", std::string(api_version)}, {"kind", std::string(kind)}});
  metrics_->counter("kube_discovery_refreshes_total", "discovery refreshes caused by an unknown kind").Increment();
  auto refreshed = loadGroupVersionLocked(group, version);
  if (!refreshed.ok()) {
    if (refreshed.error().kind == ErrorKind::kNotFound) {
      return fail(ErrorKind::kNotFound,
                  "apiVersion " + std::string(api_version) + " is not served by " + config_.server,
                  refreshed.error().where);
    }
    return fail(refreshed.error());
  }
  if (auto it = mappings_.find(key); it != mappings_.end()) {
    return it->second;
  }
  return fail(ErrorKind::kNotFound,
              "kind " + std::string(kind) + " is not served in apiVersion " + std::string(api_version) + " by " +
                  config_.server,
              "discovery");
}

}  // namespace flotilla::kube
