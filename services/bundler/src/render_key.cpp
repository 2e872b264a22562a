// The render cache's key (render_key.h): the input set of each bundle directory of a commit, hashed.
#include "flotilla/bundler/render_key.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <system_error>

#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/model/codec.h"
#include "flotilla/render/external_renderers.h"

namespace flotilla::bundler {
namespace fs = std::filesystem;

namespace {

//! Appends `value` with its length in front, so no two different sequences of fields encode the same.
void field(std::string& out, std::string_view value) {
  out += std::to_string(value.size());
  out += ':';
  out += value;
}

//! True when `path` is `prefix` or lies under it ("" = the root, everything).
bool isUnder(std::string_view path, std::string_view prefix) {
  return prefix.empty() || path == prefix ||
         (path.size() > prefix.size() && path[prefix.size()] == '/' && startsWith(path, prefix));
}

std::string_view parentOf(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

std::string_view baseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

//! A bundle directory as a path prefix: "" for the root.
std::string prefixOf(const std::string& dir) {
  return dir == "." ? std::string() : dir;
}

//! `relative` resolved against the directory `dir` ("" = the root), "." and ".." folded; nullopt when it is
//! absolute or climbs out of the checkout (the renderers refuse both).
std::optional<std::string> resolve(std::string_view dir, std::string_view relative) {
  if (relative.empty() || relative.front() == '/') {
    return std::nullopt;
  }
  std::vector<std::string_view> parts;
  bool inside = true;
  for (std::string_view path : {dir, relative}) {
    for (size_t start = 0; start <= path.size();) {
      size_t end = path.find('/', start);
      end = end == std::string_view::npos ? path.size() : end;
      const std::string_view segment = path.substr(start, end - start);
      if (segment == "..") {
        inside = inside && !parts.empty();
        if (!parts.empty()) {
          parts.pop_back();
        }
      } else if (!segment.empty() && segment != ".") {
        parts.push_back(segment);
      }
      start = end + 1;
    }
  }
  if (!inside) {
    return std::nullopt;
  }
  std::string out;
  for (std::string_view part : parts) {
    out += out.empty() ? "" : "/";
    out += part;
  }
  return out;
}

//! The paths a file's text names that climb out of its directory: tokens (split on whitespace, quotes, commas,
//! brackets and braces) containing "../" or being "..", with a "file://" or "key:" prefix dropped.
std::vector<std::string_view> climbingPaths(std::string_view text) {
  constexpr std::string_view kSeparators = " \t\r\n\"'`,[]{}";
  std::vector<std::string_view> out;
  for (size_t start = text.find_first_not_of(kSeparators); start != std::string_view::npos;
       start = text.find_first_not_of(kSeparators, start)) {
    size_t end = text.find_first_of(kSeparators, start);
    end = end == std::string_view::npos ? text.size() : end;
    std::string_view token = text.substr(start, end - start);
    start = end;
    if (startsWith(token, "file://")) {
      token.remove_prefix(std::string_view("file://").size());
    } else if (const size_t colon = token.rfind(':'); colon != std::string_view::npos) {
      token.remove_prefix(colon + 1);
    }
    if (token.find("../") != std::string_view::npos || token == ".." || endsWith(token, "/..")) {
      out.push_back(token);
    }
  }
  return out;
}

bool mentionsRemote(std::string_view text) {
  return text.find("://") != std::string_view::npos || text.find("oci:") != std::string_view::npos;
}

//! What an entry names outside the commit.
enum class Remote {
  kNone,
  kChart,  //!< a chart or chart dependency from a repository: resolved to digests before the cache is asked
  kOther,  //!< something nothing resolves (a remote kustomize base, an oci:// dependency): no key
};

//! A fleet.yaml whose options (its own, a target's or a customization's) name a remote chart. Only decoded when it
//! mentions a URL at all, so a URL in helm values does not count; one that does not decode counts as kOther.
Remote fleetYamlRemote(std::string_view text, std::string_view path) {
  if (!mentionsRemote(text)) {
    return Remote::kNone;
  }
  auto fleet_yaml = model::decodeFleetYaml(text, path);
  if (!fleet_yaml.ok()) {
    return Remote::kOther;
  }
  auto remote = [](const model::BundleDeploymentOptions& options) {
    return options.helm && render::isRemoteChart(*options.helm);
  };
  const bool any = remote(fleet_yaml->spec.options) ||
                   std::any_of(fleet_yaml->spec.targets.begin(), fleet_yaml->spec.targets.end(),
                               [&](const auto& target) { return remote(target.options); }) ||
                   std::any_of(fleet_yaml->target_customizations.begin(), fleet_yaml->target_customizations.end(),
                               [&](const auto& target) { return remote(target.options); });
  return any ? Remote::kChart : Remote::kNone;
}

//! A Chart.yaml / requirements.yaml with a dependency from a repository (anything but file://), which `helm
//! dependency build` fetches: kChart for http(s) repositories (their index resolves it), kOther for the rest
//! (oci://). Only parsed when it mentions a URL (a chart's `home:` does not count).
Remote chartRemote(std::string_view text, std::string_view path) {
  if (!mentionsRemote(text)) {
    return Remote::kNone;
  }
  auto chart = parseYaml(text, path);
  if (!chart.ok() || !chart->isObject()) {
    return Remote::kOther;
  }
  const Json* dependencies = chart->find("dependencies");
  if (dependencies == nullptr || dependencies->isNull()) {
    return Remote::kNone;
  }
  if (!dependencies->isArray()) {
    return Remote::kOther;
  }
  Remote out = Remote::kNone;
  for (const Json& dependency : dependencies->asArray()) {
    const Json* repository = dependency.isObject() ? dependency.find("repository") : nullptr;
    if (repository == nullptr || !repository->isString() || startsWith(repository->asString(), "file://") ||
        !mentionsRemote(repository->asString())) {
      continue;
    }
    const std::string& url = repository->asString();
    if (!startsWith(url, "http://") && !startsWith(url, "https://")) {
      return Remote::kOther;
    }
    out = Remote::kChart;
  }
  return out;
}

//! One file or symlink of the archive, with what the keys need from it.
struct Entry {
  std::string_view path;
  std::string_view kind;                //!< the file's mode, or "symlink"
  std::string digest;                   //!< sha256 of the content, or the link's target
  std::vector<std::string> references;  //!< the paths it names outside its directory, resolved
  Remote remote = Remote::kNone;        //!< names something outside the commit
};

Entry fileEntry(const source::File& file) {
  Entry entry{.path = file.path, .kind = file.mode, .digest = sha256Hex(file.content)};
  const std::string_view name = baseName(file.path);
  const bool fleet_yaml = name == "fleet.yaml" || name == "fleet.yml";
  const bool kustomization = name == "kustomization.yaml" || name == "kustomization.yml" || name == "Kustomization";
  const bool chart = name == "Chart.yaml" || name == "requirements.yaml";
  if (!fleet_yaml && !kustomization && !chart) {
    return entry;
  }
  for (std::string_view token : climbingPaths(file.content)) {
    if (auto resolved = resolve(parentOf(file.path), token)) {
      entry.references.push_back(std::move(*resolved));
    }
  }
  entry.remote = fleet_yaml      ? fleetYamlRemote(file.content, file.path)
                 : kustomization ? (mentionsRemote(file.content) ? Remote::kOther : Remote::kNone)
                                 : chartRemote(file.content, file.path);
  return entry;
}

//! The archive's entries sorted by path, and which lie under no bundle directory: what every key of a commit reads.
class InputSets {
 public:
  InputSets(const source::Archive& archive, const std::vector<render::BundleDir>& dirs) {
    for (const auto& file : archive.files) {
      entries_.push_back(fileEntry(file));
    }
    for (const auto& link : archive.symlinks) {
      Entry entry{.path = link.path, .kind = "symlink", .digest = link.target};
      if (auto resolved = resolve(parentOf(link.path), link.target)) {
        entry.references.push_back(std::move(*resolved));
      }
      entries_.push_back(std::move(entry));
    }
    std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.path < b.path; });
    std::set<std::string, std::less<>> prefixes;
    for (const auto& dir : dirs) {
      prefixes.insert(prefixOf(dir.path));
    }
    for (size_t index = 0; index < entries_.size(); ++index) {
      if (!underAny(prefixes, entries_[index].path)) {
        shared_.push_back(index);
      }
    }
  }

