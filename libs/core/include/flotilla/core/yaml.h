// flotilla/core/yaml.h
//
// YAML <-> Json conversion at one boundary, so the rest of the code never touches yaml-cpp types.
// Parsing resolves plain scalars with the YAML 1.2 core schema (null, bool, int, float, string); quoted
// scalars are always strings. Errors name the source (file) and line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla {

struct YamlLimits {
  size_t max_input_bytes = 64u << 20;  //!< a larger document is rejected before parsing
  size_t max_nodes = 2'000'000;        //!< bounds alias expansion ("billion laughs")
};

//! A parsed document and the line (1-based) where it starts in its source.
struct YamlDocument {
  Json value;
  int line = 1;
};

//! Parses every document of a multi-document YAML stream. Empty and comment-only documents are dropped.
//! `source` names the input in errors ("path/to/file.yaml").
Result<std::vector<YamlDocument>> parseYamlDocuments(std::string_view text, std::string_view source,
                                                     const YamlLimits& limits = {});

//! Parses a single-document YAML stream (an empty stream yields null).
Result<Json> parseYaml(std::string_view text, std::string_view source, const YamlLimits& limits = {});

//! Emits `value` as block-style YAML with keys in sorted order (canonical).
std::string toYaml(const Json& value);

}  // namespace flotilla
