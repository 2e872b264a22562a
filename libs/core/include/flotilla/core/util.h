// flotilla/core/util.h
//
// Small helpers used across libraries: hashing, encodings, files and names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"

namespace flotilla {

//! Lower-case hex SHA-256 of `data`.
std::string sha256Hex(std::string_view data);
//! Raw 32-byte SHA-256 digest.
std::string sha256Raw(std::string_view data);
//! Base64 (standard alphabet, padded).
std::string base64Encode(std::string_view data);
//! Base64 URL-safe alphabet, padded (what the NATS Object Store uses for names and digests).
std::string base64UrlEncode(std::string_view data);
Result<std::string> base64Decode(std::string_view text);
//! `bytes` random bytes as lower-case hex (from the OS CSPRNG).
std::string randomHex(size_t bytes);

Result<std::string> readFile(const std::string& path);
//! Writes atomically (temp file + rename) so readers never see a partial file.
Status writeFile(const std::string& path, std::string_view content, int mode = 0644);
//! Creates a fresh directory under $TMPDIR (or /tmp) named prefix-XXXXXX.
Result<std::string> makeTempDir(std::string_view prefix);
//! Recursively removes a path (no error if it does not exist).
void removeAll(const std::string& path);

std::vector<std::string> split(std::string_view text, char separator);
//! The parts with `separator` between them ("a/b/c").
std::string join(const std::vector<std::string>& parts, std::string_view separator);
std::string trim(std::string_view text);
bool startsWith(std::string_view text, std::string_view prefix);
bool endsWith(std::string_view text, std::string_view suffix);

//! An environment variable or the fallback.
std::string envOr(const char* name, std::string fallback);

}  // namespace flotilla
