#include "flotilla/secrets/secret_store.h"

#include <algorithm>
#include <filesystem>

#include "flotilla/core/json.h"
#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/model/labels.h"

namespace flotilla::secrets {
namespace {

namespace fs = std::filesystem;

constexpr const char* kWhere = "credentials";

std::string inQuotes(std::string_view name) {
  return "\"" + std::string(name) + "\"";
}

Result<SecretData> readSecretDir(const fs::path& dir, std::string_view name) {
  SecretData data;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string key = it->path().filename().string();
    if (startsWith(key, ".")) {
      continue;  // Kubernetes volume internals ("..data", "..2026_..."), editor files
    }
    if (!fs::is_regular_file(it->path(), ec)) {
      continue;
    }
    auto content = readFile(it->path().string());
    if (!content.ok()) {
      return fail(ErrorKind::kPermanent, "cannot read key " + inQuotes(key) + " of secret " + inQuotes(name), kWhere);
    }
    data[key] = std::move(content).value();
  }
  if (ec) {
    return fail(ErrorKind::kPermanent, "cannot list secret " + inQuotes(name) + ": " + ec.message(), kWhere);
  }
  return data;
}

Result<SecretData> readSecretFile(const fs::path& file, std::string_view name) {
  auto content = readFile(file.string());
  if (!content.ok()) {
    return fail(ErrorKind::kPermanent, "cannot read secret " + inQuotes(name), kWhere);
  }
  // Never pass the parser's message on: it may quote the secret's text.
  auto parsed = parseYaml(*content, file.filename().string());
  if (!parsed.ok() || !parsed->isObject()) {
    return fail(ErrorKind::kPermanent, "secret " + inQuotes(name) + " is not a YAML/JSON map of keys", kWhere);
  }
  const Json& root = *parsed;
  SecretData data;
  const bool manifest = root.getString("kind") == "Secret";
  auto take = [&](const Json& map, bool base64) -> Status {
    for (const auto& [key, value] : map.asObject()) {
      if (!value.isString()) {
        return fail(ErrorKind::kPermanent, "key " + inQuotes(key) + " of secret " + inQuotes(name) + " is not a string",
                    kWhere);
      }
      if (base64) {
        auto decoded = base64Decode(value.asString());
        if (!decoded.ok()) {
          return fail(ErrorKind::kPermanent, "data." + key + " of secret " + inQuotes(name) + " is not valid base64",
                      kWhere);
        }
        data[key] = std::move(decoded).value();
      } else {
        data[key] = value.asString();
      }
    }
    return {};
  };
  if (!manifest) {
    FLOTILLA_TRY(take(root, false));
    return data;
  }
  for (const auto& [field, value] : root.asObject()) {
    if (field == "data" || field == "stringData") {
      if (!value.isObject()) {
        return fail(ErrorKind::kPermanent, field + " of secret " + inQuotes(name) + " is not a map", kWhere);
      }
      FLOTILLA_TRY(take(value, field == "data"));
    }
  }
  return data;
}

constexpr const char* kSuffixes[] = {".yaml", ".yml", ".json"};

bool hasSecretFileSuffix(const std::string& file) {
  return std::any_of(std::begin(kSuffixes), std::end(kSuffixes),
                     [&](const char* suffix) { return endsWith(file, suffix); });
}

//! Why `entry` (directly in the credentials dir) belongs to the flat layout; "" when it is a workspace directory.
std::string flatLayoutReason(const fs::directory_entry& entry) {
  std::error_code ec;
  if (!entry.is_directory(ec)) {
    return "is a file: secrets are read per workspace";
  }
  for (fs::directory_iterator it(entry.path(), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!startsWith(name, ".") && !it->is_directory(ec) && !hasSecretFileSuffix(name)) {
      return "holds the key file \"" + name + "\": it is a secret, and secrets are read per workspace";
    }
  }
  return {};
}

}  // namespace

Result<SecretData> readSecret(const std::string& dir, std::string_view workspace, std::string_view name) {
  if (!model::isDns1123Subdomain(name) || name.find("..") != std::string_view::npos) {
    return fail(ErrorKind::kInvalid, "secret name " + inQuotes(name) + " is not a valid Kubernetes name", kWhere);
  }
  if (!model::isDns1123Label(workspace)) {
    return fail(ErrorKind::kInvalid, "workspace " + inQuotes(workspace) + " is not a valid namespace name", kWhere);
  }
  const std::string not_found = "secret " + inQuotes(name) + " not found in workspace " + inQuotes(workspace);
  if (dir.empty()) {
    return fail(ErrorKind::kNotFound, not_found + ": no --credentials-dir is configured", kWhere);
  }
  std::error_code ec;
  const fs::path base = fs::path(dir) / std::string(workspace);
  if (fs::is_directory(base / std::string(name), ec)) {
    return readSecretDir(base / std::string(name), name);
  }
  for (const char* suffix : kSuffixes) {
    const fs::path file = base / (std::string(name) + suffix);
    if (fs::is_regular_file(file, ec)) {
      return readSecretFile(file, name);
    }
  }
  return fail(ErrorKind::kNotFound, not_found, kWhere);
}

Status checkLayout(const std::string& dir) {
  std::error_code ec;
  if (dir.empty() || !fs::exists(dir, ec)) {
    return {};
  }
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (startsWith(name, ".")) {
      continue;
    }
    if (const std::string reason = flatLayoutReason(*it); !reason.empty()) {
      std::string message = "--credentials-dir " + dir;
      message += ": " + inQuotes(name);
      message += " " + reason;
      message += " (move it to <dir>/<workspace>/" + name;
      message += ", the workspace being the namespace of the GitRepos that name it)";
      return fail(ErrorKind::kInvalid, message, kWhere);
    }
  }
  if (ec) {
    return fail(ErrorKind::kPermanent, "cannot list --credentials-dir " + dir + ": " + ec.message(), kWhere);
  }
  return {};
}

}  // namespace flotilla::secrets
