#include "flotilla/render/discovery.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>

#include <fnmatch.h>

#include "flotilla/core/util.h"
#include "flotilla/source/archive.h"

namespace flotilla::render {
namespace fs = std::filesystem;

namespace {

enum class EntryType { kFile, kDir, kSymlink, kOther };

struct Entry {
  std::string name;
  EntryType type = EntryType::kOther;
};

std::string absolute(const std::string& root, std::string_view relative) {
  return relative.empty() || relative == "." ? root : root + "/" + std::string(relative);
}

//! The entries of a directory, sorted by name, without following symlinks.
Result<std::vector<Entry>> listDir(const std::string& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot list " + dir + ": " + ec.message(), "directory_iterator");
  }
  std::vector<Entry> entries;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) {
      return fail(ErrorKind::kInternal, "cannot list " + dir + ": " + ec.message(), "directory_iterator");
    }
    auto status = it->symlink_status(ec);
    if (ec) {
      return fail(ErrorKind::kInternal, "cannot stat " + it->path().string() + ": " + ec.message(), "symlink_status");
    }
    Entry entry{it->path().filename().string(), EntryType::kOther};
    if (fs::is_symlink(status)) {
      entry.type = EntryType::kSymlink;
    } else if (fs::is_directory(status)) {
      entry.type = EntryType::kDir;
    } else if (fs::is_regular_file(status)) {
      entry.type = EntryType::kFile;
    }
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return entries;
}

bool isManifestName(std::string_view name) {
  return endsWith(name, ".yaml") || endsWith(name, ".yml") || endsWith(name, ".json");
}

bool isFleetYamlName(std::string_view name) {
  return name == "fleet.yaml" || name == "fleet.yml";
}

bool hasGlobCharacters(std::string_view pattern) {
  return pattern.find_first_of("*?[") != std::string_view::npos;
}

bool isRegularFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(fs::symlink_status(path, ec));
}

bool isRealDirectory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(fs::symlink_status(path, ec));
}

//! Fleet's hasSubDirectoryWithResourcesAndWithoutFleetYaml: manifests in `dir` or in a subdirectory that is not
//! a bundle of its own.
Result<bool> hasLooseManifests(const std::string& root, const std::string& dir) {
  if (!findFleetYaml(root, dir).empty()) {
    return false;
  }
  auto entries = listDir(absolute(root, dir));
  if (!entries.ok()) {
    return fail(entries.error());
  }
  for (const auto& entry : *entries) {
    if (entry.name.front() == '.') {
      continue;
    }
    if ((entry.type == EntryType::kFile || entry.type == EntryType::kSymlink) && isManifestName(entry.name)) {
      return true;
    }
    if (entry.type == EntryType::kDir) {
      auto nested = hasLooseManifests(root, joinRelative(dir, entry.name));
      if (!nested.ok() || *nested) {
        return nested;
      }
    }
  }
  return false;
}

//! Directories (relative to root) matching a glob pattern; only depths the pattern can match are visited.
Result<std::vector<std::string>> globDirectories(const std::string& root, const std::string& pattern) {
  const size_t depth = static_cast<size_t>(std::count(pattern.begin(), pattern.end(), '/')) + 1;
  std::vector<std::string> matches;
  std::vector<std::pair<std::string, size_t>> stack = {{".", 0}};
  while (!stack.empty()) {
    auto [dir, level] = stack.back();
    stack.pop_back();
    auto entries = listDir(absolute(root, dir));
    if (!entries.ok()) {
      return fail(entries.error());
    }
    for (const auto& entry : *entries) {
      if (entry.type != EntryType::kDir) {
        continue;
      }
      std::string relative = joinRelative(dir, entry.name);
      if (level + 1 == depth) {
        if (fnmatch(pattern.c_str(), relative.c_str(), FNM_PATHNAME | FNM_PERIOD) == 0) {
          matches.push_back(relative);
        }
      } else {
        stack.emplace_back(relative, level + 1);
      }
    }
  }
  std::sort(matches.begin(), matches.end());
  return matches;
}

//! Adds the bundles under `base` to `found` (Fleet's walk in CreateBundles).
Status walkBase(const std::string& root, const std::string& base, std::set<std::string>& found) {
  bool root_bundle = !findFleetYaml(root, base).empty();
  if (!root_bundle) {
    auto loose = hasLooseManifests(root, base);
    if (!loose.ok()) {
      return fail(loose.error());
    }
    root_bundle = *loose;
  }
  if (root_bundle) {
    found.insert(base);
  }
  std::vector<std::string> stack = {base};
  while (!stack.empty()) {
    std::string dir = stack.back();
    stack.pop_back();
    auto entries = listDir(absolute(root, dir));
    if (!entries.ok()) {
      return fail(entries.error());
    }
    for (const auto& entry : *entries) {
      if (entry.type != EntryType::kDir || entry.name.front() == '.') {
        continue;
      }
      std::string relative = joinRelative(dir, entry.name);
      if (!findFleetYaml(root, relative).empty()) {
        found.insert(relative);
      }
      stack.push_back(relative);
    }
  }
  return {};
}

