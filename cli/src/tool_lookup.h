// cli/src/tool_lookup.h (private to the CLI)
//
// Where `flotilla render` finds helm and kustomize: the flag, else $FLOTILLA_TOOLS_DIR, else the .tools/bin of the
// source tree the binary was built from (where scripts/setup builds the pinned versions), else the directory of
// the flotilla binary itself (an image or install puts them side by side), else $PATH. So `flotilla render` right
// after scripts/setup uses the pinned tools without any environment set up.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flotilla::cli {

//! The outcome of a lookup.
struct ToolLocation {
  std::string path;                   //!< the executable found, or the bare name when none was found
  bool found = false;                 //!< false: `path` is only the name, and renderers needing it fail
  std::vector<std::string> searched;  //!< the places looked in, in order, for the error message
};

//! Finds the executable `name`; a non-empty `flag` (--helm-binary) is used as given and not searched for (a path in
//! it must be an executable file).
ToolLocation findTool(std::string_view name, const std::string& flag);

//! "helm was not found; searched: $FLOTILLA_TOOLS_DIR (not set), /src/.tools/bin, /usr/bin (next to flotilla),
//! $PATH (/usr/bin:/bin); build it with scripts/setup or pass --helm-binary".
std::string notFoundMessage(std::string_view name, const ToolLocation& location);

}  // namespace flotilla::cli
