// flotilla/core/yaml.h
//
// YAML <-> Json conversion at one boundary, so the rest of the code never touches yaml-cpp types.
// Parsing resolves plain scalars with the YAML 1.2 core schema (null, bool, int, float, string); quoted
// scalars are always strings. Errors name the source (file) and line.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla {

//! Bounds on what one YAML text may cost. Aliases let a small text stand for a huge tree ("billion laughs": a
//! 1 MB file of nested aliases expanded to ~1 GB), so the conversion counts what it builds, aliases included.
struct YamlLimits {
  size_t max_input_bytes = 64u << 20;  //!< a larger document is rejected before parsing
  size_t max_nodes = 2'000'000;        //!< nodes built, every alias expanded ("billion laughs" of short scalars)
  //! Bytes built (scalar and key text plus one per node), every alias expanded. The effective limit is this or
  //! the input's own size, whichever is larger: a text without aliases never builds more bytes than it holds, so
  //! only alias expansion can exceed it. 16 MiB is far above any fleet.yaml, values file or chart manifest
  //! that uses anchors (they share a few blocks) and bounds a bomb to tens of MB of memory instead of gigabytes.
  size_t max_expanded_bytes = 16u << 20;
  //! Nesting of maps and sequences. Kubernetes objects stay under ~30 levels; a self-referencing anchor
  //! (`&a [*a]`) would otherwise recurse until the stack overflows.
  size_t max_depth = 256;
  //! Also fill YamlDocument::lines. Off by default: it costs a map entry per node, which matters for large
  //! rendered manifests but not for the config files (GitRepo, fleet.yaml) whose errors must name a line.
  bool record_lines = false;
};

//! A parsed document and the line (1-based) where it starts in its source.
struct YamlDocument {
  Json value;
  int line = 1;
  //! Field path (see yamlKeyPath/yamlIndexPath, e.g. "spec.targets[0].name") -> 1-based line of that key or
  //! sequence item. Empty unless YamlLimits::record_lines was set.
  std::map<std::string, int, std::less<>> lines;

  //! The line of `path`, or of its nearest recorded ancestor, or the document's first line.
  [[nodiscard]] int lineOf(std::string_view path) const;
};

//! Appends an object key to a field path: "spec" + "helm" -> "spec.helm". Keys that would make the path
//! ambiguous (empty, or containing '.', '[', ']', '"' or whitespace) are quoted:
//! metadata.labels["app.kubernetes.io/name"].
std::string yamlKeyPath(std::string_view parent, std::string_view key);
//! Appends a sequence index to a field path: "spec.targets" + 0 -> "spec.targets[0]".
std::string yamlIndexPath(std::string_view parent, size_t index);
//! The parent of a path built by the two functions above ("" for a top-level key).
std::string yamlParentPath(std::string_view path);

//! Parses every document of a multi-document YAML stream. Empty and comment-only documents are dropped. Scalars and
//! keys that are not UTF-8 are refused (they would become JSON strings no reader accepts).
//! `source` names the input in errors ("path/to/file.yaml").
Result<std::vector<YamlDocument>> parseYamlDocuments(std::string_view text, std::string_view source,
                                                     const YamlLimits& limits = {});

//! Parses a single-document YAML stream (an empty stream yields null).
Result<Json> parseYaml(std::string_view text, std::string_view source, const YamlLimits& limits = {});

//! Emits `value` as block-style YAML with keys in sorted order (canonical).
std::string toYaml(const Json& value);

}  // namespace flotilla