std::string trimTrailingBlanks(std::string line) {
  // Fleet trims trailing blanks unless the last one is escaped with a backslash.
  size_t end = line.size();
  while (end > 0 && (line[end - 1] == ' ' || line[end - 1] == '\t' || line[end - 1] == '\r')) {
    --end;
  }
  if (end < line.size() && end > 0 && line[end - 1] == '\\') {
    ++end;
  }
  line.resize(end);
  return line;
}

struct WalkContext {
  const std::string& root;
  const std::string bundle_path;
  std::set<std::string> excluded;  //!< relative to root
  bool skip_overlays = true;
  std::vector<std::string> files;
};

Status collectFrom(WalkContext& ctx, const std::string& dir, std::vector<std::vector<std::string>>& ignores) {
  auto own = readFleetIgnore(absolute(ctx.root, dir));
  if (!own.ok()) {
    return fail(own.error());
  }
  ignores.push_back(std::move(own).value());
  auto pop = [&ignores] { ignores.pop_back(); };
  auto ignored = [&ignores](std::string_view name, bool is_dir) {
    return std::any_of(ignores.begin(), ignores.end(),
                       [&](const auto& patterns) { return fleetIgnoreMatches(patterns, name, is_dir); });
  };
  auto entries = listDir(absolute(ctx.root, dir));
  if (!entries.ok()) {
    pop();
    return fail(entries.error());
  }
  const bool at_bundle_root = dir == ctx.bundle_path;
  for (const auto& entry : *entries) {
    if (entry.name.front() == '.') {
      continue;
    }
    const std::string relative = joinRelative(dir, entry.name);
    if (entry.type == EntryType::kDir) {
      if (ignored(entry.name, true) || (at_bundle_root && ctx.skip_overlays && entry.name == "overlays")) {
        continue;
      }
      // A subdirectory with its own fleet.yaml is another bundle; one with a Chart.yaml is a chart Fleet leaves
      // out of raw bundles.
      if (!findFleetYaml(ctx.root, relative).empty() || isRegularFile(absolute(ctx.root, relative) + "/Chart.yaml")) {
        continue;
      }
      if (auto status = collectFrom(ctx, relative, ignores); !status.ok()) {
        pop();
        return status;
      }
      continue;
    }
    if (entry.type != EntryType::kFile && entry.type != EntryType::kSymlink) {
      continue;
    }
    if (!isManifestName(entry.name) || ignored(entry.name, false) || ctx.excluded.count(relative) > 0 ||
        (at_bundle_root && isFleetYamlName(entry.name))) {
      continue;
    }
    if (entry.type == EntryType::kSymlink) {
      auto resolved = source::resolveInside(ctx.root, relative);
      if (!resolved.ok()) {
        pop();
        return fail(ErrorKind::kInvalid, "symbolic link " + relative + " points outside the repository checkout",
                    relative);
      }
      if (isRealDirectory(*resolved)) {
        continue;  // links to directories are not followed
      }
      if (!isRegularFile(*resolved)) {
        pop();
        return fail(ErrorKind::kInvalid, "symbolic link " + relative + " does not point to a file", relative);
      }
    }
    ctx.files.push_back(relative);
  }
  pop();
  return {};
}

}  // namespace

std::string cleanRelative(std::string_view path) {
  std::vector<std::string> parts;
  for (auto& segment : split(path, '/')) {
    if (segment.empty() || segment == ".") {
      continue;
    }
    if (segment == ".." && !parts.empty() && parts.back() != "..") {
      parts.pop_back();
      continue;
    }
    parts.push_back(std::move(segment));
  }
  std::string out;
  for (const auto& part : parts) {
    out += (out.empty() ? "" : "/") + part;
  }
  return out.empty() ? std::string(".") : out;
}

std::string joinRelative(std::string_view dir, std::string_view name) {
  return cleanRelative(std::string(dir) + "/" + std::string(name));
}