  //! The key of `dir`: its input set (render_key.h) closed over references, hashed after `commit_inputs`.
  [[nodiscard]] RenderKey keyOf(const render::BundleDir& dir, std::string_view commit_inputs) const {
    std::vector<char> in(entries_.size(), 0);
    std::vector<std::string> pending = {prefixOf(dir.path)};
    for (size_t index : shared_) {
      take(index, in, pending);
    }
    std::set<std::string> visited;
    while (!pending.empty()) {
      std::string prefix = std::move(pending.back());
      pending.pop_back();
      if (visited.insert(prefix).second) {
        forEachUnder(prefix, [&](size_t index) { take(index, in, pending); });
      }
    }
    std::string encoded;
    field(encoded, commit_inputs);
    field(encoded, dir.path);
    field(encoded, dir.fleet_yaml);
    std::string_view resolve_file;
    for (size_t index = 0; index < entries_.size(); ++index) {
      if (in[index] == 0) {
        continue;
      }
      const Entry& entry = entries_[index];
      if (entry.remote == Remote::kOther) {
        return RenderKey{.reason = "remote", .file = std::string(entry.path)};
      }
      if (entry.remote == Remote::kChart && resolve_file.empty()) {
        resolve_file = entry.path;
      }
      field(encoded, entry.path);
      field(encoded, entry.kind);
      field(encoded, entry.digest);
    }
    return RenderKey{.key = sha256Hex(encoded), .file = std::string(resolve_file), .resolve = !resolve_file.empty()};
  }

