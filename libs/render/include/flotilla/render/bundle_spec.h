// flotilla/render/bundle_spec.h
//
// Everything of a BundleEvent that is not rendered content: Fleet's bundlereader rules for what a bundle takes
// from its fleet.yaml and its GitRepo (internal/bundlereader/read.go), and Fleet's option merge for
// targetCustomizations (internal/cmd/controller/options Merge). Pure functions; the handler calls them per bundle.
//
//   labels     GitRepo metadata.labels, then fleet.cattle.io/repo-name=<gitrepo>, then fleet.yaml labels (last wins)
//   options    fleet.yaml's inline options, then from the GitRepo: serviceAccount (when set), namespace (=
//              spec.targetNamespace, when set; also forced on every customization), keepResources, deleteNamespace
//              (when true), correctDrift (when enabled), and forceSyncGeneration (always the GitRepo's)
//   paused     fleet.yaml paused || GitRepo paused
//   targets    fleet.yaml overrideTargets when set, else the GitRepo's targets, else [{name: default, clusterGroup:
//              default}] (Fleet's default)
//   customizations  fleet.yaml `targets` then `targetCustomizations`, unnamed ones called target%03d by position,
//              each with Merge(defaults, its options)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/events/payloads.h"
#include "flotilla/model/options.h"
#include "flotilla/model/resources.h"

namespace flotilla::render {

//! The label Fleet puts on every bundle of a GitRepo (and dependsOn selectors may use).
inline constexpr std::string_view kRepoNameLabel = "fleet.cattle.io/repo-name";

//! Fleet's options.Merge(base, custom): strings override when set ("-" clears), helm values deep-merge, helm
//! flags OR, overlays append, comparePatches/valuesFrom/downstreamResources merge by key, keepResources ORs,
//! correctDrift replaces, namespace labels/annotations merge.
model::BundleDeploymentOptions mergeOptions(const model::BundleDeploymentOptions& base,
                                            const model::BundleDeploymentOptions& custom);

//! A bundle's default options: fleet.yaml's with the GitRepo's overrides (see the file comment).
model::BundleDeploymentOptions defaultOptions(const model::FleetYaml& fleet_yaml, const model::GitRepo& gitrepo,
                                              int64_t force_sync_generation);

//! One targetCustomizations entry with its name filled in and its merged options.
struct Customization {
  std::string name;
  model::BundleTarget target;              //!< as written (options included)
  model::BundleDeploymentOptions options;  //!< Merge(defaults, target.options), GitRepo targetNamespace forced
};

//! fleet.yaml's targets and targetCustomizations, in order.
std::vector<Customization> customizations(const model::FleetYaml& fleet_yaml,
                                          const model::BundleDeploymentOptions& defaults,
                                          const model::GitRepo& gitrepo);

//! The matcher part of a target, as BundleEvent.customizations[].target carries it.
Json targetMatcher(const model::BundleTarget& target);

//! The bundle's labels (see the file comment).
model::Labels bundleLabels(const model::FleetYaml& fleet_yaml, const model::GitRepo& gitrepo);

//! The allow-list of targets (see the file comment), encoded as GitTargets.
Json bundleTargets(const model::FleetYaml& fleet_yaml, const model::GitRepo& gitrepo);

//! The options that change what a renderer produces (helm, kustomize, yaml), canonical JSON: two customizations
//! with the same key share one render.
std::string renderKey(const model::BundleDeploymentOptions& options);

}  // namespace flotilla::render