std::string normalizePathPattern(std::string_view pattern) {
  std::string out = trim(pattern);
  bool changed = true;
  while (changed) {
    changed = false;
    while (startsWith(out, "./")) {
      out.erase(0, 2);
      changed = true;
    }
    while (!out.empty() && out.front() == '/') {
      out.erase(0, 1);
      changed = true;
    }
  }
  while (!out.empty() && out.back() == '/') {
    out.pop_back();
  }
  return out == "." ? std::string() : out;
}

bool isHiddenPath(std::string_view relative) {
  for (const auto& segment : split(relative, '/')) {
    if (!segment.empty() && segment.front() == '.' && segment != ".") {
      return true;
    }
  }
  return false;
}

std::string findFleetYaml(const std::string& root, std::string_view dir) {
  for (const char* name : {"fleet.yaml", "fleet.yml"}) {
    std::string relative = joinRelative(dir, name);
    if (isRegularFile(absolute(root, relative))) {
      return relative;
    }
  }
  return {};
}

Result<std::vector<BundleDir>> discoverBundles(const std::string& root, const std::vector<std::string>& patterns) {
  std::vector<std::string> bases;
  std::vector<std::string> normalized;
  normalized.reserve(patterns.size());
  for (const auto& pattern : patterns) {
    normalized.push_back(normalizePathPattern(pattern));
  }
  if (normalized.empty()) {
    normalized.emplace_back();
  }
  for (const auto& pattern : normalized) {
    if (pattern.empty()) {
      bases.emplace_back(".");
    } else if (hasGlobCharacters(pattern)) {
      auto matches = globDirectories(root, pattern);
      if (!matches.ok()) {
        return fail(matches.error());
      }
      bases.insert(bases.end(), matches->begin(), matches->end());
    } else if (source::isSafeRelativePath(pattern) && isRealDirectory(absolute(root, pattern))) {
      bases.push_back(pattern);
    }
  }
  std::set<std::string> found;
  for (const auto& base : bases) {
    FLOTILLA_TRY(walkBase(root, base, found));
  }
  std::vector<BundleDir> bundles;
  bundles.reserve(found.size());
  for (const auto& path : found) {
    bundles.push_back(BundleDir{path, findFleetYaml(root, path)});
  }
  return bundles;
}

Result<std::vector<std::string>> readFleetIgnore(const std::string& dir) {
  const std::string path = dir + "/.fleetignore";
  if (!isRegularFile(path)) {
    return std::vector<std::string>{};
  }
  auto text = readFile(path);
  if (!text.ok()) {
    return fail(ErrorKind::kInternal, "cannot read " + path + ": " + text.error().message, "readFile");
  }
  std::vector<std::string> patterns;
  for (auto& line : split(*text, '\n')) {
    std::string pattern = trimTrailingBlanks(std::move(line));
    if (pattern.empty() || pattern.front() == '#') {
      continue;
    }
    patterns.push_back(std::move(pattern));
  }
  return patterns;
}

bool fleetIgnoreMatches(const std::vector<std::string>& patterns, std::string_view name, bool is_dir) {
  const std::string base(name);
  for (const auto& pattern : patterns) {
    // "dir/*" (anything before "/*") names a directory to skip as a whole.
    auto slash_star = pattern.find("/*");
    if (slash_star != std::string::npos && slash_star > 0) {
      if (is_dir && pattern.substr(0, pattern.size() - 2) == base && endsWith(pattern, "/*")) {
        return true;
      }
      continue;
    }
    // "dir/" (.gitignore's form, which .fleetignore users write) matches directories only.
    if (pattern.size() > 1 && pattern.back() == '/') {
      std::string dir_pattern = pattern.substr(0, pattern.size() - 1);
      if (is_dir && fnmatch(dir_pattern.c_str(), base.c_str(), FNM_PATHNAME) == 0) {
        return true;
      }
      continue;
    }
    if (fnmatch(pattern.c_str(), base.c_str(), FNM_PATHNAME) == 0) {
      return true;
    }
  }
  return false;
}

Result<std::vector<std::string>> collectManifestFiles(const std::string& root, std::string_view bundle_path,
                                                      const FileSelection& selection) {
  WalkContext ctx{
      root, bundle_path.empty() ? std::string(".") : std::string(bundle_path), {}, selection.skip_overlays, {}};
  for (const auto& exclude : selection.extra_excludes) {
    ctx.excluded.insert(joinRelative(ctx.bundle_path, normalizePathPattern(exclude)));
  }
  std::vector<std::vector<std::string>> ignores;
  FLOTILLA_TRY(collectFrom(ctx, ctx.bundle_path, ignores));
  std::sort(ctx.files.begin(), ctx.files.end());
  return std::move(ctx.files);
}

}  // namespace flotilla::render
