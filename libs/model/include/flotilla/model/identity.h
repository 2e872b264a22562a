// flotilla/model/identity.h
//
// How Flotilla names things (DESIGN.md "Identity"): bundle IDs follow Fleet's naming so a Fleet user's
// dependsOn names keep working; manifest and deployment IDs are content hashes, so identical content and
// options are recognised as "already applied" anywhere in the pipeline.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "flotilla/core/json.h"

namespace flotilla::model {

//! Helm's limit for release names, which Fleet also applies to bundle names.
inline constexpr size_t kMaxHelmReleaseNameLength = 53;

//! Fleet's names.HelmReleaseName: "/" -> "-"; if the result had upper-case or characters outside [a-zA-Z0-9-],
//! "-<first 8 hex of md5(that string)>" is appended before lower-casing and replacing each run of such characters
//! with "-" (dash runs collapse, edge dashes are trimmed). Longer than 53 -> first 47 chars + "-" + 5 hex of md5
//! (no double dash). If nothing valid is left, 24 hex of md5 of the input.
std::string helmReleaseName(std::string_view name);

//! The bundle ID of the bundle at `path` in GitRepo `gitrepo`: `fleetyaml_name` verbatim when set (as Fleet does),
//! else helmReleaseName(clean(gitrepo + "/" + path)), where clean is Go's path cleaning ("." and empty segments
//! dropped, ".." resolved, no trailing slash). "one" + "/multi-cluster/hello-world" -> "one-multi-cluster-hello-world".
std::string bundleID(std::string_view gitrepo, std::string_view path, std::string_view fleetyaml_name = {});

//! sha256 hex of the canonical rendered content (64 lower-case hex chars).
std::string manifestID(std::string_view canonical_content);

//! manifestID + ":" + sha256 hex of options.dump() (canonical JSON). The caller chooses which options take part;
//! any change to them redeploys.
std::string deploymentID(std::string_view manifest_id, const Json& options);

}  // namespace flotilla::model
