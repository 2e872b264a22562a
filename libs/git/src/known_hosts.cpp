#include "flotilla/git/known_hosts.h"

#include <algorithm>
#include <cctype>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "flotilla/core/ascii.h"
#include "flotilla/core/util.h"

namespace flotilla::git {
namespace {

constexpr const char* kWhere = "parseKnownHosts";

std::vector<std::string> fields(std::string_view line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) {
      ++i;
    }
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') {
      ++i;
    }
    if (i > start) {
      out.emplace_back(line.substr(start, i - start));
    }
  }
  return out;
}

// The SSH wire format starts with the key type as a length-prefixed string.
std::string blobKeyType(std::string_view blob) {
  if (blob.size() < 4) {
    return {};
  }
  auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(blob[i])); };
  uint32_t len = (byte(0) << 24) | (byte(1) << 16) | (byte(2) << 8) | byte(3);
  if (len > blob.size() - 4) {
    return {};
  }
  return std::string(blob.substr(4, len));
}

// OpenSSH-style glob: '*' any run, '?' one character; host names compare case-insensitively.
bool globMatch(std::string_view pattern, std::string_view text) {
  size_t p = 0;
  size_t t = 0;
  size_t star = std::string_view::npos;
  size_t mark = 0;
  auto same = [](char a, char b) { return asciiLower(a) == asciiLower(b); };
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || same(pattern[p], text[t]))) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') {
    ++p;
  }
  return p == pattern.size();
}

}  // namespace

Result<std::vector<KnownHost>> parseKnownHosts(std::string_view text) {
  std::vector<KnownHost> out;
  int number = 0;
  for (const auto& raw : split(text, '\n')) {
    ++number;
    std::string line = trim(raw);
    if (line.empty() || line.front() == '#') {
      continue;
    }
    auto parts = fields(line);
    KnownHost entry;
    entry.line = number;
    size_t i = 0;
    if (!parts.empty() && parts[0].front() == '@') {
      entry.marker = parts[0];
      if (entry.marker != "@revoked" && entry.marker != "@cert-authority") {
        return fail(ErrorKind::kInvalid,
                    "known_hosts line " + std::to_string(number) + ": unknown marker " + entry.marker, kWhere);
      }
      i = 1;
    }
    if (parts.size() < i + 3) {
      return fail(ErrorKind::kInvalid,
                  "known_hosts line " + std::to_string(number) + ": expected '<hosts> <key type> <base64 key>'",
                  kWhere);
    }
    const std::string& hosts = parts[i];
    entry.key_type = parts[i + 1];
    auto blob = base64Decode(parts[i + 2]);
    if (!blob.ok() || blob->empty()) {
      return fail(ErrorKind::kInvalid, "known_hosts line " + std::to_string(number) + ": key is not valid base64",
                  kWhere);
    }
    entry.key_blob = std::move(*blob);
    if (blobKeyType(entry.key_blob) != entry.key_type) {
      return fail(ErrorKind::kInvalid,
                  "known_hosts line " + std::to_string(number) + ": key data does not match type " + entry.key_type,
                  kWhere);
    }
    if (hosts.rfind("|1|", 0) == 0) {
      auto pieces = split(hosts, '|');  // "", "1", salt, hash
      if (pieces.size() != 4) {
        pieces.resize(4);
      }
      auto salt = base64Decode(pieces[2]);
      auto hash = base64Decode(pieces[3]);
      if (!salt.ok() || !hash.ok() || salt->empty() || hash->size() != 20) {
        return fail(ErrorKind::kInvalid, "known_hosts line " + std::to_string(number) + ": malformed hashed host",
                    kWhere);
      }
      entry.hashed_salt = std::move(*salt);
      entry.hashed_host = std::move(*hash);
    } else {
      entry.patterns = split(hosts, ',');
    }
    out.push_back(std::move(entry));
  }
  return out;
}

bool knownHostMatches(const KnownHost& entry, std::string_view host_name) {
  if (!entry.hashed_host.empty()) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    HMAC(EVP_sha1(), entry.hashed_salt.data(), static_cast<int>(entry.hashed_salt.size()),
         reinterpret_cast<const unsigned char*>(host_name.data()), host_name.size(), digest, &length);
    return length == entry.hashed_host.size() &&
           std::equal(entry.hashed_host.begin(), entry.hashed_host.end(), reinterpret_cast<const char*>(digest));
  }
  bool matched = false;
  for (const auto& pattern : entry.patterns) {
    if (!pattern.empty() && pattern.front() == '!') {
      if (globMatch(std::string_view(pattern).substr(1), host_name)) {
        return false;  // a negated match rules the whole line out
      }
    } else if (globMatch(pattern, host_name)) {
      matched = true;
    }
  }
  return matched;
}

HostKeyVerdict checkHostKey(const std::vector<KnownHost>& entries, std::string_view host_name,
                            std::string_view key_blob, std::string_view key_sha256) {
  auto sameKey = [&](const KnownHost& entry) {
    if (!key_blob.empty()) {
      return entry.key_blob == key_blob;
    }
    return !key_sha256.empty() && sha256Raw(entry.key_blob) == key_sha256;
  };
  for (const auto& entry : entries) {
    if (entry.marker == "@revoked" && sameKey(entry)) {
      return HostKeyVerdict::kRevoked;
    }
  }
  bool known = false;
  for (const auto& entry : entries) {
    if (!entry.marker.empty() || !knownHostMatches(entry, host_name)) {
      continue;
    }
    if (sameKey(entry)) {
      return HostKeyVerdict::kMatch;
    }
    known = true;
  }
  return known ? HostKeyVerdict::kMismatch : HostKeyVerdict::kUnknownHost;
}

std::string hostKeyFingerprint(std::string_view key_blob) {
  std::string encoded = base64Encode(sha256Raw(key_blob));
  while (!encoded.empty() && encoded.back() == '=') {
    encoded.pop_back();
  }
  return "SHA256:" + encoded;
}

}  // namespace flotilla::git
