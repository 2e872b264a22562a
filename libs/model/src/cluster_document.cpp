// A hub admin's Cluster document (cluster_document.h): Fleet's strict Cluster codec, narrowed to the fields the hub
// acts on, and the effective cluster (registration overlaid by the document).
#include "flotilla/model/cluster_document.h"

#include <array>
#include <string>

#include "flotilla/core/codec.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/labels.h"

namespace flotilla::model {

namespace {

//! The spec fields a Cluster document may set; Fleet's other Cluster spec fields configure Fleet's agent
//! deployment, which Flotilla does not do.
constexpr std::array<std::string_view, 2> kImplementedSpecFields = {"paused", "templateValues"};

bool implemented(std::string_view field) {
  for (auto known : kImplementedSpecFields) {
    if (known == field) {
      return true;
    }
  }
  return false;
}

//! Records every problem the generic codec does not know about: not-implemented spec fields and a name that is
//! not a cluster name.
void narrow(codec::Problems& problems, const Json& document, const Cluster& cluster) {
  if (!isDns1123Label(cluster.metadata.name)) {
    problems.fail("metadata.name", "invalid cluster name \"" + cluster.metadata.name +
                                       "\": at most 63 lower-case letters, digits and '-', starting and ending with "
                                       "a letter or digit (a DNS-1123 label, as agents register)");
  }
  const Json* spec = document.find("spec");
  if (spec == nullptr || !spec->isObject()) {
    return;
  }
  for (const auto& [field, value] : spec->asObject()) {
    if (!value.isNull() && !implemented(field)) {
      problems.fail(yamlKeyPath("spec", field),
                    "not implemented: a Cluster document on the Flotilla hub sets metadata.labels, "
                    "metadata.annotations, spec.paused and spec.templateValues (agents are not deployed by the hub)");
    }
  }
}

Result<Cluster> decodeNarrowed(const Json& document, std::string_view source, const YamlDocument* yaml) {
  auto decoded = yaml != nullptr ? decodeResource(*yaml, source) : decodeResource(document, source);
  if (!decoded.ok()) {
    return fail(decoded.error());
  }
  if (!std::holds_alternative<Cluster>(*decoded)) {
    codec::Problems problems(source, yaml);
    problems.fail("kind", "expected kind Cluster, got " + std::string(kindOf(*decoded)));
    return fail(problems.error());
  }
  Cluster cluster = std::get<Cluster>(std::move(decoded).value());
  codec::Problems problems(source, yaml);
  narrow(problems, document, cluster);
  if (problems.failed()) {
    return fail(problems.error());
  }
  cluster.status = {};  // the hub writes status; a document's is not an instruction
  return cluster;
}

}  // namespace

Result<Cluster> decodeClusterDocument(const Json& document, std::string_view source) {
  return decodeNarrowed(document, source, nullptr);
}

Result<Cluster> decodeClusterDocument(const YamlDocument& document, std::string_view source) {
  return decodeNarrowed(document.value, source, &document);
}

Cluster effectiveCluster(const Cluster& registration, const Cluster* document) {
  Cluster out = registration;
  if (document == nullptr) {
    return out;
  }
  out.metadata.ns = document->metadata.ns;
  for (const auto& [key, value] : document->metadata.labels) {
    out.metadata.labels[key] = value;
  }
  for (const auto& [key, value] : document->metadata.annotations) {
    out.metadata.annotations[key] = value;
  }
  out.spec.paused = document->spec.paused;
  out.spec.template_values = document->spec.template_values;
  return out;
}

}  // namespace flotilla::model
