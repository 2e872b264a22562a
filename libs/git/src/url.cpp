#include "flotilla/git/url.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "flotilla/core/ascii.h"

namespace flotilla::git {
namespace {

constexpr const char* kWhere = "parseGitUrl";

bool validHost(std::string_view host) {
  return !host.empty() && std::all_of(host.begin(), host.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '.' || c == '-' || c == '_' || c == ':' || c == '%';
  });
}

Result<int> parsePort(std::string_view text) {
  if (text.empty() || text.size() > 5 || !std::all_of(text.begin(), text.end(), ::isdigit)) {
    return fail(ErrorKind::kInvalid, "invalid port '" + std::string(text) + "' in git URL", kWhere);
  }
  int port = std::stoi(std::string(text));
  if (port < 1 || port > 65535) {
    return fail(ErrorKind::kInvalid, "port " + std::string(text) + " out of range in git URL", kWhere);
  }
  return port;
}

}  // namespace

int GitUrl::effectivePort() const {
  if (port != 0) {
    return port;
  }
  if (scheme == "https") {
    return 443;
  }
  if (scheme == "http") {
    return 80;
  }
  if (scheme == "ssh") {
    return 22;
  }
  if (scheme == "git") {
    return 9418;
  }
  return 0;
}

std::string GitUrl::knownHostsName() const {
  int used = effectivePort();
  return used == 22 ? host : "[" + host + "]:" + std::to_string(used);
}

namespace {

// A URL without "://": scp-like "user@host:path" (a ':' before any '/'), else a local path.
Result<GitUrl> parseWithoutScheme(std::string_view url, bool allow_local) {
  GitUrl out;
  auto colon = url.find(':');
  auto slash = url.find('/');
  if (colon == std::string_view::npos || colon == 0 || (slash != std::string_view::npos && colon > slash)) {
    if (!allow_local) {
      return fail(ErrorKind::kInvalid, "'" + redactUrl(url) + "' is not a git URL (local paths are not allowed)",
                  kWhere);
    }
    out.scheme = "file";
    out.path = std::string(url);
    return out;
  }
  std::string_view user_host = url.substr(0, colon);
  out.scheme = "ssh";
  out.scp_like = true;
  out.path = std::string(url.substr(colon + 1));
  if (auto at = user_host.rfind('@'); at != std::string_view::npos) {
    out.user = std::string(user_host.substr(0, at));
    user_host = user_host.substr(at + 1);
  }
  out.host = std::string(user_host);
  if (!validHost(out.host) || out.path.empty()) {
    return fail(ErrorKind::kInvalid, "malformed scp-style git URL '" + redactUrl(url) + "'", kWhere);
  }
  return out;
}

// "host", "host:port", "[v6]" or "[v6]:port" into out.host; the port text, if any, into `port_text`.
Status splitHostPort(std::string_view authority, std::string_view url, GitUrl& out,
                     std::optional<std::string_view>& port_text) {
  if (authority.empty() || authority.front() != '[') {
    auto colon = authority.rfind(':');
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      authority = authority.substr(0, colon);
    }
    out.host = std::string(authority);
    return okStatus();
  }
  auto close = authority.find(']');
  if (close == std::string_view::npos) {
    return fail(ErrorKind::kInvalid, "unterminated IPv6 address in git URL '" + redactUrl(url) + "'", kWhere);
  }
  out.host = std::string(authority.substr(1, close - 1));
  std::string_view after = authority.substr(close + 1);
  if (!after.empty()) {
    if (after.front() != ':') {
      return fail(ErrorKind::kInvalid, "malformed host in git URL '" + redactUrl(url) + "'", kWhere);
    }
    port_text = after.substr(1);
  }
  return okStatus();
}

// "[user@]host[:port]": a password in the user info is refused so it never reaches logs.
Status parseAuthority(std::string_view authority, std::string_view url, GitUrl& out) {
  if (auto at = authority.rfind('@'); at != std::string_view::npos) {
    std::string_view user_info = authority.substr(0, at);
    if (user_info.find(':') != std::string_view::npos) {
      return fail(ErrorKind::kInvalid,
                  "git URL '" + redactUrl(url) + "' embeds a password; put credentials in the repository's secret",
                  kWhere);
    }
    out.user = std::string(user_info);
    authority = authority.substr(at + 1);
  }
  std::optional<std::string_view> port_text;
  FLOTILLA_TRY(splitHostPort(authority, url, out, port_text));
  if (!validHost(out.host)) {
    return fail(ErrorKind::kInvalid, "git URL '" + redactUrl(url) + "' has no valid host", kWhere);
  }
  if (port_text) {
    auto port = parsePort(*port_text);
    FLOTILLA_TRY(port);
    out.port = *port;
  }
  return okStatus();
}

}  // namespace

Result<GitUrl> parseGitUrl(std::string_view url, bool allow_local) {
  if (url.empty()) {
    return fail(ErrorKind::kInvalid, "empty git URL", kWhere);
  }
  if (std::any_of(url.begin(), url.end(), [](unsigned char c) { return c <= 0x20 || c == 0x7f; })) {
    return fail(ErrorKind::kInvalid, "git URL contains spaces or control characters", kWhere);
  }
  auto sep = url.find("://");
  if (sep == std::string_view::npos) {
    return parseWithoutScheme(url, allow_local);
  }
  GitUrl out;
  out.scheme = toLowerAscii(url.substr(0, sep));
  if (out.scheme == "git+ssh" || out.scheme == "ssh+git") {
    out.scheme = "ssh";
  }
  if (out.scheme == "file") {
    if (!allow_local) {
      return fail(ErrorKind::kInvalid, "file:// git URLs are not allowed", kWhere);
    }
    out.path = std::string(url.substr(sep + 3));
    return out;
  }
  if (out.scheme != "https" && out.scheme != "http" && out.scheme != "ssh" && out.scheme != "git") {
    return fail(ErrorKind::kInvalid, "unsupported git URL scheme '" + out.scheme + "' (use https, http, ssh or git)",
                kWhere);
  }
  std::string_view rest = url.substr(sep + 3);
  auto path_start = rest.find_first_of("/?#");
  out.path = path_start == std::string_view::npos ? "" : std::string(rest.substr(path_start));
  FLOTILLA_TRY(parseAuthority(rest.substr(0, path_start), url, out));
  if (out.path.empty() || out.path == "/") {
    return fail(ErrorKind::kInvalid, "git URL '" + redactUrl(url) + "' names no repository path", kWhere);
  }
  return out;
}

std::string redactUrl(std::string_view url) {
  std::string out(url);
  auto sep = out.find("://");
  if (sep == std::string::npos) {
    return out;
  }
  auto cut = out.find_first_of("?#", sep + 3);
  if (cut != std::string::npos) {
    out.erase(cut);
  }
  auto path_start = out.find('/', sep + 3);
  auto at = out.rfind('@', path_start == std::string::npos ? std::string::npos : path_start);
  if (at != std::string::npos && at > sep) {
    auto colon = out.find(':', sep + 3);
    if (colon != std::string::npos && colon < at) {
      out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  return out;
}

}  // namespace flotilla::git
