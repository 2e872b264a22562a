#include "tool_lookup.h"

#include <filesystem>
#include <optional>

#include <unistd.h>

#include "flotilla/core/util.h"

namespace flotilla::cli {

namespace {

namespace fs = std::filesystem;

bool isExecutable(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

//! The directory holding the running binary (Linux: /proc/self/exe), if it can be read.
std::optional<fs::path> binaryDirectory() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec || self.empty()) {
    return std::nullopt;
  }
  return self.parent_path();
}

struct Place {
  std::string label;                  //!< how the error names it
  std::vector<fs::path> directories;  //!< where to look
};

std::vector<Place> placesToSearch() {
  std::vector<Place> places;
  const std::string tools_dir = envOr("FLOTILLA_TOOLS_DIR", "");
  if (!tools_dir.empty()) {
    places.push_back({"$FLOTILLA_TOOLS_DIR (" + tools_dir + ")", {fs::path(tools_dir)}});
  } else {
    places.push_back({"$FLOTILLA_TOOLS_DIR (not set)", {}});
  }
#ifdef FLOTILLA_SOURCE_TOOLS_DIR
  places.push_back({std::string(FLOTILLA_SOURCE_TOOLS_DIR) + " (the source tree's pinned tools)",
                    {fs::path(FLOTILLA_SOURCE_TOOLS_DIR)}});
#endif
  if (auto dir = binaryDirectory()) {
    places.push_back({dir->string() + " (next to flotilla)", {*dir}});
  }
  const std::string path = envOr("PATH", "");
  Place path_place{"$PATH (" + path + ")", {}};
  for (const auto& entry : path.empty() ? std::vector<std::string>() : split(path, ':')) {
    path_place.directories.emplace_back(entry.empty() ? "." : entry);
  }
  places.push_back(std::move(path_place));
  return places;
}

}  // namespace

ToolLocation findTool(std::string_view name, const std::string& flag) {
  ToolLocation location{.path = flag.empty() ? std::string(name) : flag};
  if (!flag.empty()) {
    // A bare name is left to the renderer's own $PATH search; a path must be there.
    location.found = flag.find('/') == std::string::npos || isExecutable(flag);
    if (!location.found) {
      location.searched.push_back("--" + std::string(name) + "-binary " + flag + " (not an executable file)");
    }
    return location;
  }
  for (const auto& place : placesToSearch()) {
    location.searched.push_back(place.label);
    for (const auto& directory : place.directories) {
      if (fs::path candidate = directory / name; isExecutable(candidate)) {
        location.path = candidate.string();
        location.found = true;
        return location;
      }
    }
  }
  return location;
}

std::string notFoundMessage(std::string_view name, const ToolLocation& location) {
  std::string searched;
  for (const auto& place : location.searched) {
    searched += (searched.empty() ? "" : ", ") + place;
  }
  return std::string(name) + " was not found; searched: " + searched + "; build it with scripts/setup or pass --" +
         std::string(name) + "-binary";
}

}  // namespace flotilla::cli
