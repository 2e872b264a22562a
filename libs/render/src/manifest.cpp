#include "flotilla/render/manifest.h"

#include <algorithm>

#include "flotilla/model/identity.h"

namespace flotilla::render {

std::string ObjectKey::describe() const {
  return api_version + "/" + kind + " " + (ns.empty() ? name : ns + "/" + name);
}

ObjectKey keyOf(const Json& object) {
  ObjectKey key;
  key.api_version = object.getString("apiVersion");
  key.kind = object.getString("kind");
  if (const Json* metadata = object.find("metadata"); metadata != nullptr) {
    key.ns = metadata->getString("namespace");
    key.name = metadata->getString("name");
  }
  return key;
}

Result<CanonicalManifest> canonicalize(std::vector<RenderedObject> objects, uint64_t max_bytes) {
  std::vector<std::pair<ObjectKey, RenderedObject*>> keyed;
  keyed.reserve(objects.size());
  for (auto& object : objects) {
    keyed.emplace_back(keyOf(object.object), &object);
  }
  // Stable on origin too, so a duplicate is always reported against the same (first) file.
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) {
      return a.first < b.first;
    }
    return std::tie(a.second->file, a.second->line) < std::tie(b.second->file, b.second->line);
  });
  for (size_t i = 1; i < keyed.size(); ++i) {
    if (keyed[i].first == keyed[i - 1].first) {
      const RenderedObject& second = *keyed[i].second;
      return fail(ErrorKind::kInvalid,
                  second.origin() + ": " + keyed[i].first.describe() + " is defined twice (also at " +
                      keyed[i - 1].second->origin() + ")",
                  second.origin());
    }
  }
  Json::Array array;
  array.reserve(keyed.size());
  for (auto& [key, object] : keyed) {
    array.push_back(std::move(object->object));
  }
  CanonicalManifest manifest;
  manifest.objects = array.size();
  manifest.text = Json(std::move(array)).dump();
  if (manifest.text.size() > max_bytes) {
    return fail(ErrorKind::kInvalid, "the rendered manifest is " + std::to_string(manifest.text.size()) +
                                         " bytes, more than the limit of " + std::to_string(max_bytes) + " bytes");
  }
  manifest.manifest_id = model::manifestID(manifest.text);
  return manifest;
}

}  // namespace flotilla::render
