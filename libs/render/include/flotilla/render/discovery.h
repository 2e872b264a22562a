// flotilla/render/discovery.h
//
// Which directories of a checkout are bundles, and which files of a bundle are its manifests — Fleet's rules
// (`fleet apply`, internal/cmd/cli/apply and internal/bundlereader), read off an extracted source archive:
//
//   * Each GitRepo path is a glob (leading "/" and "./" ignored; "", "." and "/" mean the repository root); it
//     selects the directories it matches. No paths means the root.
//   * Under each selected directory (the base), every directory holding a fleet.yaml (or fleet.yml) is a bundle.
//     The base itself is a bundle when it holds a fleet.yaml, or when it or a subdirectory without fleet.yaml
//     holds manifest files (*.yaml, *.yml, *.json). So a path with no fleet.yaml anywhere under it is one bundle.
//   * A bundle's manifest files are the *.yaml/*.yml/*.json files under its directory, except: fleet.yaml itself,
//     hidden files and directories, entries a .fleetignore excludes, subdirectories that hold a fleet.yaml (their
//     own bundle) or a Chart.yaml (a chart, which Fleet leaves out of raw bundles), the `overlays/` directory
//     (only used through yaml.overlays) and Helm values files named in fleet.yaml.
//   * .fleetignore: one pattern per line (blank lines and "#" comments skipped, trailing blanks trimmed unless
//     escaped); a pattern applies to the directory holding the file and everything below it, and is matched with
//     shell globbing against an entry's base name; "name/*" excludes the directory "name". Like Fleet, no "**"
//     and no "!" negation.
//
// Symbolic links are never followed out of the checkout: a link to a file is read only if it resolves inside the
// checkout (source::resolveInside), else it is a bad-input error naming the link; links to directories are not
// descended into.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"

namespace flotilla::render {

//! A directory that becomes one bundle.
struct BundleDir {
  std::string path;        //!< relative to the checkout root, "/"-separated; "." for the root itself
  std::string fleet_yaml;  //!< relative path of its fleet.yaml / fleet.yml, "" when it has none

  bool operator==(const BundleDir&) const = default;
};

//! A GitRepo path with "./", leading "/" and trailing "/" removed; "" for the repository root.
std::string normalizePathPattern(std::string_view pattern);

//! True if `relative` is hidden (any segment starts with '.'), which Fleet skips.
bool isHiddenPath(std::string_view relative);

//! The fleet.yaml (or fleet.yml) directly in `dir` (relative to root, "." for the root), as a relative path, or ""
//! when there is none. Regular files only.
std::string findFleetYaml(const std::string& root, std::string_view dir);

//! The bundles under `patterns` in the checkout at `root`, sorted by path, each once. A pattern that matches
//! nothing contributes nothing (the caller may log it). kInternal only for file system failures.
Result<std::vector<BundleDir>> discoverBundles(const std::string& root, const std::vector<std::string>& patterns);

//! What collectManifestFiles leaves out besides Fleet's fixed rules.
struct FileSelection {
  std::vector<std::string> extra_excludes;  //!< paths relative to the bundle dir (helm valuesFiles)
  bool skip_overlays = true;                //!< leave out `overlays/` at the bundle root
};

//! The manifest files of the bundle at `bundle_path` (relative to root), relative to root and sorted. kInvalid
//! (naming the file) for a symlink that leaves the checkout or a malformed .fleetignore pattern.
Result<std::vector<std::string>> collectManifestFiles(const std::string& root, std::string_view bundle_path,
                                                      const FileSelection& selection = {});

//! The patterns of the .fleetignore in `dir` (absolute), empty when there is none.
Result<std::vector<std::string>> readFleetIgnore(const std::string& dir);

//! True if `name` (a base name) is excluded by one of `patterns`; `is_dir` enables the "name/*" form.
bool fleetIgnoreMatches(const std::vector<std::string>& patterns, std::string_view name, bool is_dir);

//! "a/b" + "c" -> "a/b/c"; "." + "c" -> "c"; "a" + "./x/../y" -> "a/y" (see cleanRelative).
std::string joinRelative(std::string_view dir, std::string_view name);

//! Drops empty and "." segments and resolves ".." against earlier segments ("" -> "."). Leading ".." stay (callers
//! still check containment with source::resolveInside).
std::string cleanRelative(std::string_view path);

}  // namespace flotilla::render
