#include "flotilla/core/util.h"

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <unistd.h>

#include "flotilla/core/errno_text.h"

namespace flotilla {

std::string sha256Raw(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

std::string sha256Hex(std::string_view data) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string raw = sha256Raw(data);
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

namespace {
std::string encode64(std::string_view data, const char* alphabet) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  size_t i = 0;
  auto byte = [&](size_t k) { return static_cast<unsigned char>(data[k]); };
  for (; i + 2 < data.size(); i += 3) {
    uint32_t n = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    out.push_back(alphabet[(n >> 18) & 63]);
    out.push_back(alphabet[(n >> 12) & 63]);
    out.push_back(alphabet[(n >> 6) & 63]);
    out.push_back(alphabet[n & 63]);
  }
  if (i + 1 == data.size()) {
    uint32_t n = byte(i) << 16;
    out.push_back(alphabet[(n >> 18) & 63]);
    out.push_back(alphabet[(n >> 12) & 63]);
    out += "==";
  } else if (i + 2 == data.size()) {
    uint32_t n = (byte(i) << 16) | (byte(i + 1) << 8);
    out.push_back(alphabet[(n >> 18) & 63]);
    out.push_back(alphabet[(n >> 12) & 63]);
    out.push_back(alphabet[(n >> 6) & 63]);
    out.push_back('=');
  }
  return out;
}
}  // namespace

std::string base64Encode(std::string_view data) {
  return encode64(data, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
}
std::string base64UrlEncode(std::string_view data) {
  return encode64(data, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_");
}

Result<std::string> base64Decode(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') {
      return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
      return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
      return c - '0' + 52;
    }
    if (c == '+' || c == '-') {
      return 62;
    }
    if (c == '/' || c == '_') {
      return 63;
    }
    return -1;
  };
  std::string out;
  uint32_t accumulator = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=' || c == '\n' || c == '\r') {
      continue;
    }
    int v = value(c);
    if (v < 0) {
      return fail(ErrorKind::kInvalid, "invalid base64 character");
    }
    accumulator = (accumulator << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((accumulator >> bits) & 0xff));
    }
  }
  return out;
}

std::string randomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

Result<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(errno == ENOENT ? ErrorKind::kNotFound : ErrorKind::kPermanent,
                "cannot read " + path + ": " + errnoText(errno));
  }
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

Status writeFile(const std::string& path, std::string_view content, int mode) {
  std::string temp = path + ".tmp-" + randomHex(4);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return fail(ErrorKind::kPermanent, "cannot write " + temp + ": " + errnoText(errno));
    }
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!out) {
      return fail(ErrorKind::kPermanent, "short write to " + temp);
    }
  }
  std::filesystem::permissions(temp, static_cast<std::filesystem::perms>(mode));
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    return fail(ErrorKind::kPermanent, "cannot rename " + temp + " to " + path + ": " + errnoText(errno));
  }
  return {};
}

Result<std::string> makeTempDir(std::string_view prefix) {
  std::string base = envOr("TMPDIR", "/tmp");
  std::string templ = base + "/" + std::string(prefix) + "-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    return fail(ErrorKind::kPermanent, "mkdtemp " + templ + ": " + errnoText(errno));
  }
  return templ;
}

void removeAll(const std::string& path) {
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(separator, start);
    out.emplace_back(text.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) {
      break;
    }
    start = pos + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) {
      out += separator;
    }
    out += parts[i];
  }
  return out;
}

std::string trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) {
    return {};
  }
  size_t end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}
bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string envOr(const char* name, std::string fallback) {
  // Read while configuring at start-up (flags, kubeconfig, the CLI); no Flotilla process calls setenv or putenv,
  // so the race the check warns about (getenv against a concurrent environment change) cannot happen.
  const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe)
  return value != nullptr && *value != '\0' ? std::string(value) : std::move(fallback);
}

std::string errnoText(int error) {
  std::array<char, 256> buffer{};
  // The GNU strerror_r (glibc with _GNU_SOURCE, which g++ defines) returns the message, in `buffer` or static.
  const char* text = strerror_r(error, buffer.data(), buffer.size());
  return text != nullptr ? std::string(text) : "errno " + std::to_string(error);
}

}  // namespace flotilla
