#include "flotilla/events/manifest.h"

#include "flotilla/events/subjects.h"
#include "reader.h"

namespace flotilla::events {

namespace {

constexpr auto kManifestRequestFields = [](auto& v, auto& s) {
  v.str("manifestID", s.manifest_id, true);
  v.count("offset", s.offset);
  v.str("workspace", s.workspace);
  v.str("bundle", s.bundle);
  v.count("generation", s.generation);
};

}  // namespace

std::string manifestSubject(std::string_view cluster) {
  return std::string(kManifestPrefix) + "." + escapeToken(cluster);
}

Json encode(const ManifestRequest& value) {
  return detail::encodeWith(value, kManifestRequestFields);
}

Result<ManifestRequest> parseManifestRequest(std::string_view data) {
  auto json = Json::parse(data);
  FLOTILLA_TRY(json);
  return detail::decodeWith<ManifestRequest>(*json, kManifestRequestFields);
}

}  // namespace flotilla::events
