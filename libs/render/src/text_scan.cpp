#include "text_scan.h"

#include <array>

namespace flotilla::render::detail {
namespace {

bool isAsciiAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool isNameChar(char c) {
  return isAsciiAlnum(c) || c == '_' || c == '.' || c == '-';
}

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

bool hasSourceExtension(std::string_view path) {
  constexpr std::array<std::string_view, 5> kExtensions = {".yaml", ".yml", ".tpl", ".txt", ".json"};
  for (std::string_view extension : kExtensions) {
    if (path.size() > extension.size() && path.substr(path.size() - extension.size()) == extension) {
      return true;
    }
  }
  return false;
}

//! The path that ends at `end` (exclusive) in `text`, or empty: the longest run of name characters and '/'
//! before `end`, cut after its last "//" and without leading '/', with at least one '/'.
std::string_view pathEndingAt(std::string_view text, size_t end) {
  size_t begin = end;
  while (begin > 0 && (isNameChar(text[begin - 1]) || text[begin - 1] == '/')) {
    --begin;
  }
  std::string_view path = text.substr(begin, end - begin);
  if (size_t doubled = path.rfind("//"); doubled != std::string_view::npos) {
    path = path.substr(doubled + 2);
  }
  while (!path.empty() && path.front() == '/') {
    path.remove_prefix(1);
  }
  const size_t slash = path.find('/');
  if (slash == std::string_view::npos || path.back() == '/' || !hasSourceExtension(path)) {
    return {};
  }
  return path;
}

}  // namespace

bool isChartName(std::string_view name) {
  if (name.empty() || !(isAsciiAlnum(name.front()) || name.front() == '_')) {
    return false;
  }
  for (char c : name) {
    if (!isNameChar(c)) {
      return false;
    }
  }
  return true;
}

std::optional<SourceLocation> findSourceLocation(std::string_view text) {
  for (size_t colon = text.find(':'); colon != std::string_view::npos; colon = text.find(':', colon + 1)) {
    size_t digits_end = colon + 1;
    while (digits_end < text.size() && isDigit(text[digits_end])) {
      ++digits_end;
    }
    if (digits_end == colon + 1) {
      continue;
    }
    std::string_view path = pathEndingAt(text, colon);
    if (!path.empty()) {
      return SourceLocation{std::string(path), std::string(text.substr(colon + 1, digits_end - colon - 1))};
    }
  }
  return std::nullopt;
}

}  // namespace flotilla::render::detail
