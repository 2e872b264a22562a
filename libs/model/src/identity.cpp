#include "flotilla/model/identity.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <vector>

#include <openssl/evp.h>

#include "flotilla/core/ascii.h"
#include "flotilla/core/util.h"

namespace flotilla::model {
namespace {

// Fleet shortens and disambiguates names with md5; we must produce the same names, so we use it too
// (a naming function, not a security one).
std::string md5Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  int ok = EVP_Digest(data.data(), data.size(), digest, &length, EVP_md5(), nullptr);
  assert(ok == 1);  // the default provider always has md5
  (void)ok;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(static_cast<size_t>(length) * 2);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

bool isAllowed(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-';
}

// Fleet's names.Limit: keep the name if it fits, else a prefix, "-" and 5 hex of md5, never with a double dash.
std::string limit(const std::string& s, size_t count) {
  if (s.size() <= count) {
    return s;
  }
  constexpr size_t kHexLength = 5;
  std::string separator = "-";
  if (count <= kHexLength + separator.size()) {
    return s.substr(0, count);
  }
  size_t keep = count - kHexLength - separator.size();
  if (s[keep - 1] == '-') {
    separator.clear();
  }
  return s.substr(0, keep) + separator + md5Hex(s).substr(0, kHexLength);
}

// Go's path.Clean for a relative or absolute slash-separated path ("" -> ".").
std::string cleanPath(std::string_view path) {
  bool rooted = !path.empty() && path.front() == '/';
  std::vector<std::string> parts;
  for (const auto& part : split(path, '/')) {
    if (part.empty() || part == ".") {
      continue;
    }
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!rooted) {
        parts.push_back(part);
      }
      continue;
    }
    parts.push_back(part);
  }
  std::string out = rooted ? "/" : "";
  for (size_t i = 0; i < parts.size(); ++i) {
    out += (i == 0 ? "" : "/") + parts[i];
  }
  return out.empty() ? "." : out;
}

}  // namespace

std::string helmReleaseName(std::string_view name) {
  std::string original(name);
  std::string str(name);
  std::replace(str.begin(), str.end(), '/', '-');
  bool need_hex = std::any_of(str.begin(), str.end(), [](char c) { return asciiLower(c) != c; }) ||
                  !std::all_of(str.begin(), str.end(), isAllowed);
  if (need_hex) {
    str += "-" + md5Hex(str).substr(0, 8);
  }
  std::string cleaned;
  for (char c : str) {
    char lower = asciiLower(c);
    char out = isAllowed(lower) ? lower : '-';
    if (out == '-' && !cleaned.empty() && cleaned.back() == '-') {
      continue;  // runs of replaced characters and dashes become one dash
    }
    cleaned.push_back(out);
  }
  while (!cleaned.empty() && cleaned.front() == '-') {
    cleaned.erase(cleaned.begin());
  }
  while (!cleaned.empty() && cleaned.back() == '-') {
    cleaned.pop_back();
  }
  if (cleaned.empty()) {
    return md5Hex(original).substr(0, 24);
  }
  return limit(cleaned, kMaxHelmReleaseNameLength);
}

std::string bundleID(std::string_view gitrepo, std::string_view path, std::string_view fleetyaml_name) {
  if (!fleetyaml_name.empty()) {
    return std::string(fleetyaml_name);
  }
  // Go's filepath.Join(name, baseDir): join with "/" and clean.
  std::string joined = std::string(gitrepo);
  if (!path.empty()) {
    joined += "/" + std::string(path);
  }
  return helmReleaseName(cleanPath(joined));
}

std::string manifestID(std::string_view canonical_content) {
  return sha256Hex(canonical_content);
}

std::string deploymentID(std::string_view manifest_id, const Json& options) {
  return std::string(manifest_id) + ":" + sha256Hex(options.dump());
}

}  // namespace flotilla::model
