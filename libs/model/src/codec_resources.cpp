// Decoding and encoding of the resource kinds and of fleet.yaml.
#include "flotilla/core/util.h"
#include "flotilla/model/codec.h"
#include "resource_fields.h"

namespace flotilla::model {

Duration GitRepoSpec::effectivePollingInterval() const {
  if (!polling_interval || polling_interval->count() == 0) {
    return kDefaultPollingInterval;
  }
  return *polling_interval;
}

std::string_view kindOf(const Resource& resource) {
  static constexpr std::string_view kKinds[] = {"GitRepo", "Cluster", "ClusterGroup", "Bundle", "BundleDeployment"};
  return kKinds[resource.index()];
}

const ObjectMeta& metaOf(const Resource& resource) {
  return std::visit([](const auto& r) -> const ObjectMeta& { return r.metadata; }, resource);
}

ObjectMeta& metaOf(Resource& resource) {
  return std::visit([](auto& r) -> ObjectMeta& { return r.metadata; }, resource);
}

namespace {

// A stored Bundle's spec has the internal fields fleet.yaml must not set; every other spec is fields(v, s).
constexpr auto kBundleSpec = [](auto& v, auto& s) { bundleSpecFields(v, s, true); };

// ---- dispatch ----

template <typename T, typename SpecFn>
Resource readKind(Reader& root, bool native, bool spec_required, SpecFn&& spec) {
  T out{};
  root.require("metadata");
  root.plain("metadata", out.metadata, kFields);
  if (spec_required) {
    root.require("spec");
  }
  root.plain("spec", out.spec, spec);
  if (native) {
    root.plain("status", out.status, kFields);
  } else {
    root.skip("status");  // Fleet's status describes a Fleet installation, not this one
  }
  return out;
}

std::optional<Resource> readByKind(Reader& root, std::string_view kind, bool native) {
  if (kind == "GitRepo") {
    return readKind<GitRepo>(root, native, true, kFields);
  }
  if (kind == "Cluster") {
    return readKind<Cluster>(root, native, false, kFields);
  }
  if (kind == "ClusterGroup") {
    return readKind<ClusterGroup>(root, native, false, kFields);
  }
  if (kind == "Bundle") {
    return readKind<Bundle>(root, native, false, kBundleSpec);
  }
  if (kind == "BundleDeployment") {
    return readKind<BundleDeployment>(root, native, false, kFields);
  }
  root.fail("kind", "unsupported kind \"" + std::string(kind) +
                        "\" (Flotilla reads GitRepo, Cluster, ClusterGroup, Bundle and BundleDeployment)");
  return std::nullopt;
}

Result<Resource> decodeDocument(const Json& document, std::string_view source, const YamlDocument* yaml) {
  codec::Problems problems(source, yaml);
  Reader root(problems, document, {});
  if (!root.ok()) {
    return fail(problems.error());
  }
  std::string api_version;
  std::string kind;
  root.require("apiVersion");
  root.str("apiVersion", api_version);
  root.require("kind");
  root.str("kind", kind);
  if (problems.failed()) {
    return fail(problems.error());
  }
  if (api_version != kFleetApiVersion && api_version != kFlotillaApiVersion) {
    root.fail("apiVersion", "unsupported apiVersion \"" + api_version + "\" (expected " +
                                std::string(kFleetApiVersion) + " or " + std::string(kFlotillaApiVersion) + ")");
    return fail(problems.error());
  }
  std::optional<Resource> out = readByKind(root, kind, api_version == kFlotillaApiVersion);
  if (!out) {
    return fail(problems.error());
  }
  root.finish();
  if (problems.failed()) {
    return fail(problems.error());
  }
  return std::move(*out);
}

template <typename T>
Result<T> decodeAs(const Json& document, std::string_view source, std::string_view expected_kind) {
  auto decoded = decodeDocument(document, source, nullptr);
  if (!decoded.ok()) {
    return fail(decoded.error());
  }
  if (!std::holds_alternative<T>(*decoded)) {
    codec::Problems problems(source);
    problems.fail("kind", "expected kind " + std::string(expected_kind) + ", got " + std::string(kindOf(*decoded)));
    return fail(problems.error());
  }
  return std::get<T>(std::move(decoded).value());
}

template <typename T, typename SpecFn>
Json encodeKind(const T& value, std::string_view api_version, std::string_view kind, SpecFn&& spec) {
  Json out = Json::obj({{"apiVersion", std::string(api_version)},
                        {"kind", std::string(kind)},
                        {"metadata", codec::encode(value.metadata, kFields)},
                        {"spec", codec::encode(value.spec, spec)}});
  Json status = codec::encode(value.status, kFields);
  if (status.size() != 0) {
    out["status"] = std::move(status);
  }
  return out;
}

Result<FleetYaml> decodeFleetYamlDocument(const Json& value, std::string_view source, const YamlDocument* yaml) {
  return codec::decode<FleetYaml>(value, {}, kFields, source, yaml);
}

}  // namespace

Result<Resource> decodeResource(const Json& document, std::string_view source) {
  return decodeDocument(document, source, nullptr);
}

Result<Resource> decodeResource(const YamlDocument& document, std::string_view source) {
  return decodeDocument(document.value, source, &document);
}

Result<std::vector<Resource>> decodeResources(std::string_view yaml_text, std::string_view source) {
  auto documents = parseYamlDocuments(yaml_text, source, YamlLimits{.record_lines = true});
  if (!documents.ok()) {
    return fail(documents.error());
  }
  std::vector<Resource> out;
  out.reserve(documents->size());
  for (const auto& document : *documents) {
    auto decoded = decodeDocument(document.value, source, &document);
    if (!decoded.ok()) {
      return fail(decoded.error());
    }
    out.push_back(std::move(decoded).value());
  }
  return out;
}

Result<GitRepo> decodeGitRepo(const Json& document, std::string_view source) {
  return decodeAs<GitRepo>(document, source, "GitRepo");
}
Result<Cluster> decodeCluster(const Json& document, std::string_view source) {
  return decodeAs<Cluster>(document, source, "Cluster");
}
Result<ClusterGroup> decodeClusterGroup(const Json& document, std::string_view source) {
  return decodeAs<ClusterGroup>(document, source, "ClusterGroup");
}
Result<Bundle> decodeBundle(const Json& document, std::string_view source) {
  return decodeAs<Bundle>(document, source, "Bundle");
}
Result<BundleDeployment> decodeBundleDeployment(const Json& document, std::string_view source) {
  return decodeAs<BundleDeployment>(document, source, "BundleDeployment");
}

Json encode(const GitRepo& value, std::string_view api_version) {
  return encodeKind(value, api_version, "GitRepo", kFields);
}
Json encode(const Cluster& value, std::string_view api_version) {
  return encodeKind(value, api_version, "Cluster", kFields);
}
Json encode(const ClusterGroup& value, std::string_view api_version) {
  return encodeKind(value, api_version, "ClusterGroup", kFields);
}
Json encode(const Bundle& value, std::string_view api_version) {
  return encodeKind(value, api_version, "Bundle", kBundleSpec);
}
Json encode(const BundleDeployment& value, std::string_view api_version) {
  return encodeKind(value, api_version, "BundleDeployment", kFields);
}
Json encodeResource(const Resource& value, std::string_view api_version) {
  return std::visit([&](const auto& r) { return encode(r, api_version); }, value);
}

Result<FleetYaml> decodeFleetYaml(std::string_view yaml_text, std::string_view source) {
  auto documents = parseYamlDocuments(yaml_text, source, YamlLimits{.record_lines = true});
  if (!documents.ok()) {
    return fail(documents.error());
  }
  if (documents->empty()) {
    return FleetYaml{};
  }
  if (documents->size() > 1) {
    return fail(ErrorKind::kInvalid,
                std::string(source) + ":" + std::to_string((*documents)[1].line) +
                    ": fleet.yaml must hold one YAML document, found " + std::to_string(documents->size()),
                std::string(source) + ":" + std::to_string((*documents)[1].line));
  }
  return decodeFleetYamlDocument(documents->front().value, source, &documents->front());
}

Result<FleetYaml> decodeFleetYamlValue(const Json& value, std::string_view source) {
  return decodeFleetYamlDocument(value, source, nullptr);
}

Json encode(const FleetYaml& value) {
  return codec::encode(value, kFields);
}

}  // namespace flotilla::model
