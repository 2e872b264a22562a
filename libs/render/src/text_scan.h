// Hand-written scanners for text that comes from repositories and from helm's stderr. std::regex (libstdc++)
// backtracks recursively, so a long `helm.chart` value overflowed the stack; these run in one linear pass with
// constant stack. Private to libs/render.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace flotilla::render::detail {

//! A chart name in a repository: [A-Za-z0-9_][A-Za-z0-9_.-]*.
bool isChartName(std::string_view name);

//! A file location helm names in an error: "<dir>/<more dirs>/<file>.(yaml|yml|tpl|txt|json):<line>".
struct SourceLocation {
  std::string path;  //!< "mychart/templates/x.yaml"
  std::string line;  //!< "12"
};

//! The first location in `text` (the leftmost whose path ends right before ":<digits>"), if any. The path is a
//! run of [A-Za-z0-9_.-] segments joined by '/', with at least two segments.
std::optional<SourceLocation> findSourceLocation(std::string_view text);

}  // namespace flotilla::render::detail
