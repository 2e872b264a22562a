// fuzz/fuzz_support.h
//
// What every fuzz target shares: the input as text, splitting it into parts, and the invariant check that turns a
// broken property (a value that does not survive its own encoder) into a crash libFuzzer records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

namespace flotilla::fuzz {

inline std::string_view asText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

//! Splits `text` at the first `separator`: (before, after). Without one: (text, "").
inline std::pair<std::string_view, std::string_view> splitOnce(std::string_view text, std::string_view separator) {
  size_t at = text.find(separator);
  if (at == std::string_view::npos) {
    return {text, {}};
  }
  return {text.substr(0, at), text.substr(at + separator.size())};
}

//! A property every input must keep. Aborts (a crash for libFuzzer, which saves the input) naming what broke.
inline void check(bool holds, const char* what, const std::string& detail = {}) {
  if (!holds) {
    std::fprintf(stderr, "fuzz invariant broken: %s\n%s\n", what, detail.c_str());
    std::abort();
  }
}

}  // namespace flotilla::fuzz
