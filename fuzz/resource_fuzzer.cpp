// Resource YAML (GitRepo, Cluster, ClusterGroup, Bundle, BundleDeployment) -> libs/model's strict codec, the way
// `flotilla apply -f` and the conformance suite read them: a stream of documents with field lines. Property: an
// accepted resource encodes (as flotilla.io and as fleet.cattle.io) to a form that decodes to the same resource,
// status aside for the Fleet form (its status is ignored on decode).
#include <cstddef>
#include <cstdint>
#include <variant>

#include "flotilla/core/yaml.h"
#include "flotilla/model/codec.h"
#include "fuzz_support.h"

namespace {

using flotilla::fuzz::check;
namespace model = flotilla::model;

void roundTrip(const model::Resource& resource) {
  flotilla::Json encoded = model::encodeResource(resource);
  auto again = model::decodeResource(encoded, "encoded");
  check(again.ok(), "an encoded resource decodes", again.ok() ? encoded.dump() : again.error().message);
  check(*again == resource, "an encoded resource decodes to the same value", encoded.dump());
  flotilla::Json fleet = model::encodeResource(resource, model::kFleetApiVersion);
  auto from_fleet = model::decodeResource(fleet, "fleet");
  check(from_fleet.ok(), "a resource encoded for Fleet decodes",
        from_fleet.ok() ? fleet.dump() : from_fleet.error().message);
  check(from_fleet->index() == resource.index(), "a resource encoded for Fleet keeps its kind", fleet.dump());
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls, by this name.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = flotilla::fuzz::asText(data, size);
  flotilla::YamlLimits limits;
  limits.max_nodes = 20'000;
  limits.max_expanded_bytes = 256u << 10;
  limits.record_lines = true;
  auto documents = flotilla::parseYamlDocuments(text, "fuzz.yaml", limits);
  if (!documents.ok()) {
    return 0;
  }
  for (const auto& document : *documents) {
    auto resource = model::decodeResource(document, "fuzz.yaml");
    if (resource.ok()) {
      roundTrip(*resource);
    } else {
      check(!resource.error().message.empty(), "a resource error has a message");
    }
  }
  return 0;
}
