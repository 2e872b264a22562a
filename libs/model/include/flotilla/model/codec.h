// flotilla/model/codec.h
//
// Decoding and encoding of resources, fleet.yaml and the shared option structs. Decoding is strict: an unknown
// field, a value of the wrong type or an invalid value is kInvalid, and the message names the field path and,
// for YAML input, the file and line: "fleet.yaml:12: spec.helm.chart: expected a string, got a number". Up to
// ten problems are reported at once, separated by "; ". Error::where holds "file:line" of the first one.
//
// Both fleet.cattle.io/v1alpha1 and flotilla.io/v1alpha1 are accepted. Status is Flotilla's own: it is decoded
// strictly for flotilla.io documents and ignored for fleet.cattle.io ones (an object exported from a Fleet
// cluster carries Fleet's status, which means nothing here). A `null` value is the same as an absent field.
// Encoding writes flotilla.io/v1alpha1 by default, omits fields at their zero value, always writes set optional
// fields, and includes status; decode(encode(x)) == x.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/core/yaml.h"
#include "flotilla/model/options.h"
#include "flotilla/model/resources.h"

namespace flotilla::model {

//! Decodes one resource document, dispatching on apiVersion and kind. `source` names the input in errors.
Result<Resource> decodeResource(const Json& document, std::string_view source = {});
//! Same, with field lines from a YAML document parsed with YamlLimits::record_lines.
Result<Resource> decodeResource(const YamlDocument& document, std::string_view source);
//! Parses a YAML stream (any number of documents) and decodes every document. An unknown kind or apiVersion
//! is an error naming the document's line.
Result<std::vector<Resource>> decodeResources(std::string_view yaml_text, std::string_view source);

//! Typed decoders: like decodeResource, but the document must be of that kind.
Result<GitRepo> decodeGitRepo(const Json& document, std::string_view source = {});
Result<Cluster> decodeCluster(const Json& document, std::string_view source = {});
Result<ClusterGroup> decodeClusterGroup(const Json& document, std::string_view source = {});
Result<Bundle> decodeBundle(const Json& document, std::string_view source = {});
Result<BundleDeployment> decodeBundleDeployment(const Json& document, std::string_view source = {});

//! Encoders. `api_version` may be kFleetApiVersion to export for Fleet (status is still written).
Json encode(const GitRepo& value, std::string_view api_version = kFlotillaApiVersion);
Json encode(const Cluster& value, std::string_view api_version = kFlotillaApiVersion);
Json encode(const ClusterGroup& value, std::string_view api_version = kFlotillaApiVersion);
Json encode(const Bundle& value, std::string_view api_version = kFlotillaApiVersion);
Json encode(const BundleDeployment& value, std::string_view api_version = kFlotillaApiVersion);
Json encodeResource(const Resource& value, std::string_view api_version = kFlotillaApiVersion);

//! Decodes fleet.yaml text (one document; empty text is an empty FleetYaml). `source` is usually the file's path
//! in the repository ("apps/web/fleet.yaml").
Result<FleetYaml> decodeFleetYaml(std::string_view yaml_text, std::string_view source);
//! Decodes an already parsed fleet.yaml.
Result<FleetYaml> decodeFleetYamlValue(const Json& value, std::string_view source = {});
//! The fleet.yaml form of `value` (round-trips through decodeFleetYaml).
Json encode(const FleetYaml& value);

//! Option structs on their own, as carried by bus events (BundleEvent.options, DeployEvent.options).
Result<BundleDeploymentOptions> decodeOptions(const Json& value, std::string_view path = "options");
Json encodeOptions(const BundleDeploymentOptions& value);
Result<BundleTarget> decodeBundleTarget(const Json& value, std::string_view path = "target");
Json encodeBundleTarget(const BundleTarget& value);
Result<GitTarget> decodeGitTarget(const Json& value, std::string_view path = "target");
Json encodeGitTarget(const GitTarget& value);
Result<BundleRef> decodeBundleRef(const Json& value, std::string_view path = "dependsOn");
Json encodeBundleRef(const BundleRef& value);
Result<RolloutStrategy> decodeRolloutStrategy(const Json& value, std::string_view path = "rolloutStrategy");
Json encodeRolloutStrategy(const RolloutStrategy& value);
//! The JSON form of a label selector, strictly checked ({matchLabels, matchExpressions}).
Result<LabelSelector> decodeSelector(const Json& value, std::string_view path = "selector");

}  // namespace flotilla::model
