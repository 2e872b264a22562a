// The object names the KV records refer to (ObjectGc's ReferenceSource for `sources` and `manifests`). Records are
// read as plain JSON for the fields that name objects: a record of an older or newer layout still protects what it
// names, and one that is not JSON at all fails the pass (nothing is deleted on a guess).
#include <string_view>

#include "flotilla/core/json.h"
#include "flotilla/service/kv_entries.h"
#include "flotilla/service/object_gc.h"

namespace flotilla::service {
namespace {

using Names = std::set<std::string>;

//! Calls `each` with every current value of `bucket` under `filter`; an empty bucket is no values.
Status forEachValue(bus::KeyValue& bucket, std::string_view filter,
                    const std::function<Status(const std::string& key, const Json& value)>& each) {
  return forEachEntry(bucket, filter, [&](const bus::KvEntry& entry) -> Status {
    auto json = Json::parse(entry.value);
    if (!json.ok()) {
      return fail(ErrorKind::kInvalid, bucket.bucket() + "/" + entry.key + " is not JSON: " + json.error().message,
                  "objectReferences");
    }
    return each(entry.key, *json);
  });
}

void addString(Names& names, const Json* value) {
  if (value != nullptr && value->isString() && !value->asString().empty()) {
    names.insert(value->asString());
  }
}

void addField(Names& names, const Json& record, std::string_view field) {
  addString(names, record.find(field));
}

//! The manifest of a deploymentID "<manifestID>:<options hash>".
void addDeploymentManifest(Names& names, const Json& record, std::string_view field) {
  const Json* value = record.find(field);
  if (value != nullptr && value->isString() && !value->asString().empty()) {
    const std::string& id = value->asString();
    names.insert(id.substr(0, id.find(':')));
  }
}

//! Every manifestID of a variants table (read from the store).
Status addVariantManifests(Names& names, bus::ObjectStore& manifests, const std::string& variants_object) {
  auto text = manifests.get(variants_object);
  if (!text.ok()) {
    // Gone: nothing it named needs protecting on its behalf (its bundle record names what it deploys).
    return text.error().kind == ErrorKind::kNotFound ? Status() : Status(fail(text.error()));
  }
  auto json = Json::parse(*text);
  if (!json.ok()) {
    return fail(ErrorKind::kInvalid, "manifests/" + variants_object + " is not JSON: " + json.error().message,
                "manifestReferences");
  }
  if (const Json* variants = json->find("variants"); variants != nullptr && variants->isArray()) {
    for (const Json& variant : variants->asArray()) {
      if (variant.isObject()) {
        addField(names, variant, "manifestID");
      }
    }
  }
  return {};
}

}  // namespace

Result<std::set<std::string>> sourceReferences(const Hub& hub) {
  Names names;
  auto source_object = [&](const std::string&, const Json& record) -> Status {
    addField(names, record, "sourceObject");
    return {};
  };
  FLOTILLA_TRY(forEachValue(*hub.status, "gitrepo.>", source_object));
  FLOTILLA_TRY(forEachValue(*hub.status, "bundle-claim.>", source_object));
  FLOTILLA_TRY(forEachValue(*hub.bundles, ">", source_object));
  return names;
}

Result<std::set<std::string>> manifestReferences(const Hub& hub) {
  Names names;
  Names variants;
  FLOTILLA_TRY(forEachValue(*hub.bundles, ">", [&](const std::string&, const Json& record) -> Status {
    addField(names, record, "manifestID");
    if (const Json* last_good = record.find("lastGood"); last_good != nullptr && last_good->isObject()) {
      addField(names, *last_good, "manifestID");
      addField(variants, *last_good, "variantsObject");
      // Each targetCustomization's own manifest: a cluster that matches it later is deployed from it.
      if (const Json* customized = last_good->find("customizations"); customized != nullptr && customized->isArray()) {
        for (const Json& customization : customized->asArray()) {
          addField(names, customization, "manifestID");
        }
      }
    }
    return {};
  }));
  FLOTILLA_TRY(forEachValue(*hub.deployments, ">", [&](const std::string&, const Json& record) -> Status {
    addField(names, record, "manifestID");
    addDeploymentManifest(names, record, "deploymentID");
    addDeploymentManifest(names, record, "stagedDeploymentID");
    return {};
  }));
  FLOTILLA_TRY(forEachValue(*hub.status, "bundle-render.>", [&](const std::string&, const Json& record) -> Status {
    for (std::string_view field : {"manifestID", "lastGoodManifestID"}) {
      const Json* value = record.find(field);
      if (value != nullptr && value->isString() && value->asString().rfind("variants-", 0) == 0) {
        variants.insert(value->asString());  // a per-cluster bundle's status names its table
      } else {
        addString(names, value);
      }
    }
    return {};
  }));
  for (const std::string& table : variants) {
    names.insert(table);
    FLOTILLA_TRY(addVariantManifests(names, *hub.manifests, table));
  }
  return names;
}

}  // namespace flotilla::service
