#include "flotilla/poller/source_builder.h"

#include <map>

#include <unistd.h>

#include "flotilla/core/util.h"

namespace flotilla::poller {
namespace {

std::string parentDir(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

std::string baseName(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Result<std::string> readLink(const std::string& path) {
  std::string target(4096, '\0');
  ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
  if (n < 0) {
    return fail(ErrorKind::kInternal, "cannot read symlink " + path, "readlink");
  }
  target.resize(static_cast<size_t>(n));
  return target;
}

//! Reads the targets of the selected symlinks, one export per directory that holds any.
Result<std::map<std::string, std::string>> symlinkTargets(const git::Mirror& mirror, std::string_view commit,
                                                          const std::vector<git::TreeEntry>& entries,
                                                          const std::string& scratch_dir) {
  std::map<std::string, std::vector<std::string>> by_dir;
  for (const auto& entry : entries) {
    if (entry.kind == git::EntryKind::kSymlink) {
      by_dir[parentDir(entry.path)].push_back(entry.path);
    }
  }
  std::map<std::string, std::string> targets;
  if (by_dir.empty()) {
    return targets;
  }
  const std::string scratch = scratch_dir + "/links-" + randomHex(8);
  int index = 0;
  Status status;
  for (const auto& [dir, links] : by_dir) {
    const std::string dest = scratch + "/" + std::to_string(index++);
    auto exported = mirror.exportTree(commit, dir, dest);
    if (!exported.ok()) {
      status = fail(exported.error());
      break;
    }
    for (const auto& link : links) {
      auto target = readLink(dest + "/" + baseName(link));
      if (!target.ok()) {
        status = fail(target.error());
        break;
      }
      targets[link] = std::move(target).value();
    }
    if (!status.ok()) {
      break;
    }
  }
  removeAll(scratch);
  if (!status.ok()) {
    return fail(status.error());
  }
  return targets;
}

}  // namespace

Result<std::vector<git::TreeEntry>> selectedEntries(const git::Mirror& mirror, std::string_view commit,
                                                    const PathSelector& selector) {
  auto all = mirror.listFiles(commit);
  if (!all.ok()) {
    return fail(all.error());
  }
  std::vector<git::TreeEntry> kept;
  for (auto& entry : *all) {
    if (selector.selects(entry.path)) {
      kept.push_back(std::move(entry));
    }
  }
  return kept;
}

std::string entriesDigest(const std::vector<git::TreeEntry>& entries) {
  std::string text;
  for (const auto& entry : entries) {
    text.append(entry.path).push_back('\0');
    text.push_back(static_cast<char>('0' + static_cast<int>(entry.kind)));
    text.append(entry.oid).push_back('\n');
  }
  return sha256Hex(text);
}

Result<bool> selectionChanged(const git::Mirror& mirror, std::string_view previous, std::string_view commit,
                              const PathSelector& selector) {
  if (previous.empty()) {
    return true;
  }
  if (previous == commit) {
    return false;
  }
  auto before = selectedEntries(mirror, previous, selector);
  if (!before.ok()) {
    if (before.error().kind == ErrorKind::kNotFound || before.error().kind == ErrorKind::kInvalid) {
      return true;  // the previous commit is gone from the mirror (force-push + prune)
    }
    return fail(before.error());
  }
  auto after = selectedEntries(mirror, commit, selector);
  if (!after.ok()) {
    return fail(after.error());
  }
  return entriesDigest(*before) != entriesDigest(*after);
}

Result<BuiltSource> buildSource(const git::Mirror& mirror, std::string_view commit, const PathSelector& selector,
                                uint64_t max_bytes, const std::string& scratch_dir) {
  auto entries = selectedEntries(mirror, commit, selector);
  if (!entries.ok()) {
    return fail(entries.error());
  }
  BuiltSource built;
  source::Archive archive;
  archive.commit = std::string(commit);
  archive.paths = selector.patterns();
  uint64_t total = 0;
  for (const auto& entry : *entries) {
    if (entry.kind == git::EntryKind::kSubmodule) {
      ++built.skipped_submodules;
      continue;
    }
    if (entry.kind == git::EntryKind::kSymlink) {
      continue;
    }
    auto content = mirror.readFile(commit, entry.path, max_bytes - std::min(total, max_bytes));
    if (!content.ok()) {
      // kInvalid here is a file over the remaining size budget (readFile's limit).
      Error error = content.error();
      error.message = "cannot pack " + entry.path + " (sources under paths are limited to " +
                      std::to_string(max_bytes) + " bytes): " + error.message;
      return fail(std::move(error));
    }
    total += content->size();
    if (total > max_bytes) {
      return fail(ErrorKind::kInvalid,
                  "sources under the GitRepo's paths exceed " + std::to_string(max_bytes) + " bytes", "buildSource");
    }
    archive.files.push_back(source::File{entry.path, entry.kind == git::EntryKind::kExecutable ? "100755" : "100644",
                                         std::move(content).value()});
  }
  auto targets = symlinkTargets(mirror, commit, *entries, scratch_dir);
  if (!targets.ok()) {
    return fail(targets.error());
  }
  for (auto& [path, target] : *targets) {
    archive.symlinks.push_back(source::Symlink{path, target});
  }
  built.files = archive.files.size();
  built.symlinks = archive.symlinks.size();
  built.content_bytes = archive.contentBytes();
  built.encoded = source::encode(archive);
  built.object_name = source::objectName(built.encoded);
  return built;
}

}  // namespace flotilla::poller