 private:
  static bool underAny(const std::set<std::string, std::less<>>& prefixes, std::string_view path) {
    if (prefixes.count(std::string_view()) > 0) {
      return true;
    }
    for (size_t slash = path.find('/'); slash != std::string_view::npos; slash = path.find('/', slash + 1)) {
      if (prefixes.count(path.substr(0, slash)) > 0) {
        return true;
      }
    }
    return false;
  }

  void take(size_t index, std::vector<char>& in, std::vector<std::string>& pending) const {
    if (in[index] != 0) {
      return;
    }
    in[index] = 1;
    pending.insert(pending.end(), entries_[index].references.begin(), entries_[index].references.end());
  }

  //! Calls `each` with the index of every entry at or under `prefix` (a contiguous run of the sorted entries).
  template <typename Each>
  void forEachUnder(const std::string& prefix, Each each) const {
    auto byPath = [](const Entry& entry, std::string_view path) { return entry.path < path; };
    auto it = std::lower_bound(entries_.begin(), entries_.end(), std::string_view(prefix), byPath);
    for (; it != entries_.end() && (prefix.empty() || startsWith(it->path, prefix)); ++it) {
      if (isUnder(it->path, prefix)) {
        each(static_cast<size_t>(it - entries_.begin()));
      }
    }
  }

  std::vector<Entry> entries_;
  std::vector<size_t> shared_;
};

}  // namespace

std::string rendererIdentity(const std::vector<std::string>& executables, const render::RenderLimits& limits) {
  std::string out;
  for (const auto& path : executables) {
    std::error_code canonical_ec;
    std::error_code size_ec;
    std::error_code time_ec;
    const fs::path target = fs::weakly_canonical(path, canonical_ec);
    const auto size = fs::file_size(path, size_ec);
    const auto mtime = fs::last_write_time(path, time_ec);
    field(out, path);
    field(out, canonical_ec ? std::string() : target.string());
    field(out, size_ec || time_ec ? std::string("unreadable")
                                  : std::to_string(size) + "/" + std::to_string(mtime.time_since_epoch().count()));
  }
  field(out, std::to_string(limits.max_file_bytes));
  field(out, std::to_string(limits.max_output_bytes));
  return out;
}

std::string commitRenderInputs(std::string_view renderer_identity, const events::CommitEvent& commit,
                               const model::GitRepo& gitrepo) {
  std::string out;
  field(out, "flotilla-render-key/" + std::to_string(kRenderKeyVersion));
  field(out, renderer_identity);
  for (const std::string* value : {&commit.workspace, &commit.gitrepo, &commit.repo, &commit.branch}) {
    field(out, *value);
  }
  field(out, std::to_string(commit.paths.size()));
  for (const auto& path : commit.paths) {
    field(out, path);
  }
  field(out, std::to_string(commit.force_sync_generation));
  field(out, gitrepo.metadata.name);
  field(out, gitrepo.metadata.ns);
  Json labels = Json::object();
  for (const auto& [key, value] : gitrepo.metadata.labels) {
    labels[key] = value;
  }
  field(out, labels.dump());
  const Json encoded = model::encode(gitrepo);
  const Json* spec = encoded.find("spec");
  field(out, spec != nullptr ? spec->dump() : std::string());
  return out;
}

std::vector<RenderKey> renderKeys(const source::Archive& archive, const std::vector<render::BundleDir>& dirs,
                                  std::string_view commit_inputs) {
  const InputSets sets(archive, dirs);
  std::vector<RenderKey> keys;
  keys.reserve(dirs.size());
  for (const auto& dir : dirs) {
    keys.push_back(sets.keyOf(dir, commit_inputs));
  }
  return keys;
}

}  // namespace flotilla::bundler
