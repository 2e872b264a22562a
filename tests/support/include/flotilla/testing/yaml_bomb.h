// flotilla/testing/yaml_bomb.h
//
// A "billion laughs" YAML document for the tests of every parser that must bound alias expansion.
#pragma once

#include <string>
#include <string_view>

namespace flotilla::testing {

//! Anchor `a` is a list of ten x; each later anchor, `b` up to `last`, a list of ten aliases of the one before
//! (items joined by `separator`). The text stays small while its expansion is 10 to the number of anchors.
inline std::string yamlAliasBomb(char last, std::string_view separator) {
  std::string bomb = "a: &a [x";
  for (int i = 1; i < 10; ++i) {
    bomb += separator;
    bomb += "x";
  }
  bomb += "]\n";
  char prev = 'a';
  for (char c = 'b'; c <= last; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) {
      if (i > 0) {
        bomb += separator;
      }
      bomb += std::string("*") + prev;
    }
    bomb += "]\n";
    prev = c;
  }
  return bomb;
}

}  // namespace flotilla::testing
