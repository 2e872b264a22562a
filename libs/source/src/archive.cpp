#include "flotilla/source/archive.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include <unistd.h>

#include "flotilla/core/errno_text.h"
#include "flotilla/core/json.h"
#include "flotilla/core/util.h"

namespace flotilla::source {

namespace fs = std::filesystem;
constexpr const char* kApiVersion = "sources.flotilla.io/v1";

size_t Archive::contentBytes() const {
  size_t total = 0;
  for (const auto& file : files) {
    total += file.content.size();
  }
  return total;
}

bool isSafeRelativePath(std::string_view path) {
  if (path.empty() || path.front() == '/' || path.find('\0') != std::string_view::npos) {
    return false;
  }
  for (const auto& segment : split(path, '/')) {
    if (segment.empty() || segment == "." || segment == "..") {
      return false;
    }
  }
  return true;
}

std::string encode(const Archive& archive) {
  std::vector<const File*> files;
  files.reserve(archive.files.size());
  for (const auto& file : archive.files) {
    files.push_back(&file);
  }
  std::sort(files.begin(), files.end(), [](const File* a, const File* b) { return a->path < b->path; });
  Json root = Json::obj({{"apiVersion", kApiVersion}, {"commit", archive.commit}});
  Json paths = Json::array();
  for (const auto& path : archive.paths) {
    paths.push(path);
  }
  root["paths"] = std::move(paths);
  Json file_list = Json::array();
  for (const File* file : files) {
    file_list.push(Json::obj({{"path", file->path}, {"mode", file->mode}, {"content", base64Encode(file->content)}}));
  }
  root["files"] = std::move(file_list);
  Json link_list = Json::array();
  auto links = archive.symlinks;
  std::sort(links.begin(), links.end(), [](const Symlink& a, const Symlink& b) { return a.path < b.path; });
  for (const auto& link : links) {
    link_list.push(Json::obj({{"path", link.path}, {"target", link.target}}));
  }
  root["symlinks"] = std::move(link_list);
  return root.dump();
}

std::string objectName(std::string_view encoded) {
  return sha256Hex(encoded);
}

Result<Archive> decode(std::string_view json) {
  auto parsed = Json::parse(json);
  if (!parsed.ok()) {
    return fail(ErrorKind::kInvalid, "source archive: " + parsed.error().message);
  }
  const Json& root = *parsed;
  if (root.getString("apiVersion") != kApiVersion) {
    return fail(ErrorKind::kInvalid, "source archive: unsupported apiVersion \"" + root.getString("apiVersion") + "\"");
  }
  Archive archive;
  archive.commit = root.getString("commit");
  if (const Json* paths = root.find("paths"); paths != nullptr && paths->isArray()) {
    for (const auto& path : paths->asArray()) {
      if (path.isString()) {
        archive.paths.push_back(path.asString());
      }
    }
  }
  // One entry per path: with two, which one extract leaves on disk would depend on their order, and the encoding
  // (whose hash names the archive) would not be canonical.
  std::set<std::string, std::less<>> seen;
  if (const Json* files = root.find("files"); files != nullptr && files->isArray()) {
    for (size_t i = 0; i < files->size(); ++i) {
      const Json& entry = files->asArray()[i];
      File file;
      file.path = entry.getString("path");
      file.mode = entry.getString("mode", "100644");
      if (!isSafeRelativePath(file.path)) {
        return fail(ErrorKind::kInvalid,
                    "source archive: files[" + std::to_string(i) + "]: unsafe path \"" + file.path + "\"");
      }
      if (file.mode != "100644" && file.mode != "100755") {
        return fail(ErrorKind::kInvalid,
                    "source archive: " + file.path + ": mode \"" + file.mode + "\" is neither 100644 nor 100755");
      }
      if (!seen.insert(file.path).second) {
        return fail(ErrorKind::kInvalid, "source archive: " + file.path + ": more than one entry for this path");
      }
      auto content = base64Decode(entry.getString("content"));
      if (!content.ok()) {
        return fail(ErrorKind::kInvalid, "source archive: " + file.path + ": content is not base64");
      }
      file.content = std::move(content).value();
      archive.files.push_back(std::move(file));
    }
  }
  if (const Json* links = root.find("symlinks"); links != nullptr && links->isArray()) {
    for (const auto& entry : links->asArray()) {
      Symlink link{entry.getString("path"), entry.getString("target")};
      if (!isSafeRelativePath(link.path)) {
        return fail(ErrorKind::kInvalid, "source archive: unsafe symlink path \"" + link.path + "\"");
      }
      if (!seen.insert(link.path).second) {
        return fail(ErrorKind::kInvalid, "source archive: " + link.path + ": more than one entry for this path");
      }
      archive.symlinks.push_back(std::move(link));
    }
  }
  return archive;
}

Status extract(const Archive& archive, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return fail(ErrorKind::kPermanent, "cannot create " + dir + ": " + ec.message());
  }
  for (const auto& file : archive.files) {
    if (!isSafeRelativePath(file.path)) {
      return fail(ErrorKind::kInvalid, "unsafe path \"" + file.path + "\"");
    }
    fs::path target = fs::path(dir) / file.path;
    fs::create_directories(target.parent_path(), ec);
    FLOTILLA_TRY(writeFile(target.string(), file.content, file.mode == "100755" ? 0755 : 0644));
  }
  for (const auto& link : archive.symlinks) {
    if (!isSafeRelativePath(link.path)) {
      return fail(ErrorKind::kInvalid, "unsafe symlink path \"" + link.path + "\"");
    }
    fs::path target = fs::path(dir) / link.path;
    fs::create_directories(target.parent_path(), ec);
    fs::remove(target, ec);
    if (::symlink(link.target.c_str(), target.c_str()) != 0) {
      return fail(ErrorKind::kPermanent, "cannot create symlink " + link.path + ": " + errnoText(errno));
    }
  }
  return {};
}

Result<std::string> resolveInside(const std::string& root, std::string_view relative) {
  std::error_code ec;
  fs::path base = fs::weakly_canonical(root, ec);
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot resolve " + root + ": " + ec.message());
  }
  if (!relative.empty() && relative.front() == '/') {
    return fail(ErrorKind::kInvalid, std::string(relative) + ": absolute paths are not allowed");
  }
  fs::path resolved = fs::weakly_canonical(base / fs::path(relative), ec);
  if (ec) {
    return fail(ErrorKind::kInvalid, std::string(relative) + ": " + ec.message());
  }
  auto [end_base, end_resolved] = std::mismatch(base.begin(), base.end(), resolved.begin(), resolved.end());
  if (end_base != base.end()) {
    return fail(ErrorKind::kInvalid, std::string(relative) + ": resolves outside the repository checkout");
  }
  return resolved.string();
}

}  // namespace flotilla::source
