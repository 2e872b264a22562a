// flotilla/core/ascii.h
//
// ASCII-only case helpers. Kubernetes names, URL schemes, HTTP headers, hex digits and host names are ASCII by
// definition, so these never consult the C locale (std::tolower does) and leave bytes >= 0x80 untouched.
#pragma once

#include <string>
#include <string_view>

namespace flotilla {

//! 'A'..'Z' to 'a'..'z'; every other byte unchanged.
constexpr char asciiLower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}
//! 'a'..'z' to 'A'..'Z'; every other byte unchanged.
constexpr char asciiUpper(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}

//! `text` with ASCII letters lower-cased.
std::string toLowerAscii(std::string_view text);
//! `text` with ASCII letters upper-cased.
std::string toUpperAscii(std::string_view text);
//! Equal when compared with ASCII letters folded to one case ("Content-Type" == "content-type").
bool equalsIgnoreCase(std::string_view a, std::string_view b);

}  // namespace flotilla
